-- +goose Up
-- Open grants by name, so counting held leases under a prefix reads only this index.
CREATE INDEX grants_open_name ON grants (name, expires_at) WHERE ended_at IS NULL;

-- +goose Down
DROP INDEX grants_open_name;
