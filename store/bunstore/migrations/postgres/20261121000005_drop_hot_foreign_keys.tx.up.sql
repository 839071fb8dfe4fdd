-- Postgres checks a foreign key with a trigger and a query per inserted
-- row: about a fifth of its CPU per created yap. The rows of these tables
-- are only written by a transaction that holds its list row locked (Update
-- reads it FOR UPDATE; a prepared write's guard updates it and every row's
-- guard requires that), and lists are never deleted, so the keys caught
-- nothing. permissions keeps its key: it is written rarely.
ALTER TABLE doc_updates DROP CONSTRAINT doc_updates_list_ref_fkey;
--bun:split
ALTER TABLE yaps DROP CONSTRAINT yaps_list_ref_fkey;
--bun:split
ALTER TABLE audit DROP CONSTRAINT audit_list_ref_fkey;
