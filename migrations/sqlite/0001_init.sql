-- +goose Up
-- Instants are integer milliseconds since the Unix epoch, UTC; durations are milliseconds.

-- Counters that must survive restarts: last_token (invariant 2) and clock_hwm, the newest
-- server time persisted (invariants 4 and 5).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) STRICT;
INSERT INTO meta (key, value) VALUES ('last_token', 0), ('clock_hwm', 0);

-- One row per grant, keyed by its fencing token. The lease ID is kept only as a SHA-256 hash.
CREATE TABLE grants (
    token         INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL,
    holder        TEXT    NOT NULL,
    id_hash       BLOB    NOT NULL UNIQUE,
    ttl_ms        INTEGER NOT NULL,
    lock_delay_ms INTEGER NOT NULL,
    acquired_at   INTEGER NOT NULL,
    renewed_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    ended_at      INTEGER,
    end_kind      TEXT CHECK (end_kind IN ('released', 'expired', 'revoked')),
    metadata      TEXT
) STRICT;
CREATE INDEX grants_open ON grants (expires_at) WHERE ended_at IS NULL;
CREATE INDEX grants_name ON grants (name, token);

-- The current (last) grant of every name ever used.
CREATE TABLE names (
    name  TEXT PRIMARY KEY,
    token INTEGER NOT NULL REFERENCES grants (token)
) STRICT;

CREATE TABLE events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    type       TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    token      INTEGER NOT NULL,
    holder     TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    expires_at INTEGER,
    metadata   TEXT,
    resource   TEXT,
    recorded_at INTEGER NOT NULL
) STRICT;
CREATE INDEX events_name ON events (name, seq);
CREATE INDEX events_recorded ON events (recorded_at);

-- Idempotency keys of acquire, kept 24 h. The lease ID of such a grant is derived from the
-- client's key and the salt, so a retry gets it back without the server storing it.
CREATE TABLE idempotency (
    key_hash    BLOB PRIMARY KEY,
    name        TEXT    NOT NULL,
    fingerprint BLOB    NOT NULL,
    salt        BLOB    NOT NULL,
    token       INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX idempotency_created ON idempotency (created_at);

CREATE TABLE resources (
    name         TEXT PRIMARY KEY,
    fence        INTEGER NOT NULL,
    version      INTEGER NOT NULL,
    value        BLOB    NOT NULL,
    content_type TEXT    NOT NULL,
    updated_at   INTEGER NOT NULL,
    lease        TEXT    NOT NULL DEFAULT '',
    holder       TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE rejections (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    resource        TEXT    NOT NULL,
    lease           TEXT    NOT NULL DEFAULT '',
    presented_token INTEGER NOT NULL,
    current_fence   INTEGER NOT NULL,
    holder          TEXT    NOT NULL DEFAULT '',
    client_addr     TEXT    NOT NULL DEFAULT '',
    user_agent      TEXT    NOT NULL DEFAULT '',
    reason          TEXT    NOT NULL DEFAULT '',
    source          TEXT    NOT NULL,
    at              INTEGER NOT NULL
) STRICT;
CREATE INDEX rejections_resource ON rejections (resource, id);
CREATE INDEX rejections_lease ON rejections (lease, id);
CREATE INDEX rejections_at ON rejections (at);

-- +goose Down
DROP TABLE rejections;
DROP TABLE resources;
DROP TABLE idempotency;
DROP TABLE events;
DROP TABLE names;
DROP TABLE grants;
DROP TABLE meta;
