-- Times are INTEGER unix milliseconds (UTC), exact in both dialects.
CREATE TABLE lists (
    ref          TEXT PRIMARY KEY,
    title        TEXT NOT NULL,
    kind         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    archived_at  INTEGER,
    rolled_up_at INTEGER,
    account_id   TEXT,
    doc_version  INTEGER NOT NULL DEFAULT 0, -- last seq of the update log
    state        BLOB,                       -- compacted document state
    state_seq    INTEGER NOT NULL DEFAULT 0  -- last seq folded into state
);
--bun:split
CREATE INDEX lists_account ON lists (account_id, created_at, ref) WHERE account_id IS NOT NULL;
--bun:split
CREATE TABLE doc_updates (
    list_ref TEXT NOT NULL REFERENCES lists (ref),
    seq      INTEGER NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (list_ref, seq)
);
--bun:split
CREATE TABLE permissions (
    id         TEXT PRIMARY KEY,
    list_ref   TEXT NOT NULL REFERENCES lists (ref),
    role       TEXT NOT NULL,
    scopes     TEXT NOT NULL DEFAULT '',
    label      TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    code_hash  BLOB NOT NULL UNIQUE
);
--bun:split
CREATE INDEX permissions_list ON permissions (list_ref, created_at, id);
--bun:split
CREATE TABLE yaps (
    list_ref   TEXT NOT NULL REFERENCES lists (ref),
    id         TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    deleted_at INTEGER,
    data       BLOB NOT NULL, -- the other fields, see encodeYap
    PRIMARY KEY (list_ref, id)
);
--bun:split
CREATE INDEX yaps_order ON yaps (list_ref, created_at, id);
--bun:split
CREATE INDEX yaps_deleted ON yaps (deleted_at) WHERE deleted_at IS NOT NULL;
--bun:split
CREATE TABLE accounts (
    id         TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    key_hash   BLOB UNIQUE
);
--bun:split
CREATE TABLE audit (
    seq           INTEGER PRIMARY KEY, -- the rowid: max+1, never reused as audit rows are never deleted
    list_ref      TEXT NOT NULL REFERENCES lists (ref),
    at            INTEGER NOT NULL,
    permission_id TEXT NOT NULL,
    role          TEXT NOT NULL,
    action        TEXT NOT NULL,
    yap_id        TEXT NOT NULL,
    detail        TEXT NOT NULL
);
--bun:split
CREATE INDEX audit_list ON audit (list_ref, seq);
--bun:split
CREATE TABLE idempotency (
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash BLOB,
    status       INTEGER NOT NULL,
    body         BLOB,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
);
