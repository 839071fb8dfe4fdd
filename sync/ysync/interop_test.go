package ysync

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
)

// The interop tests drive real y-websocket clients (WebsocketProvider of
// the y-websocket npm package, ws as polyfill) in one Node process, see
// interop/sync/peer.mjs. With YAPS_TEST_INTEROP=1 a missing node or
// interop/node_modules fails the test; otherwise it is skipped.

func needNode(t *testing.T) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "interop"))
	require.NoError(t, err)
	var missing []string
	node, err = exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node on PATH")
	}
	for _, m := range []string{"yjs", "y-websocket", "y-protocols", "ws", "lib0"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", m, "package.json")); err != nil {
			missing = append(missing, "interop/node_modules/"+m)
		}
	}
	if len(missing) > 0 {
		msg := "interop test needs " + strings.Join(missing, ", ") + " (run npm ci in interop/)"
		if os.Getenv("YAPS_TEST_INTEROP") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; set YAPS_TEST_INTEROP=1 to make this a failure")
	}
	return node, dir
}

type nodeEvent struct {
	Ev     string `json:"ev"`
	ID     string `json:"id"`
	Status string `json:"status"`
	Synced bool   `json:"synced"`
	Reason string `json:"reason"`
	Code   int    `json:"code"`
}

type nodeState struct {
	Roots     map[string]any `json:"roots"`
	Awareness map[string]any `json:"awareness"`
	Synced    bool           `json:"synced"`
	Connected bool           `json:"connected"`
}

// nodePeers is one Node process holding any number of providers, seen
// from one (sub)test.
type nodePeers struct {
	t *testing.T
	*nodeProc
}

func (n *nodePeers) with(t *testing.T) *nodePeers { return &nodePeers{t: t, nodeProc: n.nodeProc} }

type nodeProc struct {
	stdin io.WriteCloser

	mu      sync.Mutex
	req     int
	pending map[int]chan nodeResp
	events  []nodeEvent
	stderr  strings.Builder
}

type nodeResp struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

func startNode(t *testing.T) *nodePeers {
	t.Helper()
	node, dir := needNode(t)
	cmd := exec.Command(node, filepath.Join(dir, "sync", "peer.mjs"))
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	n := &nodePeers{t: t, nodeProc: &nodeProc{stdin: stdin, pending: map[int]chan nodeResp{}}}
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.stderr.Len() < 64<<10 {
			n.stderr.Write(p)
		}
		return len(p), nil
	})
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var head struct {
				Req *int   `json:"req"`
				Ev  string `json:"ev"`
			}
			if json.Unmarshal(sc.Bytes(), &head) != nil {
				continue
			}
			n.mu.Lock()
			if head.Ev != "" {
				var ev nodeEvent
				_ = json.Unmarshal(sc.Bytes(), &ev)
				n.events = append(n.events, ev)
			} else if head.Req != nil {
				var r nodeResp
				_ = json.Unmarshal(sc.Bytes(), &r)
				if ch := n.pending[*head.Req]; ch != nil {
					ch <- r
					delete(n.pending, *head.Req)
				}
			}
			n.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			n.mu.Lock()
			t.Logf("node stderr:\n%s", n.stderr.String())
			n.mu.Unlock()
		}
	})
	return n
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// call runs one operation of peer.mjs and decodes its result into out.
func (n *nodePeers) call(op string, args map[string]any, out any) {
	n.t.Helper()
	ch := make(chan nodeResp, 1)
	n.mu.Lock()
	n.req++
	id := n.req
	n.pending[id] = ch
	msg := map[string]any{"req": id, "op": op}
	for k, v := range args {
		msg[k] = v
	}
	b, err := json.Marshal(msg)
	require.NoError(n.t, err)
	_, err = n.stdin.Write(append(b, '\n'))
	n.mu.Unlock()
	require.NoError(n.t, err)
	select {
	case r := <-ch:
		require.True(n.t, r.OK, "%s: %s", op, r.Error)
		if out != nil {
			require.NoError(n.t, json.Unmarshal(r.Result, out))
		}
	case <-time.After(10 * time.Second):
		n.t.Fatalf("node did not answer %s", op)
	}
}

// connect opens a provider named id on list ref with code and waits until
// it synced.
func (n *nodePeers) connect(st *stack, id, ref, code string) {
	n.t.Helper()
	n.open(st, id, ref, code)
	n.waitState(id, func(s nodeState) bool { return s.Synced })
}

// open opens a provider named id on list ref with code, without waiting,
// and returns its Yjs client ID.
func (n *nodePeers) open(st *stack, id, ref, code string) uint64 {
	n.t.Helper()
	var got struct {
		ClientID uint64 `json:"clientID"`
	}
	serverURL := "ws" + strings.TrimPrefix(st.ts.URL, "http") + httpapi.DefaultPrefix + "/lists"
	n.call("connect", map[string]any{"id": id, "serverUrl": serverURL, "room": ref + "/sync", "code": code}, &got)
	return got.ClientID
}

// custom returns what provider id holds in the roots outside the schema
// that setCustom writes: the map "custom" and the text "notes".
func (n *nodePeers) custom(id string) (custom map[string]any, notes string) {
	n.t.Helper()
	var got struct {
		Custom map[string]any `json:"custom"`
		Notes  string         `json:"notes"`
	}
	n.call("customOf", map[string]any{"id": id}, &got)
	return got.Custom, got.Notes
}

func (n *nodePeers) state(id string) nodeState {
	n.t.Helper()
	var s nodeState
	n.call("state", map[string]any{"id": id}, &s)
	return s
}

// waitState polls a provider's state until cond holds (10 s at most).
func (n *nodePeers) waitState(id string, cond func(s nodeState) bool) nodeState {
	n.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := n.state(id)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("peer %s: condition not reached; state: %+v", id, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitEvent waits for an event matching pred.
func (n *nodePeers) waitEvent(pred func(e nodeEvent) bool) nodeEvent {
	n.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n.mu.Lock()
		for _, e := range n.events {
			if pred(e) {
				n.mu.Unlock()
				return e
			}
		}
		n.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.t.Fatalf("event not seen; events: %+v", n.events)
	return nodeEvent{}
}

func (n *nodePeers) sawEvent(pred func(e nodeEvent) bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range n.events {
		if pred(e) {
			return true
		}
	}
	return false
}

// yapOf returns a yap of a provider's document.
func yapOf(s nodeState, id string) map[string]any {
	yaps, _ := s.Roots["yaps"].(map[string]any)
	y, _ := yaps[id].(map[string]any)
	return y
}

func TestInteropYWebsocket(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	st := newStack(t, Config{})

	t.Run("roles and both directions", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		ref, owner := st.newList()
		editor, _ := st.issue(ref, owner, "editor")
		viewer, _ := st.issue(ref, owner, "viewer")
		agent, _ := st.issue(ref, owner, "agent")
		for id, code := range map[string]string{"r-owner": owner, "r-editor": editor, "r-viewer": viewer, "r-agent": agent} {
			n.connect(st, id, ref, code)
			require.Equal(t, "Groceries", n.state(id).Roots["list"].(map[string]any)["title"])
		}

		// HTTP -> every client.
		y := st.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "milk", "status": "open"}, 201)
		id := y["id"].(string)
		for _, p := range []string{"r-owner", "r-editor", "r-viewer", "r-agent"} {
			n.waitState(p, func(s nodeState) bool { return yapOf(s, id)["content"] == "milk" })
		}

		// Owner, editor and agent (tasks:write) writes -> HTTP.
		for _, p := range []string{"r-owner", "r-editor", "r-agent"} {
			n.call("createYap", map[string]any{"id": p, "yapId": "from-" + p[2:],
				"fields": map[string]any{"kind": "task", "status": "open"}, "texts": map[string]any{"content": "by " + p}}, nil)
		}
		require.Eventually(t, func() bool {
			ys := st.yaps(ref, owner)
			return ys["from-owner"]["content"] == "by r-owner" && ys["from-editor"]["content"] == "by r-editor" && ys["from-agent"]["content"] == "by r-agent"
		}, 10*time.Second, 20*time.Millisecond)
		n.waitState("r-viewer", func(s nodeState) bool {
			return yapOf(s, "from-agent") != nil && yapOf(s, "from-agent")["createdAt"] != nil
		})

		// An agent without yaps:write cannot add a note: the server removes
		// it again, on every client.
		n.call("createYap", map[string]any{"id": "r-agent", "yapId": "agent-note",
			"fields": map[string]any{"kind": "note"}, "texts": map[string]any{"body": "sneaky"}}, nil)
		n.waitState("r-agent", func(s nodeState) bool { return yapOf(s, "agent-note") == nil })
		n.waitState("r-owner", func(s nodeState) bool { return yapOf(s, "agent-note") == nil })
		_, ok := st.yaps(ref, owner)["agent-note"]
		require.False(t, ok)

		// The viewer is read-only: one "permission denied", server unchanged.
		n.call("setField", map[string]any{"id": "r-viewer", "yapId": id, "key": "status", "value": "done"}, nil)
		n.waitEvent(func(e nodeEvent) bool {
			return e.Ev == "denied" && e.ID == "r-viewer" && e.Reason == "permission denied"
		})
		require.Equal(t, "open", st.yaps(ref, owner)[id]["status"])
		require.Equal(t, "open", yapOf(n.state("r-owner"), id)["status"])
		// Only this subtest's clients ("r-..."): the Node process, and so its
		// events, is shared with the parallel subtests, whose own denials
		// ("c-mallory", "a-mallory") may come at any time.
		require.False(t, n.sawEvent(func(e nodeEvent) bool {
			return e.Ev == "denied" && strings.HasPrefix(e.ID, "r-") && e.ID != "r-viewer"
		}))
	})

	t.Run("text merges per character", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		ref, owner := st.newList()
		editor, _ := st.issue(ref, owner, "editor")
		y := st.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "milk", "status": "open"}, 201)
		id := y["id"].(string)
		n.connect(st, "m-a", ref, owner)
		n.connect(st, "m-b", ref, editor)
		for _, p := range []string{"m-a", "m-b"} {
			n.waitState(p, func(s nodeState) bool { return yapOf(s, id)["content"] == "milk" })
		}
		// Both edits are made before either sees the other's.
		n.call("insertMany", map[string]any{"edits": []map[string]any{
			{"id": "m-a", "yapId": id, "field": "content", "index": 0, "text": "oat "},
			{"id": "m-b", "yapId": id, "field": "content", "index": 4, "text": "!"},
		}}, nil)
		for _, p := range []string{"m-a", "m-b"} {
			n.waitState(p, func(s nodeState) bool { return yapOf(s, id)["content"] == "oat milk!" })
		}
		require.Eventually(t, func() bool { return st.yaps(ref, owner)[id]["content"] == "oat milk!" }, 5*time.Second, 20*time.Millisecond)

		// And an HTTP PATCH is a minimal edit that merges with the clients.
		st.do("PATCH", "/lists/"+ref+"/yaps/"+id, owner, map[string]any{"content": "oat milk! x2"}, 200)
		for _, p := range []string{"m-a", "m-b"} {
			n.waitState(p, func(s nodeState) bool { return yapOf(s, id)["content"] == "oat milk! x2" })
		}
	})

	t.Run("compensation reaches clients", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		ref, owner := st.newList()
		editor, _ := st.issue(ref, owner, "editor")
		y := st.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "milk", "status": "open"}, 201)
		id := y["id"].(string)
		n.connect(st, "c-a", ref, owner)
		n.connect(st, "c-b", ref, editor)
		n.call("setField", map[string]any{"id": "c-b", "yapId": id, "key": "status", "value": "bogus"}, nil)
		// The writer first sees its own value, then the server's fix.
		for _, p := range []string{"c-a", "c-b"} {
			n.waitState(p, func(s nodeState) bool {
				y := yapOf(s, id)
				return y["status"] == "open" && y["content"] == "milk"
			})
		}
		require.Equal(t, "open", st.yaps(ref, owner)[id]["status"])
		// A multi-line task content is invalid too.
		n.call("insertText", map[string]any{"id": "c-a", "yapId": id, "field": "content", "index": 4, "text": "\nsecond line"}, nil)
		for _, p := range []string{"c-a", "c-b"} {
			n.waitState(p, func(s nodeState) bool { return yapOf(s, id)["content"] == "milk" })
		}
	})

	t.Run("unknown root types are kept", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		ref, owner := st.newList()
		n.connect(st, "u-a", ref, owner)
		n.call("setCustom", map[string]any{"id": "u-a", "key": "color", "value": "teal", "text": "free text"}, nil)
		// Stored, not just relayed: a client that connects later gets it.
		require.Eventually(t, func() bool {
			return st.svc != nil && len(st.snapshot(ref, owner)) > 0 && strings.Contains(string(st.snapshot(ref, owner)), "free text")
		}, 5*time.Second, 20*time.Millisecond)
		n.connect(st, "u-b", ref, owner)
		custom, notes := n.custom("u-b")
		require.Equal(t, map[string]any{"color": "teal"}, custom)
		require.Equal(t, "free text", notes)
	})

	t.Run("an agent's writes outside the schema are undone", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		ref, owner := st.newList()
		agent, _ := st.issue(ref, owner, "agent", "yaps:write")
		n.connect(st, "x-owner", ref, owner)
		n.connect(st, "x-agent", ref, agent)
		n.call("setCustom", map[string]any{"id": "x-agent", "key": "color", "value": "teal", "text": "agent text"}, nil)
		// The server's compensation empties the roots again on the agent's
		// own client, which wrote them.
		n.waitState("x-agent", func(s nodeState) bool {
			custom, _ := s.Roots["custom"].(map[string]any)
			return s.Roots["custom"] != nil && len(custom) == 0 && s.Roots["notes"] == ""
		})
		custom, notes := n.custom("x-owner")
		require.Empty(t, custom)
		require.Empty(t, notes)
		// The agent's Y.Doc is still in step with the list: its next
		// write is accepted and reaches the owner and the HTTP API.
		n.call("createYap", map[string]any{"id": "x-agent", "yapId": "after-x",
			"fields": map[string]any{"kind": "note"}, "texts": map[string]any{"body": "still here"}}, nil)
		n.waitState("x-owner", func(s nodeState) bool { return yapOf(s, "after-x")["body"] == "still here" })
		require.Eventually(t, func() bool { return st.yaps(ref, owner)["after-x"]["body"] == "still here" },
			10*time.Second, 20*time.Millisecond)
		require.NotContains(t, string(st.snapshot(ref, owner)), "teal")
	})

	t.Run("awareness", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		ref, owner := st.newList()
		viewer, _ := st.issue(ref, owner, "viewer")
		a, b := n.open(st, "w-a", ref, owner), n.open(st, "w-b", ref, viewer)
		n.waitState("w-a", func(s nodeState) bool { return s.Synced })
		n.waitState("w-b", func(s nodeState) bool { return s.Synced })
		n.call("awareness", map[string]any{"id": "w-a", "state": map[string]any{"user": "ann"}}, nil)
		n.call("awareness", map[string]any{"id": "w-b", "state": map[string]any{"user": "bob"}}, nil)
		ka, kb := fmt.Sprint(a), fmt.Sprint(b)
		n.waitState("w-b", func(s nodeState) bool { return fmt.Sprint(s.Awareness[ka]) == "map[user:ann]" })
		n.waitState("w-a", func(s nodeState) bool { return fmt.Sprint(s.Awareness[kb]) == "map[user:bob]" })
		// A newcomer gets both at once.
		n.connect(st, "w-c", ref, owner)
		n.waitState("w-c", func(s nodeState) bool { return s.Awareness[ka] != nil && s.Awareness[kb] != nil })
		// a vanishes without a goodbye: the server announces its removal.
		n.call("drop", map[string]any{"id": "w-a"}, nil)
		n.waitState("w-b", func(s nodeState) bool { _, ok := s.Awareness[ka]; return !ok })
		n.waitState("w-c", func(s nodeState) bool { _, ok := s.Awareness[ka]; return !ok })
	})

	t.Run("reconnect after a server restart loses nothing", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		db := filepath.Join(t.TempDir(), "yaps.db")
		st1 := startStack(t, Config{}, db, "127.0.0.1:0")
		addr := st1.ts.Listener.Addr().String()
		ref, owner := st1.newList()
		y := st1.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "milk", "status": "open"}, 201)
		id := y["id"].(string)
		n.connect(st1, "s-a", ref, owner)
		n.waitState("s-a", func(s nodeState) bool { return yapOf(s, id)["content"] == "milk" })
		n.call("insertText", map[string]any{"id": "s-a", "yapId": id, "field": "content", "index": 4, "text": " online"}, nil)
		require.Eventually(t, func() bool { return st1.yaps(ref, owner)[id]["content"] == "milk online" }, 5*time.Second, 20*time.Millisecond)

		st1.shutdown()
		e := n.waitEvent(func(e nodeEvent) bool { return e.Ev == "closed" && e.ID == "s-a" })
		require.Equal(t, 1001, e.Code)
		// Edited while the server is down.
		n.call("insertText", map[string]any{"id": "s-a", "yapId": id, "field": "content", "index": 0, "text": "offline "}, nil)

		st2 := startStack(t, Config{}, db, addr)
		require.Eventually(t, func() bool { return st2.yaps(ref, owner)[id]["content"] == "offline milk online" }, 10*time.Second, 50*time.Millisecond)
		n.connect(st2, "s-b", ref, owner)
		n.waitState("s-b", func(s nodeState) bool { return yapOf(s, id)["content"] == "offline milk online" })
	})

	t.Run("an edit over MaxMessageSize syncs in the step 2 of a reconnect", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		cfg := Config{MaxMessageSize: 16 << 10}
		db := filepath.Join(t.TempDir(), "yaps.db")
		st1 := startStack(t, cfg, db, "127.0.0.1:0")
		addr := st1.ts.Listener.Addr().String()
		ref, owner := st1.newList()
		n.connect(st1, "g-a", ref, owner)
		st1.shutdown()
		n.waitEvent(func(e nodeEvent) bool { return e.Ev == "closed" && e.ID == "g-a" })
		tooBig := func(e nodeEvent) bool { return e.Ev == "closed" && e.ID == "g-a" && e.Code == 1009 }

		// Edited offline: 40 kB, all of it in the step 2 the provider
		// sends when it reconnects.
		offline := strings.Repeat("offline ", 5000)
		n.call("setCustom", map[string]any{"id": "g-a", "key": "k", "value": "v", "text": offline}, nil)
		st2 := startStack(t, cfg, db, addr)
		require.Eventually(t, func() bool { return strings.Contains(string(st2.snapshot(ref, owner)), offline) },
			10*time.Second, 50*time.Millisecond)
		require.False(t, n.sawEvent(tooBig))

		// A live update over the limit is refused, but the provider
		// reconnects, and its step 2 carries the edit.
		live := strings.Repeat("live ", 5000)
		n.call("setCustom", map[string]any{"id": "g-a", "key": "k", "value": "w", "text": live}, nil)
		n.waitEvent(tooBig)
		require.Eventually(t, func() bool { return strings.Contains(string(st2.snapshot(ref, owner)), live) },
			10*time.Second, 50*time.Millisecond)
		n.connect(st2, "g-b", ref, owner)
		custom, notes := n.custom("g-b")
		require.Equal(t, map[string]any{"k": "w"}, custom)
		require.Equal(t, live+offline, notes)
	})

	t.Run("a client ID belongs to its code", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		ref, owner := st.newList()
		alice, _ := st.issue(ref, owner, "editor")
		mallory, _ := st.issue(ref, owner, "editor")
		y := st.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "milk", "status": "open"}, 201)
		id := y["id"].(string)
		aliceID := n.open(st, "c-alice", ref, alice)
		n.waitState("c-alice", func(s nodeState) bool { return yapOf(s, id)["content"] == "milk" })
		n.connect(st, "c-mallory", ref, mallory)
		content := func() any { return st.yaps(ref, owner)[id]["content"] }

		// Alice writes (her client ID is now hers), then goes offline and
		// edits on.
		n.call("insertText", map[string]any{"id": "c-alice", "yapId": id, "field": "content", "index": 4, "text": " and"}, nil)
		require.Eventually(t, func() bool { return content() == "milk and" }, 5*time.Second, 20*time.Millisecond)
		n.call("drop", map[string]any{"id": "c-alice"}, nil)
		n.call("insertText", map[string]any{"id": "c-alice", "yapId": id, "field": "content", "index": 8, "text": " bread"}, nil)

		// Mallory writes under Alice's ID at her next clock: refused.
		n.waitState("c-mallory", func(s nodeState) bool { return yapOf(s, id)["content"] == "milk and" })
		n.call("forgeClient", map[string]any{"id": "c-mallory", "clientID": aliceID}, nil)
		n.call("insertText", map[string]any{"id": "c-mallory", "yapId": id, "field": "content", "index": 0, "text": "X"}, nil)
		n.waitEvent(func(e nodeEvent) bool {
			return e.Ev == "denied" && e.ID == "c-mallory" && e.Reason == "permission denied"
		})

		// Alice comes back: her offline edit is stored, not taken for a
		// duplicate of Mallory's.
		n.call("reconnect", map[string]any{"id": "c-alice"}, nil)
		require.Eventually(t, func() bool { return content() == "milk and bread" }, 10*time.Second, 20*time.Millisecond)
	})

	t.Run("a client ID is claimed when its awareness is announced", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		ref, owner := st.newList()
		alice, _ := st.issue(ref, owner, "editor")
		mallory, _ := st.issue(ref, owner, "editor")
		y := st.do("POST", "/lists/"+ref+"/yaps", owner, map[string]any{"kind": "task", "content": "milk", "status": "open"}, 201)
		id := y["id"].(string)
		aliceNum := n.open(st, "a-alice", ref, alice)
		aliceID := strconv.FormatUint(aliceNum, 10)
		// Her first state (y-protocols relays none at clock 0).
		n.call("awareness", map[string]any{"id": "a-alice", "state": map[string]any{"user": "alice"}}, nil)

		// Mallory sees Alice's client ID in awareness before Alice has
		// written anything, and writes under it first: refused.
		n.connect(st, "a-mallory", ref, mallory)
		n.waitState("a-mallory", func(s nodeState) bool { _, ok := s.Awareness[aliceID]; return ok && yapOf(s, id)["content"] == "milk" })
		n.call("forgeClient", map[string]any{"id": "a-mallory", "clientID": aliceNum}, nil)
		n.call("insertText", map[string]any{"id": "a-mallory", "yapId": id, "field": "content", "index": 0, "text": "X"}, nil)
		n.waitEvent(func(e nodeEvent) bool {
			return e.Ev == "denied" && e.ID == "a-mallory" && e.Reason == "permission denied"
		})

		// Alice's first edit under her ID is stored.
		n.call("insertText", map[string]any{"id": "a-alice", "yapId": id, "field": "content", "index": 4, "text": " and bread"}, nil)
		require.Eventually(t, func() bool { return st.yaps(ref, owner)[id]["content"] == "milk and bread" }, 10*time.Second, 20*time.Millisecond)
	})

	t.Run("revocation closes the socket", func(t *testing.T) {
		t.Parallel()
		n := n.with(t)
		ref, owner := st.newList()
		viewer, viewerPerm := st.issue(ref, owner, "viewer")
		n.connect(st, "x-v", ref, viewer)
		n.connect(st, "x-o", ref, owner)
		st.do("DELETE", "/lists/"+ref+"/permissions/"+viewerPerm, owner, nil, 204)
		e := n.waitEvent(func(e nodeEvent) bool { return e.Ev == "closed" && e.ID == "x-v" })
		require.Equal(t, CloseRevoked, e.Code)
		require.Equal(t, "permission revoked", e.Reason)
		// 44xx is final for y-websocket: it stays disconnected.
		time.Sleep(500 * time.Millisecond)
		require.False(t, n.state("x-v").Connected)
		require.True(t, n.state("x-o").Connected)
		// Rotating the owner code closes the owner's socket as well.
		st.do("POST", "/lists/"+ref+"/permissions/rotate-owner", owner, nil, 200)
		e = n.waitEvent(func(e nodeEvent) bool { return e.Ev == "closed" && e.ID == "x-o" })
		require.Equal(t, CloseRevoked, e.Code)
	})
}
