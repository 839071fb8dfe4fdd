-- The writer of each Yjs client ID of a list's document: the permission
-- whose update first held structs under it (yaps.Store.ClaimClients). A
-- sync client may not write under an ID another code owns.
CREATE TABLE doc_clients (
    list_ref      TEXT NOT NULL,
    client        BIGINT NOT NULL,
    permission_id TEXT NOT NULL,
    PRIMARY KEY (list_ref, client)
) WITHOUT ROWID;
