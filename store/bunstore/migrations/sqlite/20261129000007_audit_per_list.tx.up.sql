-- The audit log keyed by (list_ref, seq) alone: one b-tree instead of a
-- rowid table plus its audit_list index, so an audited write inserts into
-- one tree. seq now counts per list (the store appends max + 1 of the
-- list); the rows keep their seqs, which increase per list as before.
CREATE TABLE audit_new (
    list_ref      TEXT NOT NULL REFERENCES lists (ref),
    seq           INTEGER NOT NULL,
    at            INTEGER NOT NULL,
    permission_id TEXT NOT NULL,
    role          TEXT NOT NULL,
    action        TEXT NOT NULL,
    yap_id        TEXT NOT NULL,
    detail        TEXT NOT NULL,
    PRIMARY KEY (list_ref, seq)
) WITHOUT ROWID;
--bun:split
INSERT INTO audit_new (list_ref, seq, at, permission_id, role, action, yap_id, detail)
    SELECT list_ref, seq, at, permission_id, role, action, yap_id, detail FROM audit;
--bun:split
DROP TABLE audit;
--bun:split
ALTER TABLE audit_new RENAME TO audit;
