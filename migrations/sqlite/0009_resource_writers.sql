-- +goose Up
-- The newest accepted writes of each resource (at most 10, oldest first), kept on its row and
-- changed by the same upsert as its value: a JSON array, stored as SQLite's JSONB, of objects
-- with the write's version (v), token (t), lease (l), holder (h), time in unix ms (at), size (n)
-- and content type (ct). A resource written before keeps its last write as the first entry.
ALTER TABLE resources ADD COLUMN writers BLOB NOT NULL DEFAULT x'0b'; -- JSONB's []
UPDATE resources SET writers = jsonb_array(jsonb_object('v', version, 't', fence, 'l', lease, 'h', holder,
    'at', updated_at, 'n', length(value), 'ct', content_type));

-- +goose Down
ALTER TABLE resources DROP COLUMN writers;
