-- +goose Up
-- The API key that sent each refused write (or reported a rejection), so the dashboard can say
-- which key sent it; rejections recorded before have none.
ALTER TABLE rejections ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
-- When each key was last used (milliseconds, 0 never), written at most once a minute per key.
ALTER TABLE keys ADD COLUMN last_used INTEGER NOT NULL DEFAULT 0;
-- The resources whose last write was put down to a lease, for the lease's page.
CREATE INDEX resources_lease ON resources (lease, name) WHERE lease <> '';

-- +goose Down
DROP INDEX resources_lease;
ALTER TABLE keys DROP COLUMN last_used;
ALTER TABLE rejections DROP COLUMN key_id;
