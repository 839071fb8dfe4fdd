package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

func TestEmbeddedInHostApp(t *testing.T) {
	t.Parallel()
	dsn := "file:" + filepath.Join(t.TempDir(), "host.db") + "?_pragma=busy_timeout(5000)&_txlock=immediate"
	a, err := newApp(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(a.Close)
	srv := httptest.NewServer(a.mux)
	t.Cleanup(srv.Close)

	call := func(method, path, code, user, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if code != "" {
			req.Header.Set("Authorization", "Bearer "+code)
		}
		if user != "" {
			req.Header.Set("X-User", user)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		out := map[string]any{}
		_ = json.Unmarshal(raw, &out)
		return res.StatusCode, out
	}

	// The host's own route is untouched.
	res, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Contains(t, string(page), "host app")

	status, created := call("POST", prefix+"/lists", "", "", `{"title":"Shared"}`)
	require.Equal(t, http.StatusCreated, status)
	ref, owner := created["ref"].(string), created["ownerCode"].(string)

	// The host's user rolls the anonymous list into their account.
	status, merged := call("POST", prefix+"/lists/"+ref+"/rollup", owner, "ada", "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, true, merged["merged"])
	status, _ = call("POST", prefix+"/lists/"+ref+"/rollup", owner, "bob", "")
	require.Equal(t, http.StatusForbidden, status, "a list already in another account")

	status, lists := call("GET", prefix+"/lists", "", "ada", "")
	require.Equal(t, http.StatusOK, status)
	require.Len(t, lists["lists"], 1)

	// Rate limits are on (R8's defaults): the API's answers and the sync
	// upgrade carry them, counted for the same client.
	res, err = http.Post(srv.URL+prefix+"/lists", "application/json", nil)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
	require.Equal(t, "20", res.Header.Get("X-RateLimit-Limit"), "anonymous list creation is 20 per hour")
	conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+prefix+"/lists/"+ref+"/sync?k="+owner, nil)
	require.NoError(t, err)
	conn.Close()
	require.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
	require.NotEmpty(t, res.Header.Get("X-RateLimit-Limit"), "sync connections count against the read limit")

	// Yaps' tables live in the host's database.
	var n int
	require.NoError(t, a.db.NewSelect().TableExpr("lists").ColumnExpr("count(*)").Scan(context.Background(), &n))
	require.Equal(t, 2, n)
}
