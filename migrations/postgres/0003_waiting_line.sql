-- +goose Up
-- The waiting line of acquire, shared by every replica: one row per request waiting for a name,
-- first come first served by id. A row is inserted under its name's row lock, so ids grow in
-- the order waiters joined a name's line. A waiter is live while its replica holds the session
-- advisory lock (class 1280005968, replica); a replica that dies loses the lock with its
-- connection, and its waiters are deleted by the next replica that looks at their line.
CREATE SEQUENCE replicas AS integer CYCLE;

CREATE TABLE waiters (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name      text COLLATE "C" NOT NULL,
    replica   integer NOT NULL,
    joined_at bigint  NOT NULL
);
CREATE INDEX waiters_name ON waiters (name, id);

-- +goose Down
DROP TABLE waiters;
DROP SEQUENCE replicas;
