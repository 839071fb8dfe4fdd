package yaps_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
	"github.com/yaps-dev/yaps/yaps/yjs"
)

// docOf loads the list document from a snapshot into a fresh client doc.
func docOf(t *testing.T, e *env, a *yaps.Actor) *yjs.Doc {
	t.Helper()
	snap, _, err := e.svc.Snapshot(e.ctx, a, nil)
	require.NoError(t, err)
	d := yjs.NewDoc()
	require.NoError(t, d.ApplyUpdate(snap, nil))
	return d
}
