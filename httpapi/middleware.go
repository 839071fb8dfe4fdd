package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/yaps-dev/yaps/yaps"
)

// reqState is what the middleware hands to the operation handlers: the raw
// request (for the body, headers and query), the response header map and the
// resolved client IP.
type reqState struct {
	cfg  *Config
	r    *http.Request
	w    http.ResponseWriter
	ip   string
	own  bool // the body being written was produced by an operation of ours
	path string
	buf  *[]byte // pooled body buffer, given back after the answer (releaseBuf)
}

type stateKey struct{}

func stateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(stateKey{}).(*reqState)
	return st
}

func (st *reqState) header() http.Header { return st.w.Header() }

// instance is the Problem instance member: the request path as a URI
// reference (escaped, INTERFACE §2.4), never the query (which may carry a
// code in k).
func (st *reqState) instance() string { return st.path }

func (st *reqState) logFault(err error) {
	st.cfg.Logger.Error("httpapi: server fault",
		slog.String("method", st.r.Method),
		slog.String("url", RedactURL(st.r.URL)),
		slog.String("error", err.Error()))
}

// instancePath is the Problem instance of a request to u: its escaped path
// (u.EscapedPath: the client's own escaping when it is valid), so that it
// is a URI reference (no raw space, quote or control character) and an
// escaped slash (%2F) stays escaped instead of naming another path. The
// query is never included.
func instancePath(u *url.URL) string { return u.EscapedPath() }

// RedactURL renders u for logs with the value of every query parameter
// that may carry a secret replaced (RULINGS R4): the names a code travels
// under (k, code, key, token, access_token, in any case), and any value
// that looks like a permission code or an account key, whatever its name.
// Hosts that log requests on their own mux use it too.
func RedactURL(u *url.URL) string {
	if u.RawQuery == "" {
		return u.Path
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return u.Path + "?[unparsable query redacted]"
	}
	for k, vs := range q {
		switch strings.ToLower(k) {
		case "k", "code", "key", "token", "access_token":
			q[k] = []string{"REDACTED"}
			continue
		}
		for i, v := range vs {
			if strings.HasPrefix(v, yaps.CodePrefix) || strings.HasPrefix(v, yaps.AccountKeyPrefix) {
				vs[i] = "REDACTED"
			}
		}
	}
	return u.Path + "?" + q.Encode()
}

// humaCtx lets respCtx embed huma.Context and still define Context().
type humaCtx = huma.Context

// respCtx wraps Huma's context for one request. It delays the status line
// until the body starts so that error bodies Huma itself produces (its
// validation and parse errors, which would be its own ErrorModel with 422)
// can be rewritten into this package's Problem format with status 400.
// Operations of this package always produce their own bodies, which pass
// through untouched.
type respCtx struct {
	humaCtx
	st          *reqState
	ctx         context.Context
	status      int
	wroteHeader bool
	buf         *bytes.Buffer
}

func (c *respCtx) Unwrap() huma.Context     { return c.humaCtx }
func (c *respCtx) Context() context.Context { return c.ctx }
func (c *respCtx) Status() int              { return c.status }
func (c *respCtx) BodyWriter() io.Writer    { return c }
func (c *respCtx) SetStatus(code int)       { c.status = code }
func (c *respCtx) intercepting() bool       { return c.status >= 400 && !c.st.own }
func (c *respCtx) SetHeader(name, v string) { c.st.w.Header().Set(name, v) }
func (c *respCtx) AppendHeader(name, v string) {
	c.st.w.Header().Add(name, v)
}

func (c *respCtx) Write(p []byte) (int, error) {
	if c.intercepting() {
		if c.buf == nil {
			c.buf = new(bytes.Buffer)
		}
		if c.buf.Len() > 1<<20 {
			return len(p), nil
		}
		return c.buf.Write(p)
	}
	c.writeHeader()
	return c.st.w.Write(p)
}

// Flush lets streaming responses of operations a host adds to the API work.
func (c *respCtx) Flush() {
	if c.intercepting() {
		return
	}
	c.writeHeader()
	if f, ok := c.st.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *respCtx) writeHeader() {
	if c.wroteHeader {
		return
	}
	c.wroteHeader = true
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.st.w.WriteHeader(c.status)
}

// finish writes whatever is still pending: the status line of a bodiless
// response, or the rewritten form of an intercepted error body.
func (c *respCtx) finish() {
	if c.wroteHeader {
		return
	}
	if c.intercepting() {
		c.writeForeignError()
		return
	}
	if c.status == 0 {
		return // nothing was answered; net/http sends 200
	}
	c.writeHeader()
}

// writeForeignError turns an error Huma produced (typically *huma.ErrorModel)
// into a Problem.
func (c *respCtx) writeForeignError() {
	k := kindForStatus(c.status)
	msg := http.StatusText(k.Status)
	if c.buf != nil {
		var em huma.ErrorModel
		if json.Unmarshal(c.buf.Bytes(), &em) == nil {
			msg = describeHumaError(&em, msg)
		}
	}
	if k.Status >= 500 {
		msg = "internal server error"
	}
	p := problem(k, msg, c.st.instance(), 0)
	h := c.st.w.Header()
	h.Set("Content-Type", problemMediaType)
	h.Del("Content-Length")
	h.Del("Link")
	c.wroteHeader = true
	c.status = k.Status
	c.st.w.WriteHeader(k.Status)
	_, _ = c.st.w.Write(p.marshal())
}

func describeHumaError(em *huma.ErrorModel, fallback string) string {
	msg := em.Detail
	if msg == "" {
		msg = fallback
	}
	var parts []string
	for _, d := range em.Errors {
		if d == nil {
			continue
		}
		s := d.Message
		if d.Location != "" {
			s += " (" + d.Location + ")"
		}
		parts = append(parts, s)
		if len(parts) == 5 {
			break
		}
	}
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, "; ")
	}
	return msg
}

// middleware is the per-API Huma middleware installed by Register: it
// resolves the client IP, hands the raw request to the handlers, rewrites
// Huma's own error bodies, recovers panics into 500 internal_error and
// logs each request without secrets.
func (s *server) middleware(ctx huma.Context, next func(huma.Context)) {
	r, w := unwrapRequest(ctx)
	if r == nil {
		next(ctx)
		return
	}
	both := &struct { // one allocation for the two
		st reqState
		rc respCtx
	}{st: reqState{cfg: &s.cfg, r: r, w: w, path: instancePath(r.URL)}}
	st, rc := &both.st, &both.rc
	st.ip = s.cfg.clientIP(r)
	*rc = respCtx{humaCtx: ctx, st: st}
	rc.ctx = context.WithValue(ctx.Context(), stateKey{}, st)
	start := time.Now()
	defer func() {
		if rec := recover(); rec != nil {
			if rec == http.ErrAbortHandler {
				panic(rec)
			}
			st.cfg.Logger.Error("httpapi: panic serving request",
				slog.String("method", r.Method),
				slog.String("url", RedactURL(r.URL)),
				slog.String("panic", fmt.Sprint(rec)),
				slog.String("stack", string(debug.Stack())))
			if rc.wroteHeader {
				panic(http.ErrAbortHandler) // headers are out: cut the connection
			}
			p := problem(errorTable[yaps.EINTERNAL], "internal server error", st.instance(), 0)
			h := w.Header()
			h.Set("Content-Type", problemMediaType)
			h.Del("Content-Length")
			h.Del("ETag")
			rc.wroteHeader = true
			rc.status = http.StatusInternalServerError
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write(p.marshal())
		}
		if st.cfg.Logger.Enabled(r.Context(), slog.LevelDebug) {
			st.cfg.Logger.Debug("httpapi: request",
				slog.String("method", r.Method),
				slog.String("url", RedactURL(r.URL)),
				slog.Int("status", rc.status),
				slog.String("ip", st.ip),
				slog.Duration("took", time.Since(start)))
		}
	}()
	next(rc)
	rc.finish()
	st.releaseBuf()
}

// unwrapRequest returns the net/http request and writer behind a Huma
// context of the humago adapter, or nil for other adapters.
func unwrapRequest(ctx huma.Context) (r *http.Request, w http.ResponseWriter) {
	defer func() {
		if recover() != nil {
			r, w = nil, nil
		}
	}()
	return humago.Unwrap(ctx)
}
