-- +goose Up
-- Sessions of holders (not the dashboard's sign-in sessions): many leases kept alive together.
-- The session's secret ID is kept only as its SHA-256; ref is its public name.
CREATE TABLE lease_sessions (
    ref        text COLLATE "C" PRIMARY KEY,
    hash       bytea  NOT NULL UNIQUE,
    holder     text   NOT NULL,
    ttl_ms     bigint NOT NULL,
    metadata   text,
    owner      text   NOT NULL DEFAULT '',
    created_at bigint NOT NULL,
    renewed_at bigint NOT NULL,
    expires_at bigint NOT NULL,
    closed_at  bigint
);
CREATE INDEX lease_sessions_expires ON lease_sessions (expires_at);

-- The session a grant was acquired under ('' for none): it expires with it.
ALTER TABLE grants ADD COLUMN session text NOT NULL DEFAULT '';
CREATE INDEX grants_open_session ON grants (session) WHERE ended_at IS NULL AND session <> '';

-- +goose Down
DROP INDEX grants_open_session;
ALTER TABLE grants DROP COLUMN session;
DROP TABLE lease_sessions;
