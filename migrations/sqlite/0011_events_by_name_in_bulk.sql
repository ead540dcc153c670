-- +goose Up
-- A name's events, found by name in bulk. The index events (name, seq) put each name's newest
-- entry on a page of its own, so every batch rewrote one index page per name it touched: most
-- of the pages a batch of renewals wrote. events_by_name holds (name, seq) for the events up to
-- meta.events_indexed; the writer adds the older half of the newer ones in one sorted INSERT
-- once more than a few thousand wait (many entries of a name per page it rewrites), and a query
-- by name reads this table, then the few newer events by seq.
CREATE TABLE events_by_name (
    name TEXT    NOT NULL,
    seq  INTEGER NOT NULL,
    PRIMARY KEY (name, seq)
) STRICT, WITHOUT ROWID;
INSERT INTO events_by_name (name, seq) SELECT name, seq FROM events ORDER BY name, seq;
INSERT INTO meta (key, value) VALUES ('events_indexed', (SELECT coalesce(max(seq), 0) FROM events));
DROP INDEX events_name;

-- +goose Down
CREATE INDEX events_name ON events (name, seq);
DELETE FROM meta WHERE key = 'events_indexed';
DROP TABLE events_by_name;
