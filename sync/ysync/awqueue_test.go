package ysync

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A client sending large awareness states quickly, within every limit on
// its messages, does not fill the send queue of a peer that reads slower:
// the peer gets fewer, merged frames, and ends up with the latest state of
// every client.
func TestAwarenessFloodSlowReader(t *testing.T) {
	t.Parallel()
	const states = 400 // more than SendQueueMessages (256)
	e := newEnv(t, Config{})
	slow, start := dialPaused(t, e.url("L1", "viewer"))
	flooder := e.dial(t, "L1", "viewer")
	other := e.dial(t, "L1", "viewer")
	other.write(awarenessOf(9, 1, 100))
	for clock := uint64(1); clock <= states; clock++ {
		flooder.write(awarenessOf(7, clock, 32<<10))
	}
	// The flooder reads as fast as it can: it sees its states in order
	// (merged too, when it falls behind), up to the last.
	for last := uint64(0); last < states; {
		for _, e := range decodeAw(t, flooder.nextOf(MsgAwareness)) {
			if e.ClientID == 7 {
				require.Greater(t, e.Clock, last)
				last = e.Clock
			}
		}
	}

	start()
	require.Equal(t, uint64(SyncStep1), slow.next().SyncType)
	clocks := map[uint64]uint64{}
	frames := 0
	for clocks[7] < states || clocks[9] < 1 {
		m := slow.next()
		if m.Type != MsgAwareness {
			continue
		}
		frames++
		for _, e := range decodeAw(t, m) {
			require.Greater(t, e.Clock, clocks[e.ClientID], "clocks only go up")
			clocks[e.ClientID] = e.Clock
		}
	}
	require.Less(t, frames, states, "the slow reader's awareness was merged")
	slow.quiet()
}
