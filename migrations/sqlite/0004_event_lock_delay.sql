-- +goose Up
-- The lock delay of each grant, on its acquired event, so that a name's history explains the
-- gap after every expiry (the grants row of an old grant may be pruned before its events).
-- NULL for other event types; filled in for the acquired events already recorded.
ALTER TABLE events ADD COLUMN lock_delay_ms INTEGER;
UPDATE events SET lock_delay_ms = (SELECT g.lock_delay_ms FROM grants g WHERE g.token = events.token)
    WHERE type = 'acquired';

-- +goose Down
ALTER TABLE events DROP COLUMN lock_delay_ms;
