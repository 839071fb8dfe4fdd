package bunstore

import (
	"fmt"
	"strings"
)

// queries holds every statement, written once with $N placeholders and
// rewritten for the dialect at New. The SQL is portable between SQLite and
// Postgres (ON CONFLICT, RETURNING, row values) except where noted.
//
// The hot paths bypass Bun's query builder on purpose: Bun interpolates
// arguments into the SQL text client-side, which defeats statement caching
// (pgx caches prepared statements per connection by SQL text) and costs
// allocations on every call.
type queries struct {
	insertList, listByRef, listForUpdate, listsByAccount, saveList, setDocVersion         string
	docHeaderAndUpdates, updatesSince, insertUpdate                                       string
	compactRead, compactWrite, compactState, compactDelete, updateCount                   string
	insertPerm, permByHash, permsOfList, permOfList, permActive, revokePerm, activeOwners string
	putYap, putYapData, yapByID, yapsPage, yapsPageLive, deleteYap, deletedBefore         string
	insertAccount, accountByID, accountByHash                                             string
	insertAudit, insertAuditRowid, auditPage                                              string
	insertIdem, idemByKey, deleteIdemBefore                                               string
	listAuth                                                                              string
	claimClient, clientWriter                                                             string
	// listVersions[i] reads the versions of listVersionsMin<<i refs.
	listVersions []string
}

// ListVersions reads at most listVersionsMax refs per statement, far under
// SQLite's 32,766 parameters (and 999 before SQLite 3.32). A shorter set
// is padded (with its last ref) to the next power of two from
// listVersionsMin, so there are few statement texts to prepare and cache.
const (
	listVersionsMin = 8
	listVersionsMax = 512
)

// listVersionsSQL reads the version of each list among n refs. The join
// walks the permissions_list index by list_ref. SQLite gets anonymous
// "?" placeholders: modernc's driver looks up each numbered one's name in
// a list of them all when binding, which made binding 512 of them take a
// tenth of an idle poll.
func listVersionsSQL(pg bool, n int) string {
	var b strings.Builder
	b.WriteString(`SELECT l.ref, l.doc_version, COUNT(p.id), COUNT(p.revoked_at)
		FROM lists l LEFT JOIN permissions p ON p.list_ref = l.ref WHERE l.ref IN (`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		if pg {
			fmt.Fprintf(&b, "$%d", i+1)
		} else {
			b.WriteString("?")
		}
	}
	b.WriteString(`) GROUP BY l.ref, l.doc_version`)
	return b.String()
}

const listCols = `ref, title, kind, created_at, updated_at, archived_at, rolled_up_at, account_id, doc_version`

// saveListSQL writes a list row; its arguments are saveListArgs.
const saveListSQL = `UPDATE lists SET title = $2, kind = $3, updated_at = $4, archived_at = $5, rolled_up_at = $6,
	account_id = $7, doc_version = $8 WHERE ref = $1`

const permCols = `id, list_ref, role, scopes, label, created_at, revoked_at, code_hash`

func buildQueries(pg bool) *queries {
	forUpdate := ""
	if pg {
		forUpdate = " FOR UPDATE"
	}
	q := &queries{
		insertList: `INSERT INTO lists (` + listCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
		listByRef:  `SELECT ` + listCols + ` FROM lists WHERE ref = $1`,
		// SQLite has no row locks; its write transactions are exclusive.
		listForUpdate: `SELECT ` + listCols + `, state_seq FROM lists WHERE ref = $1` + forUpdate,
		// Keyset paging on the lists_account index (account_id, created_at, ref).
		listsByAccount: `SELECT ` + listCols + ` FROM lists
			WHERE account_id = $1 AND (created_at, ref) > ($2, $3) ORDER BY created_at, ref LIMIT $4`,
		saveList:      saveListSQL,
		setDocVersion: `UPDATE lists SET doc_version = $2 WHERE ref = $1`,

		// One statement, so the header and the updates come from one
		// snapshot even while a compaction runs. Row 0 is the header; the
		// others are update rows (seq, n, 0, data), see updaterows.go.
		docHeaderAndUpdates: `SELECT 0, state_seq, doc_version, CASE WHEN $2 < state_seq THEN state END FROM lists WHERE ref = $1
			UNION ALL
			SELECT seq, n, 0, data FROM doc_updates WHERE list_ref = $1 AND seq > $2
			ORDER BY 1`,
		// On SQLite the state lives in doc_states (see its migration) and
		// compactState writes it.
		updatesSince:  `SELECT seq, n, data FROM doc_updates WHERE list_ref = $1 AND seq > $2 ORDER BY seq`,
		insertUpdate:  `INSERT INTO doc_updates (list_ref, seq, n, data) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		compactRead:   `SELECT doc_version, state_seq FROM lists WHERE ref = $1` + forUpdate,
		compactWrite:  `UPDATE lists SET state = $2, state_seq = $3 WHERE ref = $1`,
		compactDelete: `DELETE FROM doc_updates WHERE list_ref = $1 AND seq <= $2`,
		updateCount:   `SELECT doc_version - state_seq FROM lists WHERE ref = $1`,

		insertPerm:   `INSERT INTO permissions (` + permCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
		permByHash:   `SELECT ` + permCols + ` FROM permissions WHERE code_hash = $1`,
		permsOfList:  `SELECT ` + permCols + ` FROM permissions WHERE list_ref = $1 AND revoked_at IS NULL ORDER BY created_at, id`,
		permOfList:   `SELECT ` + permCols + ` FROM permissions WHERE id = $1 AND list_ref = $2`,
		permActive:   `SELECT revoked_at IS NULL FROM permissions WHERE id = $1 AND list_ref = $2`,
		revokePerm:   `UPDATE permissions SET revoked_at = $3 WHERE id = $1 AND list_ref = $2 AND revoked_at IS NULL`,
		activeOwners: `SELECT COUNT(*) FROM permissions WHERE list_ref = $1 AND role = 'owner' AND revoked_at IS NULL`,

		putYap: `INSERT INTO yaps (list_ref, id, created_at, deleted_at, data) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (list_ref, id) DO UPDATE SET created_at = excluded.created_at,
			deleted_at = excluded.deleted_at, data = excluded.data`,
		// putYapData rewrites only the data of a row stored with these
		// times, so SQLite leaves the yaps_order and yaps_deleted indexes
		// alone (it maintains an index when the SET names its columns).
		putYapData: `UPDATE yaps SET data = $5
			WHERE list_ref = $1 AND id = $2 AND created_at = $3 AND deleted_at IS NOT DISTINCT FROM $4`,
		yapByID: `SELECT id, created_at, deleted_at, data FROM yaps WHERE list_ref = $1 AND id = $2`,
		yapsPage: `SELECT id, created_at, deleted_at, data FROM yaps
			WHERE list_ref = $1 AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4`,
		yapsPageLive: `SELECT id, created_at, deleted_at, data FROM yaps
			WHERE list_ref = $1 AND (created_at, id) > ($2, $3) AND deleted_at IS NULL ORDER BY created_at, id LIMIT $4`,
		deleteYap: `DELETE FROM yaps WHERE list_ref = $1 AND id = $2`,
		deletedBefore: `SELECT list_ref, id FROM yaps WHERE deleted_at IS NOT NULL AND deleted_at < $1
			ORDER BY deleted_at, list_ref, id LIMIT $2`,

		insertAccount: `INSERT INTO accounts (id, created_at, key_hash) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		accountByID:   `SELECT id, created_at, key_hash FROM accounts WHERE id = $1`,
		accountByHash: `SELECT id, created_at, key_hash FROM accounts WHERE key_hash = $1`,

		insertAudit: `INSERT INTO audit (list_ref, at, permission_id, role, action, yap_id, detail)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq`,
		insertAuditRowid: `INSERT INTO audit (list_ref, at, permission_id, role, action, yap_id, detail)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		auditPage: `SELECT seq, list_ref, at, permission_id, role, action, yap_id, detail FROM audit
			WHERE list_ref = $1 AND seq > $2 ORDER BY seq LIMIT $3`,

		// An existing record is replaced only when it was created before
		// $7 (expired, see yaps.IdempotencyRecord.ReplaceBefore); else no
		// row is affected and the insert is a conflict.
		insertIdem: `INSERT INTO idempotency (scope, key, request_hash, status, body, created_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (scope, key) DO UPDATE SET
			request_hash = excluded.request_hash, status = excluded.status, body = excluded.body,
			created_at = excluded.created_at WHERE idempotency.created_at < $7`,
		idemByKey: `SELECT request_hash, status, body, created_at FROM idempotency WHERE scope = $1 AND key = $2`,
		// Oldest first, a batch at a time (the idempotency_created index).
		deleteIdemBefore: `DELETE FROM idempotency WHERE (scope, key) IN
			(SELECT scope, key FROM idempotency WHERE created_at < $1 ORDER BY created_at LIMIT $2)`,

		// Authentication in one statement: the list and the permission of
		// a code hash (NULLs when no permission has it), one round trip and
		// one read snapshot instead of listByRef then permByHash. The ref
		// and the hash are the arguments, so they are not read back.
		listAuth: `SELECT l.title, l.kind, l.created_at, l.updated_at, l.archived_at, l.rolled_up_at,
			l.account_id, l.doc_version, p.id, p.list_ref, p.role, p.scopes, p.label, p.created_at, p.revoked_at
			FROM lists l LEFT JOIN permissions p ON p.code_hash = $2 WHERE l.ref = $1`,

		claimClient:  `INSERT INTO doc_clients (list_ref, client, permission_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		clientWriter: `SELECT permission_id FROM doc_clients WHERE list_ref = $1 AND client = $2`,
	}
	for n := listVersionsMin; n <= listVersionsMax; n *= 2 {
		q.listVersions = append(q.listVersions, listVersionsSQL(pg, n))
	}
	if !pg {
		q.docHeaderAndUpdates = `SELECT 0, state_seq, doc_version,
			CASE WHEN $2 < state_seq THEN (SELECT state FROM doc_states WHERE list_ref = $1) END FROM lists WHERE ref = $1
			UNION ALL
			SELECT seq, n, 0, data FROM doc_updates WHERE list_ref = $1 AND seq > $2
			ORDER BY 1`
		q.compactWrite = `UPDATE lists SET state_seq = $2 WHERE ref = $1`
		q.compactState = `INSERT INTO doc_states (list_ref, state) VALUES ($1, $2)
			ON CONFLICT (list_ref) DO UPDATE SET state = excluded.state`
	}
	for _, p := range q.ptrs() {
		*p = sqlText(pg, *p)
	}
	return q
}

func (q *queries) all() []string {
	var out []string
	for _, p := range q.ptrs() {
		if *p != "" {
			out = append(out, *p)
		}
	}
	return out
}

func (q *queries) ptrs() []*string {
	out := []*string{
		&q.insertList, &q.listByRef, &q.listForUpdate, &q.listsByAccount, &q.saveList, &q.setDocVersion,
		&q.docHeaderAndUpdates, &q.updatesSince, &q.insertUpdate,
		&q.compactRead, &q.compactWrite, &q.compactState, &q.compactDelete, &q.updateCount,
		&q.insertPerm, &q.permByHash, &q.permsOfList, &q.permOfList, &q.permActive, &q.revokePerm, &q.activeOwners,
		&q.putYap, &q.putYapData, &q.yapByID, &q.yapsPage, &q.yapsPageLive, &q.deleteYap, &q.deletedBefore,
		&q.insertAccount, &q.accountByID, &q.accountByHash,
		&q.insertAudit, &q.insertAuditRowid, &q.auditPage,
		&q.insertIdem, &q.idemByKey, &q.deleteIdemBefore,
		&q.listAuth,
		&q.claimClient, &q.clientWriter,
	}
	for i := range q.listVersions {
		out = append(out, &q.listVersions[i])
	}
	return out
}
