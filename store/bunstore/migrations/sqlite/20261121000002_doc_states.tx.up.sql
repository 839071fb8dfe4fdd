-- The compacted document state moves out of the lists row: every write
-- updates that row (doc_version, updated_at), and SQLite rewrites a whole
-- row, overflow pages of a large state included, and walks them to read
-- state_seq behind it.
CREATE TABLE doc_states (
    list_ref TEXT PRIMARY KEY REFERENCES lists (ref),
    state    BLOB NOT NULL
);
--bun:split
INSERT INTO doc_states (list_ref, state) SELECT ref, state FROM lists WHERE state IS NOT NULL;
--bun:split
ALTER TABLE lists DROP COLUMN state;
