-- +goose Up
-- API keys: only the SHA-256 of each secret is kept. prefixes is a JSON array of name prefixes
-- (empty: every name).
CREATE TABLE keys (
    id          TEXT PRIMARY KEY,
    hash        BLOB    NOT NULL UNIQUE,
    label       TEXT    NOT NULL,
    role        TEXT    NOT NULL CHECK (role IN ('reader', 'writer', 'admin')),
    prefixes    TEXT    NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL,
    created_by  TEXT    NOT NULL DEFAULT '',
    revoked_at  INTEGER,
    revoked_by  TEXT    NOT NULL DEFAULT ''
) STRICT;

-- Dashboard sessions: the SHA-256 of the cookie's secret, the key that signed in, and the
-- times that bound it (idle and absolute expiry are decided by the server's policy).
CREATE TABLE sessions (
    hash         BLOB PRIMARY KEY,
    key_id       TEXT    NOT NULL REFERENCES keys (id) ON DELETE CASCADE,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_key ON sessions (key_id);
CREATE INDEX sessions_expires ON sessions (expires_at);

-- Who did an admin action (revoke, key changes): "label (key id)".
ALTER TABLE events ADD COLUMN actor TEXT NOT NULL DEFAULT '';

-- The key that acquired each grant, so a key's held leases can be counted and capped.
ALTER TABLE grants ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX grants_open_owner ON grants (owner, expires_at) WHERE ended_at IS NULL;

-- +goose Down
DROP INDEX grants_open_owner;
ALTER TABLE grants DROP COLUMN owner;
ALTER TABLE events DROP COLUMN actor;
DROP TABLE sessions;
DROP TABLE keys;
