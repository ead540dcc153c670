-- +goose Up
-- A renewal writes a grant's row in place (a HOT update: no index of grants takes an entry),
-- and its expiry and late mark in a narrow table of their own, open_due, with the two indexes
-- that order and sweep by them, and the grant's name, so that the counts by expiry or late
-- mark under a prefix read open_due alone.
--
-- PostgreSQL updates a row in place only when no column that an index reads changes, and when
-- the row's page has room. A renewal changes expires_at, renewed_at and perhaps ttl_ms: while
-- indexes of grants read them, every renewal wrote a new entry in each of the eight indexes of
-- an open grant (2 Dec 2026: 52-70 us of database time a renewed row; with four of them
-- dropped, half). So:
-- - the indexes of grants no longer read the expiry or the renewal: grants_open (expiry) and
--   grants_open_late (late mark) move to open_due, and grants_open_name and grants_open_owner
--   keep only the name and the owner;
-- - grants keeps its columns, which every read of a grant uses as before; open_due holds a copy
--   of the open grants' name, expiry and late mark (renewed_at + ttl_ms / 2), which the trigger
--   of 0016 writes in the statement that changes grants, so the two never disagree;
-- - grants' pages are filled to 80 %, the room a row's new version takes on its own page. (The
--   pages written before this migration are full; a row renewed there moves once to a new page,
--   and is renewed in place from then on.)
CREATE TABLE open_due (
    token      bigint PRIMARY KEY,
    name       text COLLATE "C" NOT NULL,
    expires_at bigint NOT NULL,
    late_at    bigint NOT NULL
);
INSERT INTO open_due (token, name, expires_at, late_at)
    SELECT token, name, expires_at, renewed_at + ttl_ms / 2 FROM grants WHERE ended_at IS NULL;
CREATE INDEX open_due_expiry ON open_due (expires_at, token);
CREATE INDEX open_due_late ON open_due (late_at, token);

DROP INDEX grants_open;
DROP INDEX grants_open_late;
DROP INDEX grants_open_name;
CREATE INDEX grants_open_name ON grants (name) WHERE ended_at IS NULL;
DROP INDEX grants_open_owner;
CREATE INDEX grants_open_owner ON grants (owner) WHERE ended_at IS NULL;
ALTER TABLE grants SET (fillfactor = 80);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION open_grants_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO open_text (token, name, holder) SELECT token, name, holder FROM new_rows WHERE ended_at IS NULL;
        GET DIAGNOSTICS d = ROW_COUNT;
        INSERT INTO open_due (token, name, expires_at, late_at)
            SELECT token, name, expires_at, renewed_at + ttl_ms / 2 FROM new_rows WHERE ended_at IS NULL;
    ELSIF TG_OP = 'UPDATE' THEN
        -- A grant never opens again once ended: an update renews grants, or ends them.
        UPDATE open_due o SET expires_at = n.expires_at, late_at = n.renewed_at + n.ttl_ms / 2
            FROM new_rows n
            WHERE o.token = n.token AND n.ended_at IS NULL
                AND (o.expires_at <> n.expires_at OR o.late_at <> n.renewed_at + n.ttl_ms / 2);
        SELECT (SELECT count(*) FROM new_rows n WHERE n.ended_at IS NULL)
             - (SELECT count(*) FROM old_rows o WHERE o.ended_at IS NULL) INTO d;
        IF d <> 0 THEN
            DELETE FROM open_text t USING new_rows n WHERE t.token = n.token AND n.ended_at IS NOT NULL;
            DELETE FROM open_due t USING new_rows n WHERE t.token = n.token AND n.ended_at IS NOT NULL;
        END IF;
    ELSE
        DELETE FROM open_text t USING old_rows o WHERE t.token = o.token;
        DELETE FROM open_due t USING old_rows o WHERE t.token = o.token;
        SELECT -count(*) INTO d FROM old_rows WHERE ended_at IS NULL;
    END IF;
    IF d <> 0 THEN
        INSERT INTO open_grants_delta (n) VALUES (d);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION open_grants_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO open_text (token, name, holder) SELECT token, name, holder FROM new_rows WHERE ended_at IS NULL;
        GET DIAGNOSTICS d = ROW_COUNT;
    ELSIF TG_OP = 'UPDATE' THEN
        -- (0017's function.)
        SELECT (SELECT count(*) FROM new_rows WHERE ended_at IS NULL)
             - (SELECT count(*) FROM old_rows WHERE ended_at IS NULL) INTO d;
        IF d <> 0 THEN
            DELETE FROM open_text t USING new_rows n WHERE n.token = t.token AND n.ended_at IS NOT NULL;
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
ALTER TABLE grants RESET (fillfactor);
DROP INDEX grants_open_owner;
CREATE INDEX grants_open_owner ON grants (owner, expires_at) WHERE ended_at IS NULL;
DROP INDEX grants_open_name;
CREATE INDEX grants_open_name ON grants (name, expires_at) WHERE ended_at IS NULL;
CREATE INDEX grants_open_late ON grants ((renewed_at + ttl_ms / 2), token) WHERE ended_at IS NULL;
CREATE INDEX grants_open ON grants (expires_at, token) WHERE ended_at IS NULL;
DROP TABLE open_due;
