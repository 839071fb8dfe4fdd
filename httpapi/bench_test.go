package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yaps-dev/yaps/httpapi"
	"github.com/yaps-dev/yaps/store/bunstore"
	"github.com/yaps-dev/yaps/store/storetest"
	"github.com/yaps-dev/yaps/yaps"
)

// nullWriter is a reusable http.ResponseWriter that discards the body.
type nullWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *nullWriter) Header() http.Header { return w.h }
func (w *nullWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}
func (w *nullWriter) WriteHeader(s int) { w.status = s }

// BenchmarkHotPaths measures the server side of the HTTP bench's scenarios
// in process (no sockets): GET /lists/{ref}/yaps?limit=50 on a 1,000-yap
// list, GET /lists/{ref}, and POST /lists/{ref}/yaps on a list of its own,
// through the whole handler stack (mux, Huma, middleware, authentication,
// document edit, store, rendering).
func BenchmarkHotPaths(b *testing.B) {
	for _, be := range []struct {
		name string
		dsn  func(b *testing.B) string
	}{
		{"sqlite", func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "yaps.db") }},
		{"postgres", func(b *testing.B) string { return storetest.PostgresDSN(b) }},
	} {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			st, err := bunstore.Open(ctx, be.dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			svc, err := yaps.NewService(yaps.Config{Store: st, Limiter: yaps.Unlimited{}, PurgeInterval: -1,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer svc.Close()
			mux := http.NewServeMux()
			httpapi.Mount(mux, svc, httpapi.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))})
			do := func(method, path, code, body string) *httptest.ResponseRecorder {
				var r *http.Request
				if body != "" {
					r = httptest.NewRequest(method, httpapi.DefaultPrefix+path, strings.NewReader(body))
					r.Header.Set("Content-Type", "application/json")
				} else {
					r = httptest.NewRequest(method, httpapi.DefaultPrefix+path, nil)
				}
				if code != "" {
					r.Header.Set("Authorization", "Bearer "+code)
				}
				w := httptest.NewRecorder()
				mux.ServeHTTP(w, r)
				if w.Code >= 300 {
					b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
				}
				return w
			}
			var created struct{ Ref, OwnerCode string }
			if err := json.Unmarshal(do("POST", "/lists", "", `{"title":"bench"}`).Body.Bytes(), &created); err != nil {
				b.Fatal(err)
			}
			for i := range 1000 {
				do("POST", "/lists/"+created.Ref+"/yaps", created.OwnerCode,
					fmt.Sprintf(`{"kind":"task","content":"bench yap %d","status":"open"}`, i))
			}
			for _, sc := range []struct{ name, path string }{
				{"list-yaps", "/lists/" + created.Ref + "/yaps?limit=50"},
				{"get-list", "/lists/" + created.Ref},
			} {
				b.Run(sc.name, func(b *testing.B) {
					b.ReportAllocs()
					r := httptest.NewRequest("GET", httpapi.DefaultPrefix+sc.path, nil)
					r.Header.Set("Authorization", "Bearer "+created.OwnerCode)
					r.RemoteAddr = "127.0.0.1:5555"
					w := &nullWriter{h: http.Header{}}
					for b.Loop() {
						clear(w.h)
						w.status, w.n = 0, 0
						mux.ServeHTTP(w, r.Clone(r.Context()))
						if w.status != 200 && w.status != 0 {
							b.Fatalf("status %d", w.status)
						}
					}
					b.SetBytes(int64(w.n))
				})
			}
			b.Run("create-yap", func(b *testing.B) {
				b.ReportAllocs()
				var own struct{ Ref, OwnerCode string }
				if err := json.Unmarshal(do("POST", "/lists", "", `{"title":"writes"}`).Body.Bytes(), &own); err != nil {
					b.Fatal(err)
				}
				body := []byte(`{"kind":"task","content":"bench yap","status":"open"}`)
				w := &nullWriter{h: http.Header{}}
				for b.Loop() {
					r := httptest.NewRequest("POST", httpapi.DefaultPrefix+"/lists/"+own.Ref+"/yaps", bytes.NewReader(body))
					r.Header.Set("Content-Type", "application/json")
					r.Header.Set("Authorization", "Bearer "+own.OwnerCode)
					r.RemoteAddr = "127.0.0.1:5555"
					clear(w.h)
					w.status, w.n = 0, 0
					mux.ServeHTTP(w, r)
					if w.status != 201 {
						b.Fatalf("status %d", w.status)
					}
				}
			})
		})
	}
}
