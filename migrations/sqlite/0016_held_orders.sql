-- +goose Up
-- The held leases filtered and ordered over all of them (Store.Held), each order a keyset
-- over an index of the open grants: by name (with the holder, so that a filter on name or
-- holder, and its count, reads this index alone), by expiry (grants_open), by the instant a
-- renewal is late (renewed_at + ttl/2, then the token that breaks ties, and the name, so that
-- counting the late ones reads no row: a renewal rewrites this entry, as it does grants_open's)
-- and by token (newest first; a renewal does not touch it).
DROP INDEX grants_open_name;
CREATE INDEX grants_open_name ON grants (name, holder) WHERE ended_at IS NULL;
CREATE INDEX grants_open_late ON grants (renewed_at + ttl_ms / 2, token, name) WHERE ended_at IS NULL;
CREATE INDEX grants_open_newest ON grants (token) WHERE ended_at IS NULL;

-- +goose Down
DROP INDEX grants_open_newest;
DROP INDEX grants_open_late;
DROP INDEX grants_open_name;
CREATE INDEX grants_open_name ON grants (name) WHERE ended_at IS NULL;
