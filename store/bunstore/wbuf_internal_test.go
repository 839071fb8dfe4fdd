package bunstore

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/stretchr/testify/require"
)

// The batcher's write buffer (lendBuffer, reclaimBuffer): lending it
// changes none of the bytes the frontend writes; a flush of more than 1
// KiB lets it go, so the batcher takes it back and the next pipeline
// encodes into it without allocating; a smaller flush leaves it with the
// frontend, which then keeps it, so the batcher must not.
func TestWriteBufferLending(t *testing.T) { // not parallel: AllocsPerRun
	bind := func(size int) *pgproto3.Bind {
		return &pgproto3.Bind{PreparedStatement: "yaps_test", Parameters: [][]byte{bytes.Repeat([]byte{'x'}, size)}}
	}
	send := func(fe *pgproto3.Frontend, lent []byte, size int) *lendBuffer {
		l := &lendBuffer{buf: lent, need: size + 64}
		fe.Send(l)
		fe.SendBind(bind(size))
		fe.SendSync(&pgproto3.Sync{})
		require.NoError(t, fe.Flush())
		return l
	}
	want := func(size int) []byte {
		var w bytes.Buffer
		fe := pgproto3.NewFrontend(nil, &w)
		fe.SendBind(bind(size))
		fe.SendSync(&pgproto3.Sync{})
		require.NoError(t, fe.Flush())
		return w.Bytes()
	}

	var w bytes.Buffer
	fe := pgproto3.NewFrontend(nil, &w)
	l := send(fe, nil, 20_000)
	require.Equal(t, want(20_000), w.Bytes(), "lending changed the bytes written")
	buf := reclaimBuffer(fe, l)
	require.NotNil(t, buf, "a flush of 20 KB let the buffer go")
	require.GreaterOrEqual(t, cap(buf), 20_000)

	allocs := testing.AllocsPerRun(20, func() {
		w.Reset()
		l := send(fe, buf, 20_000)
		buf = reclaimBuffer(fe, l)
	})
	require.NotNil(t, buf)
	require.Equal(t, want(20_000), w.Bytes())
	// The lendBuffer, the Bind and the probe escape; the 20 KB do not.
	require.LessOrEqual(t, allocs, 4.0)

	// A small pipeline: the frontend keeps the buffer.
	w.Reset()
	l = send(fe, buf, 100)
	require.Equal(t, want(100), w.Bytes())
	require.Nil(t, reclaimBuffer(fe, l), "reclaimed a buffer the frontend still holds")

	// A buffer too small is not lent: a new one is, and reclaimed.
	w.Reset()
	l = send(fe, make([]byte, 0, 10), 5_000)
	require.Equal(t, want(5_000), w.Bytes())
	require.GreaterOrEqual(t, cap(reclaimBuffer(fe, l)), 5_000)

	// One larger than maxBatchBuf is not kept.
	w.Reset()
	l = send(fe, nil, maxBatchBuf+1)
	require.Nil(t, reclaimBuffer(fe, l))
}

// pipelineSize covers what pipelineMulti sends: the statements' names
// twice, the parameters and their lengths. The names are short, one per
// statement, and looked up without hashing the statements again.
func TestPipelineSize(t *testing.T) { // not parallel: AllocsPerRun
	sds := []*pgconn.StatementDescription{{Name: statementName("a")}, {Name: statementName("b")}}
	vals := [][]byte{make([]byte, 1000), nil, make([]byte, 10)}
	got := pipelineSize(sds, vals, make([]byte, 30))
	min := 1000 + 10 + 30 + 4*len(vals) + 2*2*len(sds[0].Name)
	require.GreaterOrEqual(t, got, min)
	require.Less(t, got, min+1024)
	require.NotEqual(t, statementName("a"), statementName("b"))
	require.Less(t, len(statementName(multiSQL)), 64, "names stay short")
	for _, q := range append([]string{settingsSQL, lockSQL}, multiForms...) {
		require.Equal(t, statementName(q), batchStatementName(q))
	}
	require.Len(t, batchStatementNames, 2+len(multiForms), "a name per statement")
	require.Zero(t, testing.AllocsPerRun(10, func() { batchStatementName(multiForms[0]) }))
}
