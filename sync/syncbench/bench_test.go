package syncbench

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/sync/ysync"
	"github.com/yaps-dev/yaps/yaps"
)

func TestScanMarkers(t *testing.T) {
	t.Parallel()
	var got [][2]int
	scanMarkers([]byte("x~1.2~~ab~~~3.4~\x7e~10.0~~~5~"), func(c, u int) { got = append(got, [2]int{c, u}) })
	require.Equal(t, [][2]int{{1, 2}, {3, 4}, {10, 0}}, got)
}

// yapsInProcess serves SQLite + service + HTTP API + sync in this process.
func yapsInProcess(t *testing.T) Target {
	t.Helper()
	ctx := context.Background()
	st, err := bunstore.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "yaps.db"))
	require.NoError(t, err)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := yaps.NewService(yaps.Config{Store: st, PurgeInterval: -1, Logger: quiet})
	require.NoError(t, err)
	s, err := ysync.New(svc, ysync.Config{Logger: quiet, MessagesPerSecond: -1})
	require.NoError(t, err)
	mux := http.NewServeMux()
	httpapi.Mount(mux, svc, httpapi.Config{Logger: quiet})
	s.Mount(mux, httpapi.DefaultPrefix)
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		_ = s.Close()
		ts.Close()
		_ = svc.Close()
		_ = st.Close()
	})
	return Target{Name: "yaps (in process)", RoomURL: YapsRooms(ts.URL + httpapi.DefaultPrefix), PID: os.Getpid()}
}

func TestRunYaps(t *testing.T) {
	t.Parallel()
	r, err := Run(context.Background(), yapsInProcess(t), Scenario{Rooms: 2, Clients: 3, Updates: 10, Timeout: 20 * time.Second})
	require.NoError(t, err)
	require.Equal(t, r.Expected, r.Delivered)
	require.EqualValues(t, 2*10*3*2, r.Delivered)
	t.Log(r)
}

// The npm peers need node and interop/node_modules; with
// YAPS_TEST_INTEROP=1 their absence fails the test.
func TestRunPeers(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("..", "..", "interop"))
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	_, statErr := os.Stat(filepath.Join(dir, "node_modules", "@hocuspocus", "server", "package.json"))
	if err != nil || statErr != nil {
		if os.Getenv("YAPS_TEST_INTEROP") == "1" {
			t.Fatal("node and interop/node_modules are required (run npm ci in interop/)")
		}
		t.Skip("node or interop/node_modules missing; set YAPS_TEST_INTEROP=1 to make this a failure")
	}
	for _, kind := range []string{"ywebsocket", "hocuspocus"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p, err := StartPeer(context.Background(), node, dir, kind)
			require.NoError(t, err)
			defer p.Stop()
			r, err := Run(context.Background(), p.Target, Scenario{Rooms: 2, Clients: 3, Updates: 10, Timeout: 20 * time.Second})
			require.NoError(t, err)
			require.Equal(t, r.Expected, r.Delivered)
			require.Positive(t, r.ServerRSS)
			t.Log(r)
		})
	}
}
