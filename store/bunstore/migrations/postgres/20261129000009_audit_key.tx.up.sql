-- The audit log is only ever read by list, in seq order (audit_list), so its
-- primary key on seq alone was one more index to update on every mutation.
-- The key becomes (list_ref, seq), which also serves those reads.
ALTER TABLE audit DROP CONSTRAINT audit_pkey;
DROP INDEX audit_list;
ALTER TABLE audit ADD CONSTRAINT audit_pkey PRIMARY KEY (list_ref, seq);
