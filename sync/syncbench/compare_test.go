package syncbench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCompare runs the two workloads against `yaps serve` (a real
// process on SQLite, every update persisted) and the npm peers, and logs
// the figures side by side. Opt-in, it takes a while:
//
//	YAPS_BENCH_SYNC=1 go test -run TestCompare -v -timeout 10m ./sync/syncbench
//
// YAPS_BIN names a yaps binary; without it the test builds ./cmd/yaps.
func TestCompare(t *testing.T) {
	if os.Getenv("YAPS_BENCH_SYNC") == "" {
		t.Skip("set YAPS_BENCH_SYNC=1 to run the sync benchmark")
	}
	ctx := context.Background()
	dir, err := filepath.Abs(filepath.Join("..", "..", "interop"))
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	require.NoError(t, err)

	bin := os.Getenv("YAPS_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "yaps")
		build := exec.Command("go", "build", "-o", bin, "./cmd/yaps")
		build.Dir = filepath.Join("..", "..")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		require.NoError(t, build.Run())
	}
	// Back to back (the server may merge a client's burst into one write)
	// and paced at 20 ms per client (typing speed: nothing to merge).
	scenarios := []Scenario{
		{Rooms: 1, Clients: 20, Updates: 100}, {Rooms: 50, Clients: 4, Updates: 50},
		{Rooms: 1, Clients: 20, Updates: 100, Interval: 20 * time.Millisecond},
		{Rooms: 50, Clients: 4, Updates: 50, Interval: 20 * time.Millisecond},
	}
	var results []Result
	for _, sc := range scenarios {
		// A fresh server per scenario, so RSS and CPU are the scenario's.
		yt, stop := startYaps(t, bin)
		r, err := Run(ctx, yt, sc)
		stop()
		require.NoError(t, err)
		results = append(results, r)
		for _, kind := range []string{"ywebsocket", "hocuspocus"} {
			p, err := StartPeer(ctx, node, dir, kind)
			require.NoError(t, err)
			r, err := Run(ctx, p.Target, sc)
			p.Stop()
			require.NoError(t, err)
			results = append(results, r)
		}
	}
	for _, r := range results {
		t.Log(r)
	}
}

func startYaps(t *testing.T, bin string) (Target, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	db := "sqlite:" + filepath.Join(t.TempDir(), "yaps.db")
	cmd := exec.Command(bin, "serve", "--addr", addr, "--db", db, "--rate-limit", "off")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("yaps serve did not become healthy on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return Target{Name: "yaps (SQLite)", RoomURL: YapsRooms(fmt.Sprintf("http://%s/api/v1", addr)), PID: cmd.Process.Pid}, stop
}
