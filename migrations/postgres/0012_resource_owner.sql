-- +goose Up
-- The API key that wrote each resource last, whose quota it counts against
-- (--max-resources-per-key, --max-resource-bytes-per-key): a write counts the key's other
-- resources and their bytes through the index, under the key's advisory lock. Resources
-- written before have no owner.
ALTER TABLE resources ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX resources_owner ON resources (owner) WHERE owner <> '';

-- +goose Down
DROP INDEX resources_owner;
ALTER TABLE resources DROP COLUMN owner;
