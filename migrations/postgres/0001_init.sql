-- +goose Up
-- Instants are bigint milliseconds since the Unix epoch, UTC, read from the database's clock;
-- durations are milliseconds. Names and other ordered keys use the "C" collation: byte order,
-- as the SQLite backend and the cursors expect.

-- The last token ever issued (invariant 2), one row. Every grant locks it, so grants are
-- serialized and tokens grow in commit order across all replicas.
CREATE TABLE tokens (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    last bigint  NOT NULL
);
INSERT INTO tokens (last) VALUES (0);

-- The last event seq given, one row. A writing transaction takes it just before COMMIT and
-- holds it to the end, so seqs become visible in order (a reader never sees 42 before 41).
CREATE TABLE event_seq (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    last bigint  NOT NULL
);
INSERT INTO event_seq (last) VALUES (0);

-- One row per grant, keyed by its fencing token. The lease ID is kept only as a SHA-256 hash.
CREATE TABLE grants (
    token         bigint PRIMARY KEY,
    name          text COLLATE "C" NOT NULL,
    holder        text   NOT NULL,
    id_hash       bytea  NOT NULL UNIQUE,
    ttl_ms        bigint NOT NULL,
    lock_delay_ms bigint NOT NULL,
    acquired_at   bigint NOT NULL,
    renewed_at    bigint NOT NULL,
    expires_at    bigint NOT NULL,
    ended_at      bigint,
    end_kind      text CHECK (end_kind IN ('released', 'expired', 'revoked')),
    metadata      text,
    owner         text   NOT NULL DEFAULT ''
);
CREATE INDEX grants_open ON grants (expires_at) WHERE ended_at IS NULL;
CREATE INDEX grants_name ON grants (name, token);
CREATE INDEX grants_open_name ON grants (name, expires_at) WHERE ended_at IS NULL;
CREATE INDEX grants_open_owner ON grants (owner, expires_at) WHERE ended_at IS NULL;

-- Every name ever used, with its current (last) grant. The row is the name's lock: acquire and
-- revoke take it FOR UPDATE. token is NULL only for a name whose first acquire did not grant.
CREATE TABLE names (
    name  text COLLATE "C" PRIMARY KEY,
    token bigint REFERENCES grants (token)
);

CREATE TABLE events (
    seq         bigint PRIMARY KEY,
    type        text   NOT NULL,
    name        text COLLATE "C" NOT NULL,
    token       bigint NOT NULL,
    holder      text   NOT NULL,
    at          bigint NOT NULL,
    expires_at  bigint,
    metadata    text,
    resource    text,
    recorded_at bigint NOT NULL,
    actor       text   NOT NULL DEFAULT ''
);
CREATE INDEX events_name ON events (name, seq);
CREATE INDEX events_recorded ON events (recorded_at);

-- Idempotency keys of acquire, kept 24 h. The lease ID of such a grant is derived from the
-- client's key and the salt, so a retry gets it back without the server storing it.
CREATE TABLE idempotency (
    key_hash    bytea PRIMARY KEY,
    name        text   NOT NULL,
    fingerprint bytea  NOT NULL,
    salt        bytea  NOT NULL,
    token       bigint NOT NULL,
    created_at  bigint NOT NULL
);
CREATE INDEX idempotency_created ON idempotency (created_at);

CREATE TABLE resources (
    name         text COLLATE "C" PRIMARY KEY,
    fence        bigint NOT NULL,
    version      bigint NOT NULL,
    value        bytea  NOT NULL,
    content_type text   NOT NULL,
    updated_at   bigint NOT NULL,
    lease        text   NOT NULL DEFAULT '',
    holder       text   NOT NULL DEFAULT ''
);

CREATE TABLE rejections (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    resource        text   NOT NULL,
    lease           text   NOT NULL DEFAULT '',
    presented_token bigint NOT NULL,
    current_fence   bigint NOT NULL,
    holder          text   NOT NULL DEFAULT '',
    client_addr     text   NOT NULL DEFAULT '',
    user_agent      text   NOT NULL DEFAULT '',
    reason          text   NOT NULL DEFAULT '',
    source          text   NOT NULL,
    at              bigint NOT NULL
);
CREATE INDEX rejections_resource ON rejections (resource, id);
CREATE INDEX rejections_lease ON rejections (lease, id);
CREATE INDEX rejections_at ON rejections (at);

-- API keys: only the SHA-256 of each secret is kept. prefixes is a JSON array of name prefixes
-- (empty: every name).
CREATE TABLE keys (
    id          text PRIMARY KEY,
    hash        bytea  NOT NULL UNIQUE,
    label       text   NOT NULL,
    role        text   NOT NULL CHECK (role IN ('reader', 'writer', 'admin')),
    prefixes    text   NOT NULL DEFAULT '[]',
    created_at  bigint NOT NULL,
    created_by  text   NOT NULL DEFAULT '',
    revoked_at  bigint,
    revoked_by  text   NOT NULL DEFAULT ''
);

-- Dashboard sessions: the SHA-256 of the cookie's secret, the key that signed in, and the
-- times that bound it.
CREATE TABLE sessions (
    hash         bytea PRIMARY KEY,
    key_id       text   NOT NULL REFERENCES keys (id) ON DELETE CASCADE,
    created_at   bigint NOT NULL,
    last_seen_at bigint NOT NULL,
    expires_at   bigint NOT NULL
);
CREATE INDEX sessions_key ON sessions (key_id);
CREATE INDEX sessions_expires ON sessions (expires_at);

-- +goose Down
DROP TABLE sessions;
DROP TABLE keys;
DROP TABLE rejections;
DROP TABLE resources;
DROP TABLE idempotency;
DROP TABLE events;
DROP TABLE names;
DROP TABLE grants;
DROP TABLE event_seq;
DROP TABLE tokens;
