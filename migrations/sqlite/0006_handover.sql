-- +goose Up
-- Cooperative handover: the request that the holder of a grant let it go, one per grant (a
-- repeat replaces it); it goes with its grant.
CREATE TABLE handovers (
    token        INTEGER PRIMARY KEY REFERENCES grants (token) ON DELETE CASCADE,
    to_holder    TEXT    NOT NULL DEFAULT '',
    reason       TEXT    NOT NULL DEFAULT '',
    requested_by TEXT    NOT NULL DEFAULT '',
    requested_at INTEGER NOT NULL
) STRICT;

-- What an event carries beyond its columns, as JSON (a handover's target and reason).
ALTER TABLE events ADD COLUMN detail TEXT;

-- +goose Down
ALTER TABLE events DROP COLUMN detail;
DROP TABLE handovers;
