package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/yaps"
)

// A request whose client went away (its context is cancelled) is not a
// server fault: it is not logged as one, and its answer, which nobody
// reads, is 503 unavailable rather than 500.
func TestCancelledRequestIsNoFault(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	svc, err := yaps.NewService(yaps.Config{Store: openBun(t, "sqlite:"+filepath.Join(t.TempDir(), "yaps.db")), PurgeInterval: -1, Logger: lg, AuthCacheTTL: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.Close() })
	mux := http.NewServeMux()
	httpapi.Mount(mux, svc, httpapi.Config{Logger: lg})
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/lists", strings.NewReader(`{}`)))
	require.Equal(t, http.StatusCreated, rec.Code)
	var created struct{ Ref, OwnerCode string }
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &created))

	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/lists/" + created.Ref, ""},
		{http.MethodGet, "/api/v1/lists/" + created.Ref + "/yaps", ""},
		{http.MethodPost, "/api/v1/lists/" + created.Ref + "/yaps", `{"kind":"task","content":"x","status":"open"}`},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer "+created.OwnerCode)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		require.Equal(t, http.StatusServiceUnavailable, rec.Code, "%s %s: %s", tc.method, tc.path, rec.Body)
		require.Contains(t, rec.Body.String(), `"code":"unavailable"`)
	}
	require.NotContains(t, logs.String(), "level=ERROR")
}
