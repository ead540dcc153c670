-- +goose Up
-- The names and holders of the open grants, with trigram indexes, for the overview's filters on
-- a part of a name or holder (LIKE '%part%'). They live in a table of their own, written when a
-- grant opens and when it ends: an index on grants itself takes an entry at every renewal
-- (a renewal changes indexed columns, so PostgreSQL writes every index of the row again), and
-- trigram entries are costly. The trigger of 0016 keeps the table with the count.
-- pg_trgm ships with PostgreSQL (contrib) and is a trusted extension, which a database's owner
-- may create. Where it cannot be created (not installed, or no CREATE right on the database)
-- the migration goes on without the indexes: the filters answer the same, by reading every row
-- of the table.
CREATE TABLE open_text (
    token  bigint PRIMARY KEY,
    name   text COLLATE "C" NOT NULL,
    holder text NOT NULL
);
INSERT INTO open_text (token, name, holder) SELECT token, name, holder FROM grants WHERE ended_at IS NULL;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION open_grants_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO open_text (token, name, holder) SELECT token, name, holder FROM new_rows WHERE ended_at IS NULL;
        GET DIAGNOSTICS d = ROW_COUNT;
    ELSIF TG_OP = 'UPDATE' THEN
        -- A grant never opens again once ended: an update only ends grants (a renewal, the
        -- most common, ends none, and costs this one count).
        SELECT (SELECT count(*) FROM new_rows n WHERE n.ended_at IS NULL)
             - (SELECT count(*) FROM old_rows o WHERE o.ended_at IS NULL) INTO d;
        IF d <> 0 THEN
            DELETE FROM open_text t USING new_rows n WHERE t.token = n.token AND n.ended_at IS NOT NULL;
        END IF;
    ELSE
        DELETE FROM open_text t USING old_rows o WHERE t.token = o.token;
        SELECT -count(*) INTO d FROM old_rows WHERE ended_at IS NULL;
    END IF;
    IF d <> 0 THEN
        INSERT INTO open_grants_delta (n) VALUES (d);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

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
        CREATE INDEX IF NOT EXISTS open_text_name_trgm ON open_text USING gin (name gin_trgm_ops);
        CREATE INDEX IF NOT EXISTS open_text_holder_trgm ON open_text USING gin (holder gin_trgm_ops);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX IF EXISTS open_text_holder_trgm;
DROP INDEX IF EXISTS open_text_name_trgm;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION open_grants_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT count(*) INTO d FROM new_rows WHERE ended_at IS NULL;
    ELSIF TG_OP = 'UPDATE' THEN
        SELECT (SELECT count(*) FROM new_rows WHERE ended_at IS NULL)
             - (SELECT count(*) FROM old_rows WHERE ended_at IS NULL) INTO d;
    ELSE
        SELECT -count(*) INTO d FROM old_rows WHERE ended_at IS NULL;
    END IF;
    IF d <> 0 THEN
        INSERT INTO open_grants_delta (n) VALUES (d);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TABLE open_text;
