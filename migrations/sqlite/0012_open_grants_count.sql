-- +goose Up
-- How many grants are open, kept by the writer with each batch that opens or ends one: the
-- count of held leases is this less the few open grants past expiry that the sweeper has not
-- recorded yet, instead of a walk over every open grant (a million entries of grants_open).
INSERT INTO meta (key, value) VALUES ('open_grants', (SELECT count(*) FROM grants WHERE ended_at IS NULL));

-- +goose Down
DELETE FROM meta WHERE key = 'open_grants';
