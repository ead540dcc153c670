-- +goose Up
-- The events of a name's slots ("name#i": a semaphore's, or the readers of a shared name) by
-- the name, in seq order: a query of a name's history with its slots' merges them with its own
-- events through this index instead of sorting every event of every slot. Partial: events of
-- names without '#' (most of them) are not in it, and cost no write.
CREATE INDEX events_slots ON events (split_part(name, '#', 1), seq) WHERE strpos(name, '#') > 0;

-- +goose Down
DROP INDEX events_slots;
