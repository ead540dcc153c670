-- +goose Up
-- The newest accepted writes of each resource (at most 10, oldest first), kept on its row and
-- changed by the same UPDATE as its value: an array of objects with the write's version (v),
-- token (t), lease (l), holder (h), time in unix ms (at), size (n) and content type (ct). A
-- resource written before keeps its last write as the first entry.
ALTER TABLE resources ADD COLUMN writers jsonb NOT NULL DEFAULT '[]';
UPDATE resources SET writers = jsonb_build_array(jsonb_build_object('v', version, 't', fence, 'l', lease, 'h', holder,
    'at', updated_at, 'n', length(value), 'ct', content_type)) WHERE version > 0;

-- +goose Down
ALTER TABLE resources DROP COLUMN writers;
