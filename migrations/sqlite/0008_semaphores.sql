-- +goose Up
-- The limit of each name ever acquired as a semaphore; its slots are the names "name#i".
CREATE TABLE semaphores (
    name TEXT PRIMARY KEY,
    lim  INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE semaphores;
