-- +goose Up
-- How many grants are open (ended_at IS NULL, a semaphore's slots included), so that the
-- count of every held lease reads two small tables instead of a million index entries: the
-- count at the last fold (open_grants) plus the changes written since (open_grants_delta).
-- Every statement that changes grants appends its change, in its own transaction, through the
-- trigger below: an insert-only table, so writers never wait for each other on a counter row.
-- ExpireDue folds the changes into open_grants in a transaction of its own.
CREATE TABLE open_grants (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    n   bigint  NOT NULL
);
CREATE TABLE open_grants_delta (
    id bigserial PRIMARY KEY,
    n  bigint    NOT NULL
);
INSERT INTO open_grants (n) SELECT count(*) FROM grants WHERE ended_at IS NULL;

-- +goose StatementBegin
CREATE FUNCTION open_grants_changed() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER grants_open_inserted AFTER INSERT ON grants REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION open_grants_changed();
CREATE TRIGGER grants_open_updated AFTER UPDATE ON grants REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION open_grants_changed();
CREATE TRIGGER grants_open_deleted AFTER DELETE ON grants REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION open_grants_changed();

-- +goose Down
DROP TRIGGER grants_open_deleted ON grants;
DROP TRIGGER grants_open_updated ON grants;
DROP TRIGGER grants_open_inserted ON grants;
DROP FUNCTION open_grants_changed();
DROP TABLE open_grants_delta;
DROP TABLE open_grants;
