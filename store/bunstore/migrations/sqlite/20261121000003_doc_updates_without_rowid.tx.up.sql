-- The update log keyed by (list_ref, seq) alone: one b-tree instead of a
-- rowid table plus its primary-key index, so appending an update inserts
-- into one tree and dirties one page fewer per commit.
CREATE TABLE doc_updates_new (
    list_ref TEXT NOT NULL REFERENCES lists (ref),
    seq      INTEGER NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (list_ref, seq)
) WITHOUT ROWID;
--bun:split
INSERT INTO doc_updates_new (list_ref, seq, data) SELECT list_ref, seq, data FROM doc_updates;
--bun:split
DROP TABLE doc_updates;
--bun:split
ALTER TABLE doc_updates_new RENAME TO doc_updates;
