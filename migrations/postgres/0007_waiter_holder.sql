-- +goose Up
-- The holder each waiter asks for the name as, so that the database can put the holder a
-- handover request named first in line when the grant the request was about ends, whichever
-- replica the waiter waits on. Waiters from before have none ('').
ALTER TABLE waiters ADD COLUMN holder text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE waiters DROP COLUMN holder;
