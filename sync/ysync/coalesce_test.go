package ysync

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordingConn records each Write and SetWriteDeadline it gets.
type recordingConn struct {
	net.Conn
	mu        sync.Mutex
	writes    [][]byte
	deadlines []time.Time
	closed    bool
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (r *recordingConn) SetWriteDeadline(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deadlines = append(r.deadlines, t)
	return nil
}

func (r *recordingConn) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

func TestCoalescingConn(t *testing.T) {
	t.Parallel()
	d1 := time.Unix(100, 0)
	d2 := time.Unix(200, 0)
	big := make([]byte, maxCoalesce)
	cases := []struct {
		name       string
		frames     [][]byte
		more       []bool // more() while each frame is written
		deadlines  []time.Time
		wantWrites [][]byte
		wantSet    []time.Time
	}{
		{
			name:       "nothing queued: each frame leaves at once",
			frames:     [][]byte{{1}, {2}},
			more:       []bool{false, false},
			deadlines:  []time.Time{d1, d2},
			wantWrites: [][]byte{{1}, {2}},
			wantSet:    []time.Time{d1, d2},
		},
		{
			name:       "queued frames share one write",
			frames:     [][]byte{{1}, {2, 2}, {3}},
			more:       []bool{true, true, false},
			deadlines:  []time.Time{d1, d1, d2},
			wantWrites: [][]byte{{1, 2, 2, 3}},
			wantSet:    []time.Time{d2},
		},
		{
			name:       "the same deadline is set once",
			frames:     [][]byte{{1}, {2}},
			more:       []bool{false, false},
			deadlines:  []time.Time{d1, d1},
			wantWrites: [][]byte{{1}, {2}},
			wantSet:    []time.Time{d1},
		},
		{
			name:       "a frame that does not fit flushes what is held first",
			frames:     [][]byte{{1}, big},
			more:       []bool{true, true},
			deadlines:  []time.Time{d1, d1},
			wantWrites: [][]byte{{1}, big},
			wantSet:    []time.Time{d1},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingConn{}
			i := 0
			cc := &coalescingConn{Conn: rec, more: func() bool { return c.more[i] }}
			for i = range c.frames {
				require.NoError(t, cc.SetWriteDeadline(c.deadlines[i]))
				n, err := cc.Write(c.frames[i])
				require.NoError(t, err)
				require.Equal(t, len(c.frames[i]), n)
			}
			require.Equal(t, c.wantWrites, rec.writes)
			require.Equal(t, c.wantSet, rec.deadlines)
		})
	}
}

// Close sends what is held (a close frame may be among it) before closing.
func TestCoalescingConnCloseFlushes(t *testing.T) {
	t.Parallel()
	rec := &recordingConn{}
	cc := &coalescingConn{Conn: rec, more: func() bool { return true }}
	_, err := cc.Write([]byte{1, 2})
	require.NoError(t, err)
	_, err = cc.Write([]byte{3})
	require.NoError(t, err)
	require.Empty(t, rec.writes)
	require.NoError(t, cc.Close())
	require.Equal(t, [][]byte{{1, 2, 3}}, rec.writes)
	require.True(t, rec.closed)
}
