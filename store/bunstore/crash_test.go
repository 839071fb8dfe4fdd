//go:build unix

package bunstore_test

import (
	"context"
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

const crashEnv = "BUNSTORE_CRASH_CHILD_DB"

// A committed Update survives the process being killed right after it
// (SIGKILL: no Close, no WAL checkpoint), which is what
// synchronous=NORMAL in WAL mode promises.
func TestSQLiteCrashDurability(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteCrashDurability$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, "child output: %s", out)
	require.Equal(t, syscall.SIGKILL, exitErr.Sys().(syscall.WaitStatus).Signal(), "child output: %s", out)

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
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	now := time.Now()
	if err := s.CreateList(ctx, &yaps.List{Ref: "crash", Kind: yaps.KindTask, CreatedAt: now, UpdatedAt: now}, nil, []byte("u0"), nil); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	for i := 1; i <= 50; i++ {
		err := s.Update(ctx, "crash", func(tx yaps.Tx) error {
			_, err := tx.AppendUpdate(fmt.Appendf(nil, "u%d", i))
			return err
		})
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
