package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// The binary's access log (paths outside the API, the sync endpoint)
// hides codes and keys under every name the API's own log does, and under
// any name when they look like one; it hid only "k" (OpenAPI and accounts
// review).
func TestAccessLogRedactsSecrets(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := accessLog(logger, "/api/v1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	const code = "yap_CMzo2eRYlpEgNXTtk7xz4ezdUQ_mEnXXLh_D-LlYjeE"
	const key = "yak_QzM7j2D7s2RULyNPM0vuor-s7bmYAQo-mxVy1cc7XsY"
	for _, target := range []string{
		"/api/v1/lists/abc/sync?K=" + code,
		"/api/v1/lists/abc/sync?code=" + code,
		"/?token=" + code,
		"/favicon.ico?key=" + key,
		"/elsewhere?anything=" + key,
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, target, nil))
	}
	out := buf.String()
	require.Equal(t, 5, bytes.Count(buf.Bytes(), []byte("msg=http")), out)
	require.NotContains(t, out, code[4:])
	require.NotContains(t, out, key[4:])
}
