-- +goose Up
-- The held leases filtered and ordered over all of them (Store.Held), each order a keyset
-- over an index of the open grants: by name (grants_open_name), by expiry (grants_open, here
-- with the token that breaks ties), by the instant a renewal is late (renewed_at + ttl/2) and
-- by token (newest first; a renewal does not touch it).
DROP INDEX grants_open;
CREATE INDEX grants_open ON grants (expires_at, token) WHERE ended_at IS NULL;
CREATE INDEX grants_open_late ON grants ((renewed_at + ttl_ms / 2), token) WHERE ended_at IS NULL;
CREATE INDEX grants_open_newest ON grants (token) WHERE ended_at IS NULL;

-- +goose Down
DROP INDEX grants_open_newest;
DROP INDEX grants_open_late;
DROP INDEX grants_open;
CREATE INDEX grants_open ON grants (expires_at) WHERE ended_at IS NULL;
