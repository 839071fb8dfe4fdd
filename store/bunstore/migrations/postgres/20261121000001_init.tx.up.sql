-- The schema of ../sqlite with Postgres types. Text columns use COLLATE "C"
-- so ORDER BY id is byte order, the order every adapter uses.
-- Times are BIGINT unix milliseconds (UTC), exact in both dialects.
CREATE TABLE lists (
    ref          TEXT COLLATE "C" PRIMARY KEY,
    title        TEXT COLLATE "C" NOT NULL,
    kind         TEXT COLLATE "C" NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    archived_at  BIGINT,
    rolled_up_at BIGINT,
    account_id   TEXT COLLATE "C",
    doc_version  BIGINT NOT NULL DEFAULT 0, -- last seq of the update log
    state        BYTEA,                       -- compacted document state
    state_seq    BIGINT NOT NULL DEFAULT 0  -- last seq folded into state
);
--bun:split
CREATE INDEX lists_account ON lists (account_id, created_at, ref) WHERE account_id IS NOT NULL;
--bun:split
CREATE TABLE doc_updates (
    list_ref TEXT COLLATE "C" NOT NULL REFERENCES lists (ref),
    seq      BIGINT NOT NULL,
    data     BYTEA NOT NULL,
    PRIMARY KEY (list_ref, seq)
);
--bun:split
CREATE TABLE permissions (
    id         TEXT COLLATE "C" PRIMARY KEY,
    list_ref   TEXT COLLATE "C" NOT NULL REFERENCES lists (ref),
    role       TEXT COLLATE "C" NOT NULL,
    scopes     TEXT COLLATE "C" NOT NULL DEFAULT '',
    label      TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    code_hash  BYTEA NOT NULL UNIQUE
);
--bun:split
CREATE INDEX permissions_list ON permissions (list_ref, created_at, id);
--bun:split
CREATE TABLE yaps (
    list_ref   TEXT COLLATE "C" NOT NULL REFERENCES lists (ref),
    id         TEXT COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL,
    deleted_at BIGINT,
    data       BYTEA NOT NULL, -- the other fields, see encodeYap
    PRIMARY KEY (list_ref, id)
);
--bun:split
CREATE INDEX yaps_order ON yaps (list_ref, created_at, id);
--bun:split
CREATE INDEX yaps_deleted ON yaps (deleted_at) WHERE deleted_at IS NOT NULL;
--bun:split
CREATE TABLE accounts (
    id         TEXT COLLATE "C" PRIMARY KEY,
    created_at BIGINT NOT NULL,
    key_hash   BYTEA UNIQUE
);
--bun:split
CREATE TABLE audit (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    list_ref      TEXT COLLATE "C" NOT NULL REFERENCES lists (ref),
    at            BIGINT NOT NULL,
    permission_id TEXT COLLATE "C" NOT NULL,
    role          TEXT COLLATE "C" NOT NULL,
    action        TEXT COLLATE "C" NOT NULL,
    yap_id        TEXT COLLATE "C" NOT NULL,
    detail        TEXT COLLATE "C" NOT NULL
);
--bun:split
CREATE INDEX audit_list ON audit (list_ref, seq);
--bun:split
CREATE TABLE idempotency (
    scope        TEXT COLLATE "C" NOT NULL,
    key          TEXT COLLATE "C" NOT NULL,
    request_hash BYTEA,
    status       BIGINT NOT NULL,
    body         BYTEA,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);
