package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/internal/testlog"
	"github.com/yaps-dev/yaps/store/memstore"
	"github.com/yaps-dev/yaps/yaps"
)

// TestMountTakesServicePrefix: the service's prefix, which its links use, is
// Mount's default; a mismatch in prefix or public URL is logged.
func TestMountTakesServicePrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		cfg       httpapi.Config
		mountedAt string
		warns     []string
	}{
		{name: "default from the service", mountedAt: "/v2"},
		{name: "same prefix", cfg: httpapi.Config{Prefix: "/v2", PublicURL: "https://lists.example"}, mountedAt: "/v2"},
		{name: "other prefix", cfg: httpapi.Config{Prefix: "/internal"}, mountedAt: "/internal", warns: []string{"prefix=/internal servicePrefix=/v2"}},
		{name: "other public URL", cfg: httpapi.Config{PublicURL: "https://elsewhere.example"}, mountedAt: "/v2", warns: []string{"servicePublicURL=https://lists.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, err := yaps.NewService(yaps.Config{Store: memstore.New(), Prefix: "/v2", PublicURL: "https://lists.example", PurgeInterval: -1})
			require.NoError(t, err)
			t.Cleanup(func() { _ = svc.Close() })
			var logs testlog.Buffer
			cfg := tc.cfg
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			mux := http.NewServeMux()
			httpapi.Mount(mux, svc, cfg)
			ts := httptest.NewServer(mux)
			t.Cleanup(ts.Close)

			res, err := http.Post(ts.URL+tc.mountedAt+"/lists", "application/json", strings.NewReader(`{}`))
			require.NoError(t, err)
			defer res.Body.Close()
			require.Equal(t, http.StatusCreated, res.StatusCode)
			var created struct{ APIBase string }
			require.NoError(t, json.NewDecoder(res.Body).Decode(&created))
			require.True(t, strings.HasPrefix(created.APIBase, "https://lists.example/v2/lists/"), created.APIBase)

			out := logs.String()
			require.Equal(t, len(tc.warns) > 0, strings.Contains(out, "level=WARN"), out)
			for _, w := range tc.warns {
				require.Contains(t, out, w)
			}
		})
	}
}
