package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
)

func TestCORS(t *testing.T) {
	t.Parallel()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	tests := []struct {
		name        string
		origins     []string
		method      string
		origin      string
		preflight   bool
		wantStatus  int
		wantAllowed string
	}{
		{name: "off by default", method: "GET", origin: "https://app.example", wantStatus: http.StatusTeapot},
		{name: "listed origin", origins: []string{"https://app.example"}, method: "GET", origin: "https://app.example", wantStatus: http.StatusTeapot, wantAllowed: "https://app.example"},
		{name: "unlisted origin", origins: []string{"https://app.example"}, method: "GET", origin: "https://evil.example", wantStatus: http.StatusTeapot},
		{name: "wildcard echoes the origin", origins: []string{"*"}, method: "POST", origin: "https://x.example", wantStatus: http.StatusTeapot, wantAllowed: "https://x.example"},
		{name: "preflight answered", origins: []string{"*"}, method: "OPTIONS", origin: "https://x.example", preflight: true, wantStatus: http.StatusNoContent, wantAllowed: "https://x.example"},
		{name: "preflight of unlisted origin passes through", origins: []string{"https://app.example"}, method: "OPTIONS", origin: "https://x.example", preflight: true, wantStatus: http.StatusTeapot},
		{name: "no origin header", origins: []string{"*"}, method: "GET", wantStatus: http.StatusTeapot},
		{name: "entry in another spelling", origins: []string{"HTTPS://App.Example:443/"}, method: "OPTIONS", origin: "https://app.example", preflight: true, wantStatus: http.StatusNoContent, wantAllowed: "https://app.example"},
		{name: "entry with a port", origins: []string{"http://localhost:5173/"}, method: "GET", origin: "http://localhost:5173", wantStatus: http.StatusTeapot, wantAllowed: "http://localhost:5173"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(tt.method, "/api/v1/lists", nil)
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			if tt.preflight {
				req.Header.Set("Access-Control-Request-Method", "PATCH")
				req.Header.Set("Access-Control-Request-Headers", "authorization, if-match")
			}
			rec := httptest.NewRecorder()
			httpapi.CORS(tt.origins, next).ServeHTTP(rec, req)
			require.Equal(t, tt.wantStatus, rec.Code)
			require.Equal(t, tt.wantAllowed, rec.Header().Get("Access-Control-Allow-Origin"))
			if len(tt.origins) > 0 {
				require.Contains(t, rec.Header().Values("Vary"), "Origin", "every answer varies by Origin once CORS is on")
			} else {
				require.Empty(t, rec.Header().Values("Vary"))
			}
			require.Empty(t, rec.Header().Get("Access-Control-Allow-Credentials"), "codes are bearer tokens; credentials mode is never offered")
			if tt.preflight && tt.wantAllowed != "" {
				require.Contains(t, rec.Header().Get("Access-Control-Allow-Methods"), "PATCH")
				require.Contains(t, rec.Header().Get("Access-Control-Allow-Headers"), "If-Match")
			}
			if !tt.preflight && tt.wantAllowed != "" {
				require.Contains(t, rec.Header().Get("Access-Control-Expose-Headers"), "Retry-After")
			}
		})
	}
}

// TestCORSRefusesNonOrigins: an entry that can never match an Origin header
// is a configuration error, not a silent no-op.
func TestCORSRefusesNonOrigins(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"app.example", "https://app.example/api", "ftp://app.example", ""} {
		require.Panics(t, func() { httpapi.CORS([]string{bad}, http.NotFoundHandler()) }, bad)
	}
}

func TestClientIPFunc(t *testing.T) {
	t.Parallel()
	ip, err := httpapi.ClientIPFunc(httpapi.Config{TrustedProxies: []string{"10.0.0.0/8"}})
	require.NoError(t, err)
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.1.2.3:5555"
	req.Header.Set("X-Forwarded-For", "203.0.113.9, 10.0.0.7")
	require.Equal(t, "203.0.113.9", ip(req), "the first untrusted hop from the right")
	req.RemoteAddr = "198.51.100.1:5555"
	require.Equal(t, "198.51.100.1", ip(req), "an untrusted peer's header is ignored")

	_, err = httpapi.ClientIPFunc(httpapi.Config{TrustedProxies: []string{"nope"}})
	require.Error(t, err)
}
