//go:build linux && (amd64 || arm64)

package bunstore

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

	"github.com/yaps-dev/yaps/yaps"
)

const spillCrashEnv = "BUNSTORE_SPILL_CRASH_DB"

// An acknowledged Update that dirtied more than the writer's page cache
// holds and then changed a page it had spilled (a 20 MB document update
// between two writes of one yap) survives a kill right after Update
// returned. The WAL hook held the commit frame's rewritten header in
// memory then, and the transaction was lost (SQLite store review).
func TestSpilledCommitSurvivesKill(t *testing.T) {
	if path := os.Getenv(spillCrashEnv); path != "" {
		spillCrashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpilledCommitSurvivesKill$")
	cmd.Env = append(os.Environ(), spillCrashEnv+"="+path)
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "acknowledged", "child output: %s", out)
	t.Logf("child: %s", out)

	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+path)
	require.NoError(t, err)
	defer s.Close()
	var check string
	require.NoError(t, s.sqldb.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check))
	t.Logf("integrity_check: %s", check)
	d, err := s.Doc(ctx, "big", 0)
	require.NoError(t, err)
	require.Equal(t, int64(4), d.LastSeq, "acknowledged update lost")
	y, err := s.Yap(ctx, "big", "y1")
	require.NoError(t, err, "acknowledged yap lost")
	require.Equal(t, "b", y.Content)
}

func spillCrashChild(path string) {
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+path)
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	now := time.Now()
	if err := s.CreateList(ctx, &yaps.List{Ref: "big", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	small := func() {
		if err := s.Update(ctx, "big", func(tx yaps.Tx) error {
			_, err := tx.AppendUpdate([]byte("small"))
			return err
		}); err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
	}
	time.Sleep(300 * time.Millisecond)
	small()
	// A read in progress (a long Doc or Yaps read, a backup): the
	// checkpointer cannot copy frames committed after its snapshot.
	rtx, err := s.sqldb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err == nil {
		var n int
		err = rtx.QueryRowContext(ctx, "SELECT COUNT(*) FROM lists").Scan(&n)
	}
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	small()
	big := bytes.Repeat([]byte("x"), 20<<20)
	err = s.Update(ctx, "big", func(tx yaps.Tx) error {
		y := &yaps.Yap{ID: "y1", ListRef: "big", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now, Content: "a", Status: "open"}
		if err := tx.PutYap(y); err != nil {
			return err
		}
		if _, err := tx.AppendUpdate(big); err != nil { // spills the yaps page to the WAL
			return err
		}
		y.Content = "b" // changes the spilled page again
		return tx.PutYap(y)
	})
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	fmt.Println("acknowledged, held headers:", walFrames.holding.Load())
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
