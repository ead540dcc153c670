-- +goose Up
-- How much the server's restarts added to each grant's expiry beyond what its holder was last
-- told (invariant 5), in total; renewal answers report it as extended_by_restart_ms.
ALTER TABLE grants ADD COLUMN restart_ext_ms INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE grants DROP COLUMN restart_ext_ms;
