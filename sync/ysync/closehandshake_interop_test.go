package ysync

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// closeRace runs interop/sync/closerace.mjs: count Node `ws` connections
// to url, each sending a malformed frame and then frames more small ones
// in the same tick. It returns how many connections saw each close code
// (0: not closed within 5 s) and the socket errors Node reported.
func closeRace(t *testing.T, url string, count, frames int) (codes, errs map[string]int) {
	t.Helper()
	node, dir := needNode(t)
	arg, err := json.Marshal(map[string]any{"urls": []string{url}, "count": count, "frames": frames})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "sync", "closerace.mjs"), string(arg))
	cmd.Dir = dir
	out, err := cmd.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "closerace.mjs: %s", stderr)
	var res struct {
		Codes  map[string]int `json:"codes"`
		Errors map[string]int `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(out, &res), "closerace.mjs printed %q", out)
	return res.Codes, res.Errors
}

// A y-websocket client in Node that is still sending when the server
// refuses it reads the server's close code, not 1006: the server waits for
// the client's close frame before it closes the socket (conn.keepOpenOnClose).
// Closing at once, with the client's frames unread, makes the kernel reset
// the connection; `ws` then reports 1006 and y-websocket reconnects after a
// final refusal. A Go client on loopback does not show the reset, so this
// needs Node. Without the closing handshake most of the 40 connections
// see 1006.
func TestInteropCloseCodeNotReset(t *testing.T) {
	t.Parallel()
	needNode(t)
	st := newStack(t, Config{})
	ref, owner := st.newList()

	const conns, frames = 40, 200
	codes, errs := closeRace(t, st.wsURL(ref, owner), conns, frames)
	require.Equal(t, map[string]int{strconv.Itoa(CloseBadMessage): conns}, codes,
		"every connection reads 4400 (1006: reset, 0: not closed); socket errors: %v", errs)
	require.Empty(t, errs)
	require.Eventually(t, func() bool { return st.sync.Stats().Conns == 0 }, 5*time.Second, 10*time.Millisecond)
}
