-- +goose Up
-- Cooperative handover: the request that the holder of a grant let it go, one per grant (a
-- repeat replaces it); it goes with its grant.
CREATE TABLE handovers (
    token        bigint PRIMARY KEY REFERENCES grants (token) ON DELETE CASCADE,
    to_holder    text   NOT NULL DEFAULT '',
    reason       text   NOT NULL DEFAULT '',
    requested_by text   NOT NULL DEFAULT '',
    requested_at bigint NOT NULL
);

-- What an event carries beyond its columns, as JSON (a handover's target and reason).
ALTER TABLE events ADD COLUMN detail text;

-- +goose Down
ALTER TABLE events DROP COLUMN detail;
DROP TABLE handovers;
