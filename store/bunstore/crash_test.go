//go:build unix

package bunstore_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/yaps"
)

const (
	crashEnv      = "BUNSTORE_CRASH_CHILD_DB"
	spillCrashEnv = "BUNSTORE_SPILL_CRASH_DB"
)

// killedChild runs test name again in a child process, with env set to a
// new database path, and returns the path and the child's output once the
// child killed itself (SIGKILL: no Close, no WAL checkpoint).
func killedChild(t *testing.T, name, env string) (path string, out []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$")
	cmd.Env = append(os.Environ(), env+"="+path)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, "child output: %s", out)
	require.Equal(t, syscall.SIGKILL, exitErr.Sys().(syscall.WaitStatus).Signal(), "child output: %s", out)
	return path, out
}

// childMust ends a crash child that cannot go on (the parent then fails:
// the child was not killed).
func childMust(err error) {
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
}

// childKill ends a crash child the hard way.
func childKill() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// A committed Update survives the process being killed right after it
// (SIGKILL: no Close, no WAL checkpoint), which is what
// synchronous=NORMAL in WAL mode promises.
func TestSQLiteCrashDurability(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	t.Parallel()
	path, _ := killedChild(t, "TestSQLiteCrashDurability", crashEnv)

	s := open(t, "sqlite:"+path)
	d, err := s.Doc(context.Background(), "crash", 0)
	require.NoError(t, err)
	require.Equal(t, int64(51), d.LastSeq)
	require.Len(t, d.Updates, 51)
	require.Equal(t, []byte("u50"), d.Updates[50])
}

func crashChild(path string) {
	ctx := context.Background()
	s, err := bunstore.Open(ctx, "sqlite:"+path)
	childMust(err)
	now := time.Now()
	childMust(s.CreateList(ctx, &yaps.List{Ref: "crash", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil))
	for i := 1; i <= 50; i++ {
		childMust(s.Update(ctx, "crash", func(tx yaps.Tx) error {
			_, err := tx.AppendUpdate(fmt.Appendf(nil, "u%d", i))
			return err
		}))
	}
	childKill()
}

// An acknowledged Update that dirtied more than the writer's page cache
// holds and then changed a page it had spilled (a 20 MB document update
// between two writes of one yap) survives a kill right after Update
// returned. The WAL hook (walframes.go) held the commit frame's rewritten
// header in memory then, and the transaction was lost (SQLite store
// review).
func TestSpilledCommitSurvivesKill(t *testing.T) {
	if path := os.Getenv(spillCrashEnv); path != "" {
		spillCrashChild(path)
		return
	}
	path, out := killedChild(t, "TestSpilledCommitSurvivesKill", spillCrashEnv)
	require.Contains(t, string(out), "acknowledged", "child output: %s", out)

	ctx := context.Background()
	s := open(t, "sqlite:"+path)
	d, err := s.Doc(ctx, "big", 0)
	require.NoError(t, err)
	require.Equal(t, int64(4), d.LastSeq, "acknowledged update lost")
	y, err := s.Yap(ctx, "big", "y1")
	require.NoError(t, err, "acknowledged yap lost")
	require.Equal(t, "b", y.Content)
}

func spillCrashChild(path string) {
	ctx := context.Background()
	s, err := bunstore.Open(ctx, "sqlite:"+path)
	childMust(err)
	now := time.Now()
	childMust(s.CreateList(ctx, &yaps.List{Ref: "big", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil))
	small := func() {
		childMust(s.Update(ctx, "big", func(tx yaps.Tx) error {
			_, err := tx.AppendUpdate([]byte("small"))
			return err
		}))
	}
	time.Sleep(300 * time.Millisecond)
	small()
	// A read in progress (a long Doc or Yaps read, a backup), on a
	// connection of its own: the checkpointer cannot copy frames
	// committed after its snapshot.
	reader, err := sql.Open("sqlite", "file:"+path)
	childMust(err)
	rtx, err := reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	childMust(err)
	var n int
	childMust(rtx.QueryRowContext(ctx, "SELECT COUNT(*) FROM lists").Scan(&n))
	small()
	big := bytes.Repeat([]byte("x"), 20<<20)
	childMust(s.Update(ctx, "big", func(tx yaps.Tx) error {
		y := &yaps.Yap{ID: "y1", ListRef: "big", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now, Content: "a", Status: "open"}
		if err := tx.PutYap(y); err != nil {
			return err
		}
		if _, err := tx.AppendUpdate(big); err != nil { // spills the yaps page to the WAL
			return err
		}
		y.Content = "b" // changes the spilled page again
		return tx.PutYap(y)
	}))
	fmt.Println("acknowledged")
	childKill()
}
