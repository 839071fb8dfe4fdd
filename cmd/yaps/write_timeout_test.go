package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// TestServeWriteTimeout: a client that stops reading a large answer is cut
// off after the write timeout instead of holding its handler (and the
// answer's bytes) for ever; the server goes on serving others.
func TestServeWriteTimeout(t *testing.T) {
	t.Parallel()
	m := NewMain(io.Discard)
	m.writeTimeout = time.Second
	require.NoError(t, m.ParseFlags([]string{"--addr", "127.0.0.1:0", "--db",
		"sqlite:" + filepath.Join(t.TempDir(), "yaps.db"), "--rate-limit", "off"}, func(string) string { return "" }))
	require.NoError(t, m.Run(context.Background()))
	t.Cleanup(func() { _ = m.Close() })
	base := "http://" + m.Addr()

	var list struct{ Ref, OwnerCode, APIBase string }
	doJSON(t, "POST", base+"/api/v1/lists", "", `{"title":"big"}`, http.StatusCreated, &list)
	body := strings.Repeat("x", 100_000)
	for range 40 {
		doJSON(t, "POST", list.APIBase+"/yaps", list.OwnerCode,
			fmt.Sprintf(`{"kind":"note","title":"n","body":%q}`, body), http.StatusCreated, nil)
	}
	page := "/api/v1/lists/" + list.Ref + "/yaps?limit=200"

	// A sync socket outlives the write timeout: the upgrade clears the
	// deadline the server set.
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+m.Addr()+"/api/v1/lists/"+list.Ref+"/sync?k="+list.OwnerCode, nil)
	require.NoError(t, err)
	defer ws.Close()

	// A client with a small receive buffer sends the request and reads
	// nothing for a while, so the server's writes block.
	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	conn, err := dialer.Dial("tcp", m.Addr())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: yaps\r\nAuthorization: Bearer %s\r\n\r\n", page, list.OwnerCode)
	require.NoError(t, err)
	time.Sleep(3 * time.Second)

	// Sync step 1 with an empty state vector: the server answers with its
	// step 2 (and its own step 1 came first, on connect).
	require.NoError(t, ws.WriteMessage(websocket.BinaryMessage, []byte{0, 0, 1, 0}))
	require.NoError(t, ws.SetReadDeadline(time.Now().Add(10*time.Second)))
	step2 := false
	for !step2 {
		_, msg, err := ws.ReadMessage()
		require.NoError(t, err)
		step2 = len(msg) > 2 && msg[0] == 0 && msg[1] == 1
	}

	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	n, err := io.Copy(io.Discard, res.Body)
	require.Error(t, err, "the whole answer (%d bytes) arrived after the write timeout", n)
	require.Less(t, n, int64(40*len(body)))

	// Others are served as before, the same answer in full.
	res2, err := http.Get(base + page + "&k=" + list.OwnerCode)
	require.NoError(t, err)
	defer res2.Body.Close()
	n2, err := io.Copy(io.Discard, res2.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res2.StatusCode)
	require.Greater(t, n2, int64(40*len(body)))
}
