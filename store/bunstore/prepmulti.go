package bunstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/yaps-dev/yaps/yaps"
)

// Multi-row batches (Postgres). A batch of prepared writes used to send
// every op as a statement of its own: four per created yap, plus the
// write's guard. Postgres pays a fixed cost per statement (bind, portal,
// executor start-up and shutdown, a plan lookup), which was most of its
// CPU per create. So after the settings and the lock (prepared.go) a batch
// is one statement: its writes' guards as one UPDATE of the list rows
// (each row checked against its own expected values and permission), and
// the rows of all its ops as arrays, unnested, each written only if its
// list row is among those the UPDATE returned. A stale write's rows are
// thus skipped while the others' are written, as with a statement per op.
// The statement returns the refs of the applied writes and the seqs of
// the audit rows written.
//
// The statement's parts see one snapshot, taken after the lock statement
// got the rows (READ COMMITTED), so a guard sees a revocation that
// committed before the lock was granted, as a guard statement of its own
// did. Rows of different kinds are not ordered among themselves, which is
// the same thing as the ops' order as long as no yap is both put and
// deleted, or put twice, in one batch (an upsert may not touch a row twice
// either); such a batch uses the statement-per-op form. So does a write
// alone: for one row the arrays cost more than they save
// (BenchmarkPreparedCreates with one writer: 313-353 µs of Postgres CPU
// per write with a statement per op, 363-417 this way, and 142 against
// 241 allocations; with 16 writers this way is about 10 % cheaper).

const multiSQL = `WITH w AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[], $8::bigint[],
		$9::text[], $10::text[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[], $15::text[], $16::bigint[], $17::text[])
		AS w(ref, title, kind, updated_at, archived_at, rolled_up_at, account_id, doc_version,
			x_title, x_kind, x_created_at, x_updated_at, x_archived_at, x_rolled_up_at, x_account_id, x_doc_version, perm)
), g AS (
	UPDATE lists SET title = w.title, kind = w.kind, updated_at = w.updated_at, archived_at = w.archived_at,
		rolled_up_at = w.rolled_up_at, account_id = w.account_id, doc_version = w.doc_version
	FROM w
	WHERE lists.ref = w.ref AND lists.title = w.x_title AND lists.kind = w.x_kind
		AND lists.created_at = w.x_created_at AND lists.updated_at = w.x_updated_at
		AND lists.archived_at IS NOT DISTINCT FROM w.x_archived_at
		AND lists.rolled_up_at IS NOT DISTINCT FROM w.x_rolled_up_at
		AND lists.account_id IS NOT DISTINCT FROM w.x_account_id AND lists.doc_version = w.x_doc_version
		AND (w.perm = '' OR EXISTS (SELECT 1 FROM permissions p WHERE p.id = w.perm AND p.list_ref = w.ref AND p.revoked_at IS NULL))
	RETURNING lists.ref
), du AS (
	INSERT INTO doc_updates (list_ref, seq, n, data)
	SELECT u.r, u.s, u.n, u.d FROM unnest($18::text[], $19::bigint[], $20::int[], $21::bytea[]) AS u(r, s, n, d)
	WHERE u.r IN (SELECT ref FROM g)
), py AS (
	INSERT INTO yaps (list_ref, id, created_at, deleted_at, data)
	SELECT u.r, u.i, u.c, u.x, u.d FROM unnest($22::text[], $23::text[], $24::bigint[], $25::bigint[], $26::bytea[]) AS u(r, i, c, x, d)
	WHERE u.r IN (SELECT ref FROM g)
	ON CONFLICT (list_ref, id) DO UPDATE SET created_at = excluded.created_at,
		deleted_at = excluded.deleted_at, data = excluded.data
), pn AS (
	-- New yaps (PreparedOp.NewYap): no conflict to look for. Should the
	-- row exist after all, the insert fails and so does the batch, whose
	-- writes are then retried alone, each with the upsert.
	INSERT INTO yaps (list_ref, id, created_at, deleted_at, data)
	SELECT u.r, u.i, u.c, u.x, u.d FROM unnest($27::text[], $28::text[], $29::bigint[], $30::bigint[], $31::bytea[]) AS u(r, i, c, x, d)
	WHERE u.r IN (SELECT ref FROM g)
), dy AS (
	DELETE FROM yaps USING unnest($32::text[], $33::text[]) AS u(r, i)
	WHERE yaps.list_ref = u.r AND yaps.id = u.i AND u.r IN (SELECT ref FROM g)
), au AS (
	-- ORDER BY: the identity values are drawn as the rows are inserted,
	-- in the batch's order, which is how readMulti matches them.
	INSERT INTO audit (list_ref, at, permission_id, role, action, yap_id, detail)
	SELECT u.r, u.a, u.p, u.ro, u.ac, u.y, u.d
	FROM unnest($34::text[], $35::bigint[], $36::text[], $37::text[], $38::text[], $39::text[], $40::text[])
		WITH ORDINALITY AS u(r, a, p, ro, ac, y, d, o)
	WHERE u.r IN (SELECT ref FROM g) ORDER BY u.o RETURNING seq
)
SELECT ref, NULL::bigint FROM g UNION ALL SELECT NULL, seq FROM au`

// multiRows holds a batch's writes and ops as columns.
type multiRows struct {
	// The guards: each write's new list values and its expected ones.
	ref, title, kind         []string
	updatedAt, docVersion    []int64
	archivedAt, rolledUpAt   []*int64
	accountID                []*string
	xTitle, xKind            []string
	xCreatedAt, xUpdatedAt   []int64
	xArchivedAt, xRolledUpAt []*int64
	xAccountID               []*string
	xDocVersion              []int64
	perm                     []string

	updRef  []string
	updSeq  []int64
	updN    []int32
	updData [][]byte

	putRef, putID []string
	putCreated    []int64
	putDeleted    []*int64
	putData       [][]byte

	newRef, newID []string // PreparedOp.NewYap
	newCreated    []int64
	newDeleted    []*int64
	newData       [][]byte

	delRef, delID []string

	audRef                              []string
	audAt                               []int64
	audPerm, audRole, audAction, audYap []string
	audDetail                           []string
	auditWrite                          []int // the write of each audit row
}

// statement returns the batch's statement and its arguments: the form of
// multiSQL without the parts the batch has no rows for.
func (m *multiRows) statement() (string, []any) {
	args := []any{
		m.ref, m.title, m.kind, m.updatedAt, m.archivedAt, m.rolledUpAt, m.accountID, m.docVersion,
		m.xTitle, m.xKind, m.xCreatedAt, m.xUpdatedAt, m.xArchivedAt, m.xRolledUpAt, m.xAccountID, m.xDocVersion, m.perm,
		m.updRef, m.updSeq, m.updN, m.updData,
		m.putRef, m.putID, m.putCreated, m.putDeleted, m.putData,
		m.newRef, m.newID, m.newCreated, m.newDeleted, m.newData,
		m.delRef, m.delID,
		m.audRef, m.audAt, m.audPerm, m.audRole, m.audAction, m.audYap, m.audDetail,
	}
	form := 0
	for i, part := range optionalParts {
		if part.rows(m) == 0 {
			form |= 1 << i
		}
	}
	// From the last part to the first, so the earlier ones stay in place.
	for i := len(optionalParts) - 1; i >= 0; i-- {
		if p := optionalParts[i]; form&(1<<i) != 0 {
			args = slices.Delete(args, p.first-1, p.first-1+p.params)
		}
	}
	return multiForms[form], args
}

// optionalParts are the parts of multiSQL a batch without rows for them
// runs without. Postgres sets up every part of a statement on each run,
// used or not (for the upsert, say, the yaps table, its indexes, the
// unnest and its join), so a batch that only creates yaps runs neither the
// upsert nor the deletes.
var optionalParts = []struct {
	name          string
	first, params int // its parameters in multiSQL
	rows          func(m *multiRows) int
}{
	{"py", 22, 5, func(m *multiRows) int { return len(m.putRef) }},
	{"pn", 27, 5, func(m *multiRows) int { return len(m.newRef) }},
	{"dy", 32, 2, func(m *multiRows) int { return len(m.delRef) }},
}

// multiForms holds multiSQL without each set of optionalParts (bit i of
// the index: without part i).
var multiForms = func() []string {
	forms := make([]string, 1<<len(optionalParts))
	for form := range forms {
		q := multiSQL
		for i := len(optionalParts) - 1; i >= 0; i-- {
			if p := optionalParts[i]; form&(1<<i) != 0 {
				q = withoutPart(q, p.name, p.first, p.params)
			}
		}
		forms[form] = q
	}
	return forms
}()

// withoutPart returns q without its part name, whose parameters are
// $first.. $first+n-1; the later parameters move down by n.
func withoutPart(q, name string, first, n int) string {
	start := strings.Index(q, "), "+name+" AS (")
	end := start + 1 + strings.Index(q[start+1:], "), ")
	if start < 0 || end <= start || !strings.Contains(q[start:end], fmt.Sprintf("$%d::", first+n-1)) {
		panic("bunstore: part " + name + " of multiSQL not found")
	}
	rest := placeholder.ReplaceAllStringFunc(q[end:], func(p string) string {
		k, _ := strconv.Atoi(p[1:])
		return "$" + strconv.Itoa(k-n)
	})
	return q[:start] + rest
}

// addGuard adds the guard of p: its new list row and the row it expects.
func (m *multiRows) addGuard(p *yaps.PreparedWrite) {
	l, x := p.List, p.Expect
	m.ref, m.title, m.kind = append(m.ref, l.Ref), append(m.title, l.Title), append(m.kind, string(l.Kind))
	m.updatedAt, m.docVersion = append(m.updatedAt, ms(l.UpdatedAt)), append(m.docVersion, l.DocVersion)
	m.archivedAt, m.rolledUpAt = append(m.archivedAt, msOrNil(l.ArchivedAt)), append(m.rolledUpAt, msOrNil(l.RolledUpAt))
	m.accountID = append(m.accountID, stringOrNil(l.AccountID))
	m.xTitle, m.xKind = append(m.xTitle, x.Title), append(m.xKind, string(x.Kind))
	m.xCreatedAt, m.xUpdatedAt = append(m.xCreatedAt, ms(x.CreatedAt)), append(m.xUpdatedAt, ms(x.UpdatedAt))
	m.xArchivedAt, m.xRolledUpAt = append(m.xArchivedAt, msOrNil(x.ArchivedAt)), append(m.xRolledUpAt, msOrNil(x.RolledUpAt))
	m.xAccountID = append(m.xAccountID, stringOrNil(x.AccountID))
	m.xDocVersion, m.perm = append(m.xDocVersion, x.DocVersion), append(m.perm, p.PermissionID)
}

// msOrNil is t in Unix milliseconds, nil for nil (an element of a bigint
// array).
func msOrNil(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	v := ms(*t)
	return &v
}

// stringOrNil maps "" to nil, as nullString does (an element of a text
// array).
func stringOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// collectMulti returns rs's ops as columns, or false when the batch must
// use the statement-per-op form (see above).
func collectMulti(rs []*prepReq) (*multiRows, bool) {
	if len(rs) < 2 {
		return nil, false
	}
	seen := map[yapKey]bool{}
	m := &multiRows{}
	for w, r := range rs {
		m.addGuard(r.p)
		ref, seq, ops := r.p.Expect.Ref, r.p.Expect.DocVersion, r.p.Ops
		for i := 0; i < len(ops); i++ {
			switch op := ops[i]; {
			case op.Update != nil:
				n, data, last := updateRow(ops, i)
				seq += int64(n)
				i = last
				m.updRef, m.updSeq, m.updData = append(m.updRef, ref), append(m.updSeq, seq), append(m.updData, data)
				m.updN = append(m.updN, int32(n))
			case op.PutYap != nil, op.DeleteYapID != "":
				id := op.DeleteYapID
				if op.PutYap != nil {
					id = op.PutYap.ID
				}
				k := yapKey{listRef: ref, id: id}
				if seen[k] {
					return nil, false
				}
				seen[k] = true
				if y := op.PutYap; y != nil && op.NewYap {
					m.newRef, m.newID = append(m.newRef, ref), append(m.newID, y.ID)
					m.newCreated, m.newDeleted = append(m.newCreated, ms(y.CreatedAt)), append(m.newDeleted, msOrNil(y.DeletedAt))
					m.newData = append(m.newData, encodeYap(y))
				} else if y != nil {
					m.putRef, m.putID = append(m.putRef, ref), append(m.putID, y.ID)
					m.putCreated, m.putDeleted = append(m.putCreated, ms(y.CreatedAt)), append(m.putDeleted, msOrNil(y.DeletedAt))
					m.putData = append(m.putData, encodeYap(y))
				} else {
					m.delRef, m.delID = append(m.delRef, ref), append(m.delID, id)
				}
			case op.Audit != nil:
				e := op.Audit
				m.audRef, m.audAt = append(m.audRef, ref), append(m.audAt, ms(e.At))
				m.audPerm, m.audRole = append(m.audPerm, e.PermissionID), append(m.audRole, string(e.Role))
				m.audAction, m.audYap, m.audDetail = append(m.audAction, e.Action), append(m.audYap, e.YapID), append(m.audDetail, e.Detail)
				m.auditWrite = append(m.auditWrite, w)
			}
		}
	}
	return m, true
}

// pipelineMulti sends rs, whose ops m holds, in the multi-row form: the
// settings, the locks and the batch statement, then a Sync, through
// pgconn with parameters encoded by the batcher itself (pgbinary.go). It
// calls sent once the pipeline is on its way and returns whether each
// write applied and the seqs of each write's audit entries, in order.
func (s *Store) pipelineMulti(c *pgx.Conn, rs []*prepReq, m *multiRows, sent func()) ([]bool, [][]int64, error) {
	ctx := context.Background()
	q, args := m.statement()
	var sds [3]*pgconn.StatementDescription
	for i, sql := range []string{settingsSQL, lockSQL, q} {
		sd, err := c.Prepare(ctx, batchStatementName(sql), sql) // once per connection, then cached
		if err != nil {
			sent()
			return nil, nil, err
		}
		sds[i] = sd
	}
	g := &s.prepGroup
	vals, buf, err := encodeArrayParams(g.buf[:0], sds[2].ParamOIDs, args)
	var lock []byte
	if err == nil {
		// The guards' list refs are the batch's (checkPrepared).
		lock, err = appendArrayParam(nil, oidTextArray, m.ref)
	}
	if err != nil {
		sent()
		return nil, nil, err
	}
	pl := c.PgConn().StartPipeline(ctx)
	fe := c.PgConn().Frontend()
	lend := &lendBuffer{buf: g.wbuf, need: pipelineSize(sds[:], vals, lock)}
	fe.Send(lend)
	pl.SendQueryStatement(sds[0], nil, nil, nil)
	pl.SendQueryStatement(sds[1], [][]byte{lock}, binaryFormat, nil)
	pl.SendQueryStatement(sds[2], vals, binaryFormat, binaryFormat)
	pl.SendPipelineSync()
	err = pl.Flush() // copies the parameters: buf is free again
	sent()
	if cap(buf) <= maxBatchBuf {
		g.buf = buf
	}
	g.wbuf = reclaimBuffer(fe, lend)
	if err != nil {
		return nil, nil, err // Flush closed the pipeline
	}
	applied, seqs, err := readMulti(pl, rs, m)
	if cerr := pl.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	return applied, seqs, nil
}

// maxBatchBuf bounds the parameter buffer and the write buffer the
// batcher keeps between batches.
const maxBatchBuf = 1 << 20

// The batcher's write buffer. pgx's frontend encodes the messages of a
// pipeline into a buffer of its own, which it replaces by a fresh 1 KiB
// one after every flush of more than 1 KiB: a batch's messages (tens of
// KiB, mostly the arrays) then grew it by doubling, each time, about twice
// their size in garbage per batch. The frontend encodes a message by
// appending it to its buffer and keeps the slice the message returns. So
// lendBuffer, a message of no bytes sent first, hands it a buffer with
// room for the whole pipeline, the batcher's own from the last batch if
// it is large enough, and reclaimBuffer takes it back after the flush if
// the frontend let it go.

// lendBuffer is a frontend message of no bytes: encoded, it copies what
// the frontend's buffer holds into buf, or a new buffer if buf has less
// than need bytes of room after it, and returns that one, which it keeps
// in lent.
type lendBuffer struct {
	buf, lent []byte
	need      int
}

func (*lendBuffer) Frontend() {}

func (*lendBuffer) Decode([]byte) error { return errors.New("bunstore: lendBuffer is not decoded") }

func (l *lendBuffer) Encode(dst []byte) ([]byte, error) {
	if cap(l.buf) < len(dst)+l.need {
		l.buf = make([]byte, 0, len(dst)+l.need)
	}
	l.lent = append(l.buf[:0], dst...)
	return l.lent, nil
}

// reclaimBuffer returns the buffer l lent the frontend, emptied, once the
// pipeline is flushed, or nil if the frontend still holds it (it keeps a
// buffer of up to 1 KiB after a flush) or it is larger than maxBatchBuf.
func reclaimBuffer(fe *pgproto3.Frontend, l *lendBuffer) []byte {
	if l.lent == nil || cap(l.lent) > maxBatchBuf {
		return nil
	}
	p := &probeBuffer{}
	fe.Send(p)
	if !p.ran || (cap(p.held) > 0 && &p.held[:1][0] == &l.lent[:1][0]) {
		return nil
	}
	return l.lent[:0]
}

// probeBuffer is a frontend message of no bytes that notes the buffer the
// frontend holds.
type probeBuffer struct {
	held []byte
	ran  bool
}

func (*probeBuffer) Frontend() {}

func (*probeBuffer) Decode([]byte) error { return errors.New("bunstore: probeBuffer is not decoded") }

func (p *probeBuffer) Encode(dst []byte) ([]byte, error) {
	p.held, p.ran = dst, true
	return dst, nil
}

// pipelineSize is about the bytes of the messages pipelineMulti sends with
// the statements sds and the parameters vals and lock, or a little more:
// the statements' names, the parameters with their lengths, and the rest
// of each message.
func pipelineSize(sds []*pgconn.StatementDescription, vals [][]byte, lock []byte) int {
	n := len(lock) + 64*len(sds) + 64
	for _, sd := range sds {
		n += 2 * len(sd.Name) // in each Bind, counted twice for room
	}
	for _, v := range vals {
		n += 6 + len(v) // length and format code
	}
	return n
}

// batchStatementNames holds the names of the statements pipelineMulti
// sends, hashed once.
var batchStatementNames = func() map[string]string {
	names := map[string]string{settingsSQL: statementName(settingsSQL), lockSQL: statementName(lockSQL)}
	for _, q := range multiForms {
		names[q] = statementName(q)
	}
	return names
}()

// batchStatementName is statementName for the statements of
// pipelineMulti.
func batchStatementName(sql string) string {
	if name, ok := batchStatementNames[sql]; ok {
		return name
	}
	return statementName(sql)
}

// statementName returns the name the batcher prepares sql under on each
// connection: short, since every Bind of the statement carries it (a
// statement named by its text, as the batcher's were, sent and looked up
// a few KiB per batch).
func statementName(sql string) string {
	h := sha256.Sum256([]byte(sql))
	return "yaps_" + hex.EncodeToString(h[:12])
}

// readMulti reads the results of pipelineMulti's statements: whether each
// write applied, and the seqs of each write's audit entries, in order.
func readMulti(pl *pgconn.Pipeline, rs []*prepReq, m *multiRows) ([]bool, [][]int64, error) {
	for range 2 { // the settings and the locks
		rr, err := nextResult(pl)
		if err != nil {
			return nil, nil, err
		}
		if _, err := rr.Close(); err != nil {
			return nil, nil, err
		}
	}
	rr, err := nextResult(pl)
	if err != nil {
		return nil, nil, err
	}
	applied := make([]bool, len(rs))
	var got []int64
	for rr.NextRow() {
		// Binary columns: the ref of an applied write's list, or the seq
		// of an audit row (8 bytes, big-endian); the other is NULL.
		v := rr.Values()
		if len(v) != 2 {
			err = fmt.Errorf("bunstore: the batch statement returned %d columns", len(v))
			break
		}
		if v[1] != nil {
			if len(v[1]) != 8 {
				err = fmt.Errorf("bunstore: an audit seq of %d bytes", len(v[1]))
				break
			}
			got = append(got, int64(binary.BigEndian.Uint64(v[1])))
			continue
		}
		i := slices.IndexFunc(rs, func(r *prepReq) bool { return r.p.Expect.Ref == string(v[0]) })
		if v[0] == nil || i < 0 || applied[i] {
			err = fmt.Errorf("bunstore: the batch applied an unexpected list %q", v[0])
			break
		}
		applied[i] = true
	}
	if _, cerr := rr.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	if res, err := pl.GetResults(); err != nil {
		return nil, nil, err
	} else if _, ok := res.(*pgconn.PipelineSync); !ok {
		return nil, nil, fmt.Errorf("bunstore: %T where the batch's Sync was due", res)
	}
	seqs := make([][]int64, len(rs))
	// The rows of applied writes, in batch order, drew ascending seqs.
	slices.Sort(got)
	next := 0
	for i, w := range m.auditWrite {
		if !applied[w] {
			continue
		}
		if next == len(got) {
			return nil, nil, fmt.Errorf("bunstore: audit row %d of the batch got no seq", i)
		}
		seqs[w] = append(seqs[w], got[next])
		next++
	}
	if next != len(got) {
		return nil, nil, fmt.Errorf("bunstore: %d audit seqs for %d rows", len(got), next)
	}
	return applied, seqs, nil
}

// nextResult returns the pipeline's next statement result.
func nextResult(pl *pgconn.Pipeline) (*pgconn.ResultReader, error) {
	res, err := pl.GetResults()
	if err != nil {
		return nil, err
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return nil, fmt.Errorf("bunstore: %T where a statement's result was due", res)
	}
	return rr, nil
}
