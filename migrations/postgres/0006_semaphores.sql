-- +goose Up
-- The limit of each name ever acquired as a semaphore; its slots are the names "name#i". The
-- row is the semaphore's lock: its acquires take it FOR UPDATE before any slot.
CREATE TABLE semaphores (
    name text COLLATE "C" PRIMARY KEY,
    lim  integer NOT NULL
);

-- +goose Down
DROP TABLE semaphores;
