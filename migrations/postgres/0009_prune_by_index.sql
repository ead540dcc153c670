-- +goose Up
-- Pruning reads only what it deletes: ended grants by when they ended, and names by token,
-- which deleting a grant looks up (the foreign key of names.token) once per grant deleted.
CREATE INDEX grants_ended ON grants (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX names_token ON names (token);

-- +goose Down
DROP INDEX names_token;
DROP INDEX grants_ended;
