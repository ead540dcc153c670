-- +goose Up
-- Every three-character piece (trigram) of the names and holders of the open grants, keyed
-- 'n' or 'h' and the piece, with the grant's token: the overview's filter on a part of a name
-- or holder of three characters or more reads the grants listed under its rarest piece instead
-- of every open grant, and checks each with instr. The triggers keep it in the transaction
-- that opens, ends or deletes a grant, whichever statement does so. Characters, not bytes, as
-- SQLite's substr and length count them (holders are valid UTF-8 without control characters).
CREATE TABLE trigram_positions (i INTEGER PRIMARY KEY) STRICT;
INSERT INTO trigram_positions (i)
    WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 256) SELECT i FROM c;
CREATE TABLE open_trigrams (
    key   TEXT    NOT NULL,
    token INTEGER NOT NULL,
    PRIMARY KEY (key, token)
) WITHOUT ROWID, STRICT;
INSERT OR IGNORE INTO open_trigrams (key, token)
    SELECT 'n' || substr(g.name, p.i, 3), g.token FROM grants g JOIN trigram_positions p ON p.i <= length(g.name) - 2
    WHERE g.ended_at IS NULL
    UNION ALL
    SELECT 'h' || substr(g.holder, p.i, 3), g.token FROM grants g JOIN trigram_positions p ON p.i <= length(g.holder) - 2
    WHERE g.ended_at IS NULL
    ORDER BY 1, 2;
-- +goose StatementBegin
CREATE TRIGGER grants_trigrams_opened AFTER INSERT ON grants WHEN new.ended_at IS NULL BEGIN
    INSERT OR IGNORE INTO open_trigrams (key, token)
        SELECT 'n' || substr(new.name, i, 3), new.token FROM trigram_positions WHERE i <= length(new.name) - 2
        UNION ALL
        SELECT 'h' || substr(new.holder, i, 3), new.token FROM trigram_positions WHERE i <= length(new.holder) - 2;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER grants_trigrams_ended AFTER UPDATE OF ended_at ON grants
WHEN old.ended_at IS NULL AND new.ended_at IS NOT NULL BEGIN
    DELETE FROM open_trigrams WHERE token = old.token AND key IN (
        SELECT 'n' || substr(old.name, i, 3) FROM trigram_positions WHERE i <= length(old.name) - 2
        UNION ALL
        SELECT 'h' || substr(old.holder, i, 3) FROM trigram_positions WHERE i <= length(old.holder) - 2);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER grants_trigrams_deleted AFTER DELETE ON grants WHEN old.ended_at IS NULL BEGIN
    DELETE FROM open_trigrams WHERE token = old.token AND key IN (
        SELECT 'n' || substr(old.name, i, 3) FROM trigram_positions WHERE i <= length(old.name) - 2
        UNION ALL
        SELECT 'h' || substr(old.holder, i, 3) FROM trigram_positions WHERE i <= length(old.holder) - 2);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER grants_trigrams_deleted;
DROP TRIGGER grants_trigrams_ended;
DROP TRIGGER grants_trigrams_opened;
DROP TABLE open_trigrams;
DROP TABLE trigram_positions;
