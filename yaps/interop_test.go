package yaps_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/yaps"
)

// jsClient reads a snapshot (base64) on stdin, loads it into a real Yjs
// document, edits it like a y-websocket app would and prints the JSON of
// the document before the edit and the edit's update (base64).
const jsClient = `
import * as Y from 'yjs'
import fs from 'node:fs'
const snap = Buffer.from(fs.readFileSync(0, 'utf8').trim(), 'base64')
const doc = new Y.Doc()
Y.applyUpdate(doc, snap)
doc.getMap('list'); doc.getMap('yaps')
const before = doc.toJSON()
const id = process.argv[process.argv.length - 1]
const updates = []
doc.on('update', u => updates.push(u))
doc.transact(() => {
  doc.getMap('yaps').get(id).get('content').insert(0, 'JS: ')
  const y = new Y.Map()
  y.set('id', 'js-1'); y.set('kind', 'note')
  y.set('createdAt', '2026-03-01T12:00:00.000Z'); y.set('updatedAt', '2026-03-01T12:00:00.000Z')
  y.set('body', new Y.Text('from real Yjs'))
  const tags = new Y.Array(); tags.push(['js'])
  y.set('tags', tags)
  doc.getMap('yaps').set('js-1', y)
})
console.log(JSON.stringify({ before, update: Buffer.from(Y.mergeUpdates(updates)).toString('base64') }))
`

func TestInteropWithYjs(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("..", "interop"))
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(dir, "node_modules", "yjs", "package.json")); err != nil || serr != nil {
		if os.Getenv("YAPS_TEST_INTEROP") == "1" {
			t.Fatal("interop test needs node and interop/node_modules/yjs (npm ci in interop/)")
		}
		t.Skip("needs node and interop/node_modules/yjs; set YAPS_TEST_INTEROP=1 to make this a failure")
	}
	e := newEnv(t)
	a := e.list()
	y, _, err := e.svc.CreateYap(e.ctx, a, yaps.KindTask, yaps.YapFields{Content: yaps.Set("Milk 😀"),
		Status: yaps.Set(yaps.StatusOpen), Tags: yaps.Set([]string{"food"})}, "", nil)
	require.NoError(t, err)
	snap, _, err := e.svc.Snapshot(e.ctx, a, nil)
	require.NoError(t, err)

	cmd := exec.Command(node, "--input-type=module", "-e", jsClient, "--", y.ID)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(base64.StdEncoding.EncodeToString(snap))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var res struct {
		Before map[string]any `json:"before"`
		Update string         `json:"update"`
	}
	require.NoError(t, json.Unmarshal(out, &res))
	require.Equal(t, map[string]any{"title": "Groceries", "kind": "task"}, res.Before["list"])
	got := res.Before["yaps"].(map[string]any)[y.ID].(map[string]any)
	require.Equal(t, map[string]any{"id": y.ID, "kind": "task", "content": "Milk 😀", "status": "open",
		"tags": []any{"food"}, "createdAt": yaps.FormatTime(y.CreatedAt), "updatedAt": yaps.FormatTime(y.UpdatedAt)}, got)

	u, err := base64.StdEncoding.DecodeString(res.Update)
	require.NoError(t, err)
	require.NoError(t, e.svc.ApplyUpdate(e.ctx, a, u, "js"))
	y2, err := e.svc.GetYap(e.ctx, a, y.ID)
	require.NoError(t, err)
	require.Equal(t, "JS: Milk 😀", y2.Content)
	n, err := e.svc.GetYap(e.ctx, a, "js-1")
	require.NoError(t, err)
	require.Equal(t, "from real Yjs", n.Body)
	require.Equal(t, []string{"js"}, n.Tags)
	// And a minimal HTTP edit after the JS one keeps both.
	y3, err := e.svc.UpdateYap(e.ctx, a, y.ID, yaps.YapFields{Content: yaps.Set("JS: Oat milk 😀")}, "")
	require.NoError(t, err)
	require.Equal(t, "JS: Oat milk 😀", y3.Content)
}
