-- +goose Up
-- Pruning reads only what it deletes: ended grants by when they ended, and names by token,
-- which deleting a grant looks up (the foreign key of names.token) once per grant deleted.
CREATE INDEX grants_ended ON grants (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX names_token ON names (token);
-- A session's grants, ended ones too (the open ones first), for its page; the open ones are
-- still found as through grants_open_session, which it replaces.
DROP INDEX grants_open_session;
CREATE INDEX grants_session ON grants (session, ended_at) WHERE session <> '';

-- +goose Down
DROP INDEX grants_session;
CREATE INDEX grants_open_session ON grants (session) WHERE ended_at IS NULL AND session <> '';
DROP INDEX names_token;
DROP INDEX grants_ended;
