-- +goose Up
-- Sessions of holders (not the dashboard's sign-in sessions): many leases kept alive together.
-- The session's secret ID is kept only as its SHA-256; ref is its public name.
CREATE TABLE lease_sessions (
    ref        TEXT PRIMARY KEY,
    hash       BLOB    NOT NULL UNIQUE,
    holder     TEXT    NOT NULL,
    ttl_ms     INTEGER NOT NULL,
    metadata   TEXT,
    owner      TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    renewed_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    closed_at  INTEGER
) STRICT;
CREATE INDEX lease_sessions_expires ON lease_sessions (expires_at);

-- The session a grant was acquired under ('' for none): it expires with it.
ALTER TABLE grants ADD COLUMN session TEXT NOT NULL DEFAULT '';
CREATE INDEX grants_open_session ON grants (session) WHERE ended_at IS NULL AND session <> '';

-- +goose Down
DROP INDEX grants_open_session;
ALTER TABLE grants DROP COLUMN session;
DROP TABLE lease_sessions;
