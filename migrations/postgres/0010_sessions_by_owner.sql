-- +goose Up
-- A key's open sessions, counted when it opens another (--max-sessions-per-key): only the
-- sessions not closed are in the index, by key and then expiry, so the count reads the key's
-- unexpired ones alone.
CREATE INDEX lease_sessions_owner_open ON lease_sessions (owner, expires_at) WHERE closed_at IS NULL;

-- +goose Down
DROP INDEX lease_sessions_owner_open;
