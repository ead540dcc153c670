-- +goose Up
-- The API key that sent each refused write (or reported a rejection), so the dashboard can say
-- which key sent it; rejections recorded before have none.
ALTER TABLE rejections ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
-- When each key was last used (milliseconds, 0 never), written at most once a minute per key.
ALTER TABLE keys ADD COLUMN last_used INTEGER NOT NULL DEFAULT 0;
-- The grant the token of each resource's last write was issued to (a slot's name for a
-- semaphore), whatever the writer's scope let it see: a lease's page finds the resources last
-- written under its tokens through the index, and shows them within its viewer's scope.
-- Resources written before take the lease their last write was put down to.
ALTER TABLE resources ADD COLUMN grant_name TEXT NOT NULL DEFAULT '';
UPDATE resources SET grant_name = lease;
CREATE INDEX resources_grant ON resources (grant_name, name) WHERE grant_name <> '';

-- +goose Down
DROP INDEX resources_grant;
ALTER TABLE resources DROP COLUMN grant_name;
ALTER TABLE keys DROP COLUMN last_used;
ALTER TABLE rejections DROP COLUMN key_id;
