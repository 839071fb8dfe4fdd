package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/yaps-dev/yaps/yaps"
)

// CORS lets browser apps on the given origins call the API. Codes travel as
// bearer tokens, never cookies, so no credentials mode is offered and a
// cross-origin page can do nothing without a code. "*" allows every origin.
// With no origins, next is returned unchanged (same-origin only). Entries
// are compared in their canonical form (yaps.CanonicalOrigin), so
// "https://app.example/" matches the Origin "https://app.example"; CORS
// panics on an entry that is not an origin, as Mount does on a bad Config.
//
// Wrap the whole mux (not only the API) so preflight requests for every
// route are answered: mux.Handle would otherwise send OPTIONS to the API's
// 405 handler.
func CORS(origins []string, next http.Handler) http.Handler {
	if len(origins) == 0 {
		return next
	}
	origins, err := yaps.CanonicalOrigins(origins)
	if err != nil {
		panic("httpapi: CORS: " + err.Error())
	}
	any := slices.Contains(origins, "*")
	allowed := func(origin string) bool {
		return any || slices.ContainsFunc(origins, func(o string) bool { return strings.EqualFold(o, origin) })
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every answer depends on Origin, also one without CORS headers (no
		// Origin, or one not allowed): a shared cache must not hand it to
		// an allowed origin.
		h := w.Header()
		h.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		if origin == "" || !allowed(origin) {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE")
			h.Set("Access-Control-Allow-Headers", corsRequestHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposedHeaders)
		next.ServeHTTP(w, r)
	})
}

const (
	corsRequestHeaders = "Authorization, Content-Type, Idempotency-Key, If-Match, If-None-Match, X-Account-Key"
	corsExposedHeaders = "ETag, Location, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Idempotent-Replayed"
)
