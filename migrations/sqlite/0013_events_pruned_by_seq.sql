-- +goose Up
-- Events are pruned by age in seq order (they are recorded in it, at a clock that never goes
-- back), so no index on recorded_at: every event entered it, a page more for most batches.
DROP INDEX events_recorded;

-- +goose Down
CREATE INDEX events_recorded ON events (recorded_at);
