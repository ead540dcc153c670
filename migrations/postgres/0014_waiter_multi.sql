-- +goose Up
-- Whether a waiter is one place of an acquire of several names (one row per name, taken in one
-- transaction). A handover request puts its named holder's first single-name waiter first in
-- line, never such a place: moved ahead in one line only, it could stand before a waiter in
-- one line and behind it in another, and the two would wait for each other.
ALTER TABLE waiters ADD COLUMN multi boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE waiters DROP COLUMN multi;
