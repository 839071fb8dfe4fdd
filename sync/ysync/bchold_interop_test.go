package ysync

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
)

// Two browser tabs of one user: y-websocket's default (disableBc: false)
// shares every local update between them over a BroadcastChannel, and a
// tab does not forward what it got that way. Tab 1 creates yaps until its
// mutation budget is spent, so its last creation is held on the server;
// tab 2 got that yap over the channel at once and types into it. The server
// refuses tab 2's edit (it depends on the held creation) and drops it.
// When the hold ends the yap is stored without tab 2's text, and nothing
// ever sends it again: both tabs show "... edited by tab2", the server and
// every other client do not. The y-websocket reference server keeps such
// an update pending and integrates it once the creation arrives.
func TestInteropBroadcastChannelEditAfterHold(t *testing.T) {
	node, dir := needNode(t)
	st := budgetStack(t, 2, 5*time.Second)
	ref, owner := st.newList()
	tmp := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(tmp, "node_modules")))
	script := `
import * as Y from 'yjs'
import WebSocket from 'ws'
import { WebsocketProvider } from 'y-websocket'
const [url, room, code] = process.argv.slice(2)
const sleep = (ms) => new Promise(r => setTimeout(r, ms))
const mk = (bc) => { const doc = new Y.Doc(); const p = new WebsocketProvider(url, room, doc, { WebSocketPolyfill: WebSocket, params: { k: code }, disableBc: !bc, maxBackoffTime: 200 }); p.messageHandlers[2] = () => {}; return { doc, p } }
const text = (d) => d.getMap('yaps').get('y6')?.get('content')?.toString()
const t1 = mk(true), t2 = mk(true)
await sleep(1000)
for (let i = 1; i <= 6; i++) {
  t1.doc.transact(() => { const m = new Y.Map(); t1.doc.getMap('yaps').set('y' + i, m); m.set('kind', 'task'); m.set('status', 'open'); m.set('content', new Y.Text('item ' + i)) })
  await sleep(200)
}
t2.doc.getMap('yaps').get('y6').get('content').insert(6, ' edited by tab2')
await sleep(8000) // the hold (5 s window) ends meanwhile
const fresh = mk(false)
await sleep(1500)
console.log(JSON.stringify({ tab1: text(t1.doc), tab2: text(t2.doc), fresh: text(fresh.doc) }))
process.exit(0)
`
	path := filepath.Join(tmp, "tabs.mjs")
	require.NoError(t, os.WriteFile(path, []byte(script), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(st.ts.URL, "http") + httpapi.DefaultPrefix + "/lists"
	out, err := exec.CommandContext(ctx, node, path, url, ref+"/sync", owner).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("clients: %s", out)
	require.Contains(t, string(out), `"tab1":"item 6 edited by tab2"`)
	require.Contains(t, string(out), `"tab2":"item 6 edited by tab2"`)
	// What the tabs show must reach the server and the other clients.
	require.Equal(t, "item 6 edited by tab2", st.yaps(ref, owner)["y6"]["content"])
	require.Contains(t, string(out), `"fresh":"item 6 edited by tab2"`)
}
