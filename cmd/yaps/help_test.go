package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelpFlag asks every command and subcommand for its usage with -h and
// --help through run, the binary's entry point: each must print its usage on
// stderr and succeed (main exits 0), not report "flag: help requested".
func TestHelpFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args  []string
		usage string // a line only this command's usage prints
	}{
		{[]string{}, "usage: yaps <command>"},
		{[]string{"serve"}, "-sync-conns-per-ip-total"},
		{[]string{"doc"}, "yaps doc merge FILE..."},
		{[]string{"doc", "json"}, "yaps doc json [--map NAME]"},
		{[]string{"doc", "merge"}, "yaps doc merge FILE..."},
		{[]string{"bench"}, "usage: yaps bench <name>"},
		{[]string{"bench", "crdt"}, "-trace FILE"},
		{[]string{"bench", "http"}, "-pocketbase-bin"},
		{[]string{"bench", "sync"}, "-idle-targets"},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		covered[strings.Join(tc.args, " ")] = true
		for _, help := range []string{"-h", "--help"} {
			args := append(append([]string{}, tc.args...), help)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel()
				stdout, stderr, err := runCmd(t, args...)
				require.NoError(t, err, "stderr:\n%s", stderr)
				require.Contains(t, string(stderr), tc.usage)
				require.Empty(t, stdout)
			})
		}
	}
	// A command added later gets a row here, or this fails.
	for name := range commands {
		require.True(t, covered[name], "no -h row for %q", name)
	}
	for name := range benchCommands {
		require.True(t, covered["bench "+name], "no -h row for %q", "bench "+name)
	}
}
