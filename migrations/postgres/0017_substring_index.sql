-- +goose Up
-- Trigram indexes of the open grants' names and holders, for the overview's filters on a part
-- of a name or holder (LIKE '%part%'): pg_trgm ships with PostgreSQL (contrib) and is a trusted
-- extension, which a database's owner may create. Where it cannot be created (not installed,
-- or no CREATE right on the database) the migration goes on without the indexes: the filters
-- answer the same, by reading every open grant.
-- +goose StatementBegin
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm not available (%): the filters on a part of a name or holder read every open grant', SQLERRM;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE INDEX IF NOT EXISTS grants_open_name_trgm ON grants USING gin (name gin_trgm_ops) WHERE ended_at IS NULL;
        CREATE INDEX IF NOT EXISTS grants_open_holder_trgm ON grants USING gin (holder gin_trgm_ops) WHERE ended_at IS NULL;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX IF EXISTS grants_open_holder_trgm;
DROP INDEX IF EXISTS grants_open_name_trgm;
