-- +goose Up
-- Shared (read) leases: a grant's shared flag, so that a fenced write presenting its token is
-- refused whenever it comes; a semaphores row's, for a name whose slots are shared grants (its
-- lim is then how many slots were used so far).
ALTER TABLE grants ADD COLUMN shared INTEGER NOT NULL DEFAULT 0;
ALTER TABLE semaphores ADD COLUMN shared INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE semaphores DROP COLUMN shared;
ALTER TABLE grants DROP COLUMN shared;
