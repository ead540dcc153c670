-- +goose Up
-- The open grants by name and by owning key, without their expiry: a renewal changes only
-- expires_at (with ttl_ms and renewed_at), so it now rewrites one index entry (grants_open)
-- instead of three. Counts of held leases take the open ones from these indexes and subtract
-- the few open ones already past expiry (not yet recorded by the sweeper) found by grants_open.
DROP INDEX grants_open_name;
CREATE INDEX grants_open_name ON grants (name) WHERE ended_at IS NULL;
DROP INDEX grants_open_owner;
CREATE INDEX grants_open_owner ON grants (owner) WHERE ended_at IS NULL;
-- No query reads the grants of a name by this index (a name's current grant is found through
-- names, its history through events), and every acquire wrote an entry to it.
DROP INDEX grants_name;

-- +goose Down
CREATE INDEX grants_name ON grants (name, token);
DROP INDEX grants_open_owner;
CREATE INDEX grants_open_owner ON grants (owner, expires_at) WHERE ended_at IS NULL;
DROP INDEX grants_open_name;
CREATE INDEX grants_open_name ON grants (name, expires_at) WHERE ended_at IS NULL;
