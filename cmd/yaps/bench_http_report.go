package main

// The load loop and the pure parts of `yaps bench http`: percentiles, /proc
// stat parsing, results, comparison and output formatting.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// loadStats is the raw outcome of one load phase.
type loadStats struct {
	latencies []time.Duration // of successful (2xx) requests
	errors    int             // transport errors and non-2xx answers
	elapsed   time.Duration   // wall time from start until the last worker stopped
	firstErr  string

	// Open loop only (scheduled > 0).
	start     time.Time       // time zero of the schedule
	intended  []time.Duration // intended start of latencies[i], from start (one phase only)
	scheduled int             // requests due within the phase
	late      int             // sent openLateAfter or more after their intended start
	waited    int             // of those, found all connections busy when due
	unsent    int             // due but not sent by the end of the phase (not in late)
}

// noteErr keeps msg as the phase's first error, unless it has one.
func (st *loadStats) noteErr(msg string) {
	if st.firstErr == "" {
		st.firstErr = msg
	}
}

// statusErr describes a request answered with a status other than 2xx.
func statusErr(req *http.Request, status int) string {
	return fmt.Sprintf("%s %s: status %d", req.Method, req.URL.Path, status)
}

// end returns the outcome of a load phase run under ctx: an error when ctx
// ended by other than cancellation, or when no request could even be built.
func (st loadStats) end(ctx context.Context) (loadStats, error) {
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return st, err
	}
	if st.firstErr != "" && len(st.latencies) == 0 && st.errors == 0 {
		return st, errors.New(st.firstErr) // request construction failed
	}
	return st, nil
}

// doer sends one request and reads the whole answer; each load worker has
// its own.
type doer interface {
	do(req *http.Request) (status int, err error)
}

// stdDoer is net/http's client (Transport with a connection pool).
type stdDoer struct{ c *http.Client }

func (d stdDoer) do(req *http.Request) (int, error) {
	resp, err := d.c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// rawConn is a lean HTTP/1.1 keep-alive client on one connection, in the
// manner of wrk: it writes the request and parses the answer on the
// calling goroutine (net/http's Transport hands every request through two
// connection goroutines), so the load generator, which shares the machine
// with the server, needs less CPU per request. It writes the request and
// parses the answer by hand (no header maps, no allocation per request):
// net/http's ReadResponse and Request.Write were most of its CPU.
type rawConn struct {
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	body []byte // the request body, read whole for its length; reused
}

func (rc *rawConn) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

func (rc *rawConn) do(req *http.Request) (int, error) {
	for attempt := 0; ; attempt++ {
		reused := rc.c != nil
		if !reused {
			c, err := net.DialTimeout("tcp", req.URL.Host, 5*time.Second)
			if err != nil {
				return 0, err
			}
			rc.c = c
			if rc.br == nil {
				rc.br, rc.bw = bufio.NewReaderSize(c, 32<<10), bufio.NewWriterSize(c, 8<<10)
			} else {
				rc.br.Reset(c)
				rc.bw.Reset(c)
			}
		}
		status, err := rc.roundTrip(req)
		if err == nil {
			return status, nil
		}
		rc.close()
		// A kept-alive connection the server closed while idle: retry
		// once on a fresh one, as net/http does. Only bodies that can be
		// replayed (GetBody) are retried.
		if !reused || attempt > 0 {
			return 0, err
		}
		if req.Body != nil {
			if req.GetBody == nil {
				return 0, err
			}
			body, gerr := req.GetBody()
			if gerr != nil {
				return 0, err
			}
			req.Body = body
		}
	}
}

func (rc *rawConn) roundTrip(req *http.Request) (int, error) {
	_ = rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := rc.writeRequest(req); err != nil {
		return 0, err
	}
	if err := rc.bw.Flush(); err != nil {
		return 0, err
	}
	status, keep, err := rc.readResponse(req.Method == http.MethodHead)
	if err != nil {
		return 0, err
	}
	if !keep || req.Close {
		rc.close()
	}
	return status, nil
}

// defaultUserAgent is what (*http.Request).Write sends when the request
// has no User-Agent: kept so the server sees the same requests as before.
const defaultUserAgent = "Go-http-client/1.1"

// writeRequest writes req into rc.bw as HTTP/1.1: what (*http.Request).Write
// sends, less its allocations (sorted headers, Fprintf), and always with a
// Content-Length (the bodies are small JSON documents, read here whole).
func (rc *rawConn) writeRequest(req *http.Request) error {
	rc.body = rc.body[:0]
	if req.Body != nil {
		var err error
		rc.body, err = readBody(rc.body, req.Body)
		req.Body.Close() // as Request.Write does; a retry takes GetBody's
		if err != nil {
			return err
		}
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	u := req.URL
	path, query := u.EscapedPath(), u.RawQuery
	if u.Opaque != "" {
		path, query = u.RequestURI(), "" // rare: take net/http's allocating way
	} else if path == "" {
		path = "/"
	}
	ua, hasUA := defaultUserAgent, false
	if vs, ok := req.Header["User-Agent"]; ok {
		ua, hasUA = "", true
		if len(vs) > 0 {
			ua = vs[0]
		}
	}
	// Control characters (CR, LF) would let a field end the request early:
	// an error, as net/http's Transport makes it, rather than a smuggled
	// request.
	if !validToken(method) || !validValue(path) || !validValue(query) || !validValue(host) || (hasUA && !validValue(ua)) {
		return fmt.Errorf("rawConn: invalid request line or Host in %s %s", method, u.Redacted())
	}

	bw := rc.bw
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(path)
	if query != "" || u.ForceQuery {
		bw.WriteByte('?')
		bw.WriteString(query)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	if ua != "" {
		bw.WriteString("User-Agent: ")
		bw.WriteString(ua)
		bw.WriteString("\r\n")
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // written above or below, as Request.Write does
		}
		if !validToken(k) {
			return fmt.Errorf("rawConn: invalid header name %q", k)
		}
		for _, v := range vs {
			if !validValue(v) {
				return fmt.Errorf("rawConn: invalid value of header %s", k)
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	if req.Close && !headerHasToken(req.Header["Connection"], "close") {
		bw.WriteString("Connection: close\r\n")
	}
	// As Request.Write: a length for any body, and 0 for a bodiless
	// POST, PUT or PATCH (servers may refuse those without one).
	if len(rc.body) > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(rc.body)), 10))
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
	_, err := bw.Write(rc.body)
	return err // bufio's error is sticky: the last write reports any
}

// readBody appends all of r to dst, reusing dst's capacity.
func readBody(dst []byte, r io.Reader) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, 512)
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// validToken tells whether s is a non-empty HTTP token (a method or a
// header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validValue tells whether s has no control character but tab.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func headerHasToken(vs []string, tok string) bool {
	for _, v := range vs {
		if hasToken([]byte(v), tok) {
			return true
		}
	}
	return false
}

// Limits of an answer's head: the whole head (interim 1xx answers
// included) as net/http's Transport, a line by rc.br's size.
const (
	maxResponseHead = 1 << 20
	maxInterim      = 10
)

var errMalformed = errors.New("rawConn: malformed response")

func malformed(what string, b []byte) error {
	if len(b) > 64 {
		b = b[:64]
	}
	return fmt.Errorf("%w: %s %q", errMalformed, what, b)
}

// respHead is what the load generator needs of an answer's header.
type respHead struct {
	length    int64 // Content-Length, -1 if none
	chunked   bool
	close     bool // Connection: close
	keepAlive bool // Connection: keep-alive (for HTTP/1.0)
}

// readResponse reads one answer from rc.br and discards its body: the
// status, whether the connection may carry another request, and an error
// for anything malformed or truncated (the caller then closes the
// connection). Only Content-Length, Transfer-Encoding and Connection are
// looked at, with no map built; interim 1xx answers are skipped, as
// net/http's Transport does.
func (rc *rawConn) readResponse(head bool) (status int, keep bool, err error) {
	budget := maxResponseHead
	for interim := 0; ; interim++ {
		line, err := rc.readLine(&budget)
		if err != nil {
			return 0, false, err
		}
		status, minor, ok := parseStatusLine(line)
		if !ok {
			return 0, false, malformed("status line", line)
		}
		h, err := rc.readHeader(&budget)
		if err != nil {
			return 0, false, err
		}
		if status < 200 {
			if status == http.StatusSwitchingProtocols || interim >= maxInterim {
				return 0, false, fmt.Errorf("%w: unexpected status %d", errMalformed, status)
			}
			continue
		}
		keep = !h.close && (minor >= 1 || h.keepAlive)
		switch {
		case head || status == http.StatusNoContent || status == http.StatusNotModified:
			// No body, whatever the header says.
		case h.chunked: // wins over Content-Length, as in net/http
			err = rc.discardChunked(&budget)
		case h.length >= 0:
			err = rc.discard(h.length)
		default: // the body ends with the connection
			_, err = io.Copy(io.Discard, rc.br)
			keep = false
		}
		if err != nil {
			return 0, false, err
		}
		return status, keep, nil
	}
}

// readLine returns the next line of rc.br without its CRLF (or LF, which
// net/http accepts too); it is valid until the next read.
func (rc *rawConn) readLine(budget *int) ([]byte, error) {
	line, err := rc.br.ReadSlice('\n')
	if err != nil {
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return nil, malformed("line too long", line)
		case err == io.EOF && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err // io.EOF before any byte: a closed idle connection
	}
	if *budget -= len(line); *budget < 0 {
		return nil, fmt.Errorf("%w: header over %d bytes", errMalformed, maxResponseHead)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// parseStatusLine parses "HTTP/1.x NNN[ reason]".
func parseStatusLine(line []byte) (status, minor int, ok bool) {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return 0, 0, false
	}
	minor = int(line[7] - '0')
	if minor < 0 || minor > 9 {
		return 0, 0, false
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		status = status*10 + int(c-'0')
	}
	return status, minor, status >= 100
}

// readHeader reads header lines up to the empty one.
func (rc *rawConn) readHeader(budget *int) (respHead, error) {
	h := respHead{length: -1}
	teSeen := false
	for {
		line, err := rc.readLine(budget)
		if err != nil {
			return h, noEOF(err)
		}
		if len(line) == 0 {
			return h, nil
		}
		name, value, err := splitHeader(line)
		if err != nil {
			return h, err
		}
		switch {
		case equalFold(name, "content-length"):
			n, ok := parseDecimal(value)
			if !ok || (h.length >= 0 && h.length != n) {
				return h, malformed("Content-Length", line)
			}
			h.length = n
		case equalFold(name, "transfer-encoding"):
			// net/http supports only "chunked", once.
			if teSeen || !equalFold(value, "chunked") {
				return h, malformed("Transfer-Encoding", line)
			}
			teSeen, h.chunked = true, true
		case equalFold(name, "connection"):
			h.close = h.close || hasToken(value, "close")
			h.keepAlive = h.keepAlive || hasToken(value, "keep-alive")
		}
	}
}

// splitHeader splits "Name: value". A line folded onto the previous one
// (obsolete) or a blank before the colon is an error: read leniently, they
// could frame a body otherwise than the server meant.
func splitHeader(line []byte) (name, value []byte, err error) {
	i := bytes.IndexByte(line, ':')
	if i <= 0 {
		return nil, nil, malformed("header line", line)
	}
	name = line[:i]
	if bytes.ContainsAny(name, " \t") {
		return nil, nil, malformed("header name", line)
	}
	return name, bytes.Trim(line[i+1:], " \t"), nil
}

// discardChunked discards a chunked body: size lines in hex with optional
// extensions after ';', each chunk's CRLF, and trailers up to the empty
// line.
func (rc *rawConn) discardChunked(budget *int) error {
	for {
		line, err := rc.readLine(budget)
		if err != nil {
			return noEOF(err)
		}
		sz := line
		if i := bytes.IndexByte(sz, ';'); i >= 0 {
			sz = sz[:i]
		}
		n, ok := parseHex(bytes.Trim(sz, " \t"))
		if !ok {
			return malformed("chunk size", line)
		}
		if n == 0 {
			break
		}
		if err := rc.discard(n); err != nil {
			return err
		}
		crlf, err := rc.br.Peek(2)
		if err != nil {
			return noEOF(err)
		}
		if crlf[0] != '\r' || crlf[1] != '\n' {
			return malformed("chunk end", crlf)
		}
		rc.br.Discard(2)
	}
	for { // trailers
		line, err := rc.readLine(budget)
		if err != nil {
			return noEOF(err)
		}
		if len(line) == 0 {
			return nil
		}
		if _, _, err := splitHeader(line); err != nil {
			return err
		}
	}
}

// discard skips n bytes of body.
func (rc *rawConn) discard(n int64) error {
	if n > math.MaxInt {
		return fmt.Errorf("%w: body of %d bytes", errMalformed, n)
	}
	_, err := rc.br.Discard(int(n))
	return noEOF(err)
}

// noEOF turns an EOF within a body into the truncation it is.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseDecimal parses a Content-Length: digits only, within int64.
func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' || n > (math.MaxInt64-int64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// parseHex parses a chunk size: hex digits only, within int64.
func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		if n > math.MaxInt64>>4 {
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}

// equalFold tells whether b is lower, ignoring ASCII case; lower is in
// lower case.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// hasToken tells whether the comma-separated list v holds tok (in lower
// case), ignoring ASCII case.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		item := v
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		if equalFold(bytes.Trim(item, " \t"), tok) {
			return true
		}
	}
	return false
}

// load runs scenario s with one closed-loop worker per doer for dur: each
// worker sends a request, reads the whole answer, records the latency and
// sends the next one. Only 2xx answers count as requests; the rest are
// errors.
func load(ctx context.Context, doers []doer, a api, s string, dur time.Duration) (loadStats, error) {
	conc := len(doers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		st       loadStats
		perWork  = make([][]time.Duration, conc)
		errCount = make([]int, conc)
	)
	start := time.Now()
	deadline := start.Add(dur)
	for w := range conc {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			for i := 0; ; i++ {
				if ctx.Err() != nil || !time.Now().Before(deadline) {
					break
				}
				req, err := a.request(s, w, i)
				if err != nil {
					mu.Lock()
					st.noteErr(err.Error())
					mu.Unlock()
					cancel()
					break
				}
				req = req.WithContext(ctx)
				t0 := time.Now()
				status, err := doers[w].do(req)
				d := time.Since(t0)
				switch {
				case err != nil:
					if ctx.Err() != nil {
						break
					}
					errCount[w]++
					mu.Lock()
					st.noteErr(err.Error())
					mu.Unlock()
					time.Sleep(10 * time.Millisecond) // don't spin on a dead server
				case status/100 != 2:
					errCount[w]++
					mu.Lock()
					st.noteErr(statusErr(req, status))
					mu.Unlock()
				default:
					lat = append(lat, d)
				}
			}
			perWork[w] = lat
		})
	}
	wg.Wait()
	st.elapsed = time.Since(start)
	for w := range conc {
		st.latencies = append(st.latencies, perWork[w]...)
		st.errors += errCount[w]
	}
	return st.end(ctx)
}

// openLateAfter is how long after its intended start a request may be sent
// and still count as on time. Below it, the load generator's own timer and
// scheduling jitter (one sleep per request, on a machine it shares with
// the server) would mark requests late that the server did not delay; the
// latency counts the delay either way.
const openLateAfter = 2 * time.Millisecond

// openSchedule returns how many requests are due within dur at rate per
// second, and the intended start (from time zero) of request k: k/rate,
// evenly spaced.
func openSchedule(rate float64, dur time.Duration) (n int, at func(k int) time.Duration) {
	at = func(k int) time.Duration { return time.Duration(float64(k) * float64(time.Second) / rate) }
	n = int(math.Ceil(dur.Seconds() * rate))
	for n > 0 && at(n-1) >= dur {
		n--
	}
	for at(n) < dur {
		n++
	}
	return n, at
}

// loadOpen runs scenario s as an open loop for dur: request k is due at
// k/rate after the start whatever happened to the earlier ones, and is
// sent on one of the doers (at most len(doers) in flight, each doer one
// connection, the most recently freed reused first). A request due while
// every doer is busy waits for one; one not sent by the end of dur is
// not sent at all (unsent). Latency runs from the intended start, so a
// server stall shows in every request scheduled during it, and a request
// sent late carries its delay. Request k goes as request k/lists of
// worker k%lists, so create-yap writes to the same lists as in the closed
// loop. The phase ends when the requests in flight at dur have answered.
func loadOpen(ctx context.Context, doers []doer, a api, s string, dur time.Duration, rate float64, lists int) (loadStats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n, at := openSchedule(rate, dur)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards st and free
		st   = loadStats{scheduled: n, latencies: make([]time.Duration, 0, n), intended: make([]time.Duration, 0, n)}
		free = slices.Clone(doers)
		slot = make(chan struct{}, len(doers)) // one token per request in flight
	)
	start := time.Now()
	deadline := start.Add(dur)
	st.start = start
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sent := 0
	for k := 0; k < n && ctx.Err() == nil; k++ {
		due := at(k)
		if wait := time.Until(start.Add(due)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		got, waited := false, false
		select {
		case slot <- struct{}{}:
			got = true
		default:
			// Every connection is busy: wait for one, but not past the
			// end of the phase.
			waited = true
			timer.Reset(max(time.Until(deadline), 0))
			select {
			case slot <- struct{}{}:
				got = true
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		if got && (ctx.Err() != nil || !time.Now().Before(deadline)) {
			<-slot
			got = false
		}
		if !got {
			break // interrupted or past the end: this request and the rest stay unsent
		}
		w, i := k%lists, k/lists
		mu.Lock()
		d := free[len(free)-1]
		free = free[:len(free)-1]
		mu.Unlock()
		sent++
		wg.Go(func() {
			defer func() { <-slot }()
			intended := start.Add(due)
			req, err := a.request(s, w, i)
			if err != nil {
				mu.Lock()
				st.noteErr(err.Error())
				free = append(free, d)
				mu.Unlock()
				cancel()
				return
			}
			req = req.WithContext(ctx)
			late := time.Since(intended) >= openLateAfter
			status, err := d.do(req)
			lat := time.Since(intended)
			mu.Lock()
			defer mu.Unlock()
			free = append(free, d)
			if late {
				st.late++
				if waited {
					st.waited++
				}
			}
			switch {
			case err != nil:
				if ctx.Err() == nil {
					st.errors++
					st.noteErr(err.Error())
				}
			case status/100 != 2:
				st.errors++
				st.noteErr(statusErr(req, status))
			default:
				st.latencies = append(st.latencies, lat)
				st.intended = append(st.intended, due)
			}
		})
	}
	wg.Wait()
	st.elapsed = time.Since(start)
	st.unsent = n - sent
	return st.end(ctx)
}

// httpResult is one target × scenario row; it is also the JSON line.
type httpResult struct {
	Type     string `json:"type"` // "result"
	Target   string `json:"target"`
	Scenario string `json:"scenario"`
	// Mode is "closed" (Concurrency workers, each sending its next request
	// when the last answer is complete, latency from the actual send) or
	// "open" (--rate; Concurrency is --max-inflight; see Open).
	Mode        string  `json:"mode"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	RPS         float64 `json:"rps"`
	P50Ms       float64 `json:"p50Ms"`
	P99Ms       float64 `json:"p99Ms"`
	MeanMs      float64 `json:"meanMs"`
	MaxMs       float64 `json:"maxMs"`
	// CPUUsPerReq is the server's CPU time (user+system of the server
	// process, plus its Postgres backends for yaps-postgres) during the
	// scenario divided by its successful requests; -1 when not measured.
	CPUUsPerReq float64 `json:"cpuUsPerReq"`
	// ServerCPU is that CPU time in seconds; -1 when not measured. It runs
	// from the start of the scenario until the server is idle again after
	// it, so background work the requests caused is included.
	ServerCPU float64 `json:"serverCpuSeconds"`
	// TailCPU is the part of the server process's CPU spent after the
	// last answer; -1 when not measured.
	TailCPU float64 `json:"tailCpuSeconds"`
	// DBCPU is the part of ServerCPU spent in Postgres backends (yaps-postgres
	// only; SQLite runs inside the server process); -1 when not applicable.
	DBCPU      float64 `json:"dbCpuSeconds"`
	DBUsPerReq float64 `json:"dbCpuUsPerReq"`
	// ClientUsPerReq is the load generator's own CPU per request (it shares
	// the machine with the server).
	ClientUsPerReq float64 `json:"clientCpuUsPerReq"`
	// PGBgCPU is the CPU of Postgres's shared background processes
	// (checkpointer, WAL writer, background writer, autovacuum) from the
	// start of each slice until Postgres was idle after it, in seconds;
	// not part of ServerCPU or CPUUsPerReq. They serve every database on
	// the server, so other users' work is in it too. -1 when not measured
	// (no Postgres target).
	PGBgCPU      float64 `json:"pgBackgroundCpuSeconds"`
	PGBgUsPerReq float64 `json:"pgBackgroundCpuUsPerReq"`
	// Open is set in open-loop mode.
	Open *openResult `json:"open,omitempty"`
}

// openResult is how well an open-loop run kept its schedule. Latencies
// (P50Ms...) run from each request's intended start; RPS is the achieved
// rate.
type openResult struct {
	OfferedRPS  float64 `json:"offeredRps"`
	MaxInflight int     `json:"maxInflight"`
	Scheduled   int     `json:"scheduled"` // requests due within the measured time
	// Late were sent openLateAfter (2 ms) or more after their intended
	// start; WaitedForConn of them because all MaxInflight connections
	// were busy when they were due.
	Late          int `json:"late"`
	WaitedForConn int `json:"waitedForConnection"`
	// Unsent were due but not sent by the end of the measured time (their
	// latency is unknown and not in the percentiles).
	Unsent int `json:"unsent"`
}

// percentile returns the q-quantile (0 < q <= 1) of sorted by the
// nearest-rank method: the smallest sample with at least q of all samples
// at or below it. It returns 0 for no samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(n)))
	rank = max(1, min(n, rank))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summarize turns a load phase into a result row. cpu < 0 means the server
// CPU was not measured.
func summarize(target, scenario string, conc int, st loadStats, cpu time.Duration) httpResult {
	lat := slices.Clone(st.latencies)
	slices.Sort(lat)
	r := httpResult{
		Type: "result", Target: target, Scenario: scenario, Mode: "closed", Concurrency: conc,
		Seconds: st.elapsed.Seconds(), Requests: len(lat), Errors: st.errors,
		P50Ms: ms(percentile(lat, 0.50)), P99Ms: ms(percentile(lat, 0.99)),
		CPUUsPerReq: -1, ServerCPU: -1,
	}
	if st.scheduled > 0 {
		r.Mode = "open"
		r.Open = &openResult{Scheduled: st.scheduled, Late: st.late, WaitedForConn: st.waited, Unsent: st.unsent}
	}
	if st.elapsed > 0 {
		r.RPS = float64(len(lat)) / st.elapsed.Seconds()
	}
	if len(lat) > 0 {
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		r.MeanMs = ms(sum / time.Duration(len(lat)))
		r.MaxMs = ms(lat[len(lat)-1])
	}
	if cpu >= 0 {
		r.ServerCPU = cpu.Seconds()
		if len(lat) > 0 {
			r.CPUUsPerReq = float64(cpu) / float64(time.Microsecond) / float64(len(lat))
		}
	}
	return r
}

// parseProcStat returns utime+stime (in clock ticks) from the contents of
// /proc/PID/stat. The command name (field 2) is in parentheses and may
// itself contain spaces and parentheses, so fields are counted from the
// last ')'.
func parseProcStat(b []byte) (int64, error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name, want >= 13", len(f))
	}
	ut, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat: utime: %w", err)
	}
	stt, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat: stime: %w", err)
	}
	return ut + stt, nil
}

// ticksToDuration converts clock ticks (USER_HZ) to a duration.
func ticksToDuration(t int64) time.Duration {
	return time.Duration(t) * (time.Second / clockTicks)
}

// procCPU returns the CPU time (user+system, all threads) that process pid
// has used so far.
func procCPU(pid int) (time.Duration, error) {
	d, _, err := procCPURes(pid)
	return d, err
}

// procCPURes is procCPU with the resolution of its reading: to the
// nanosecond from the process's CPU-time clock (processCPUClock), else in
// clock ticks from /proc/PID/stat.
func procCPURes(pid int) (cpu, resolution time.Duration, err error) {
	if pid <= 0 {
		return 0, 0, errors.New("no pid")
	}
	if d, err := processCPUClock(pid); err == nil {
		return d, time.Nanosecond, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	t, err := parseProcStat(b)
	if err != nil {
		return 0, 0, err
	}
	return ticksToDuration(t), ticksToDuration(1), nil
}

func numCPU() int { return min(runtime.NumCPU(), runtime.GOMAXPROCS(0)) }

// comparison is one yaps target against PocketBase on one scenario; also a
// JSON line.
type comparison struct {
	Type       string  `json:"type"` // "compare"
	Scenario   string  `json:"scenario"`
	Target     string  `json:"target"`
	Peer       string  `json:"peer"`
	Throughput float64 `json:"throughputRatio"` // target rps / peer rps
	P99Ms      float64 `json:"p99Ms"`
	PeerP99Ms  float64 `json:"peerP99Ms"`
	// Met: at least 2× the peer's throughput at a lower p99 (issue 3).
	// Always false in open-loop mode, where both are offered the same
	// rate and the throughput ratio says whether they kept it.
	Met  bool   `json:"met"`
	Mode string `json:"mode"`
}

// compareResults compares every yaps row with the PocketBase row of the
// same scenario.
func compareResults(rs []httpResult) []comparison {
	peer := map[string]httpResult{}
	for _, r := range rs {
		if r.Target == targetPocketBase {
			peer[r.Scenario] = r
		}
	}
	var out []comparison
	for _, r := range rs {
		p, ok := peer[r.Scenario]
		if r.Target == targetPocketBase || !ok || p.RPS == 0 {
			continue
		}
		c := comparison{
			Type: "compare", Scenario: r.Scenario, Target: r.Target, Peer: targetPocketBase,
			Throughput: r.RPS / p.RPS, P99Ms: r.P99Ms, PeerP99Ms: p.P99Ms, Mode: r.Mode,
		}
		c.Met = c.Throughput >= 2 && r.P99Ms < p.P99Ms && r.Errors == 0 && r.Open == nil
		out = append(out, c)
	}
	return out
}

// fmtMs formats milliseconds with 2 decimals below 10 ms, 1 above.
func fmtMs(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
}

func fmtCPU(us float64) string {
	if us < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(us, 'f', 0, 64)
}

// writeResultTable writes the result rows. Open-loop rows add the offered
// rate and the late requests (sent late or not at all); when any row has
// Postgres's background CPU, a column shows it apart from CPU µs/req.
func writeResultTable(w io.Writer, rs []httpResult) {
	open, bg := false, false
	for _, r := range rs {
		open = open || r.Open != nil
		bg = bg || r.PGBgUsPerReq >= 0
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "target\tscenario\treq/s\tp50\tp99\tCPU µs/req\tof which pg\t"
	if open {
		head = "target\tscenario\toffered\treq/s\tp50\tp99\tlate\tCPU µs/req\tof which pg\t"
	}
	if bg {
		head += "pg background µs/req\t"
	}
	fmt.Fprintln(tw, head+"errors\t")
	for _, r := range rs {
		db := "-"
		if r.DBUsPerReq >= 0 {
			db = fmtCPU(r.DBUsPerReq)
		}
		fmt.Fprintf(tw, "%s\t%s\t", r.Target, r.Scenario)
		if open {
			offered, late := "-", "-"
			if o := r.Open; o != nil {
				offered = strconv.FormatFloat(o.OfferedRPS, 'f', -1, 64)
				late = fmt.Sprintf("%d (%.1f%%)", o.Late+o.Unsent, 100*float64(o.Late+o.Unsent)/float64(max(o.Scheduled, 1)))
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t", offered, r.RPS, fmtMs(r.P50Ms), fmtMs(r.P99Ms), late)
		} else {
			fmt.Fprintf(tw, "%.0f\t%s\t%s\t", r.RPS, fmtMs(r.P50Ms), fmtMs(r.P99Ms))
		}
		fmt.Fprintf(tw, "%s\t%s\t", fmtCPU(r.CPUUsPerReq), db)
		if bg {
			pgbg := "-"
			if r.PGBgUsPerReq >= 0 {
				pgbg = fmtCPU(r.PGBgUsPerReq)
			}
			fmt.Fprintf(tw, "%s\t", pgbg)
		}
		fmt.Fprintf(tw, "%d\t\n", r.Errors)
	}
	tw.Flush()
}

// tableNotes explains what the table's columns hold in this run, where
// that is not obvious from the header.
func tableNotes(cfg benchHTTPConfig, rs []httpResult) []string {
	var notes []string
	for _, r := range rs {
		if r.Open != nil {
			notes = append(notes, fmt.Sprintf("open loop: p50/p99 from each request's intended start; req/s is the achieved rate; late = sent ≥ %s after the intended start or not sent at all (JSON: late, waitedForConnection, unsent)", openLateAfter))
			break
		}
	}
	for _, r := range rs {
		if r.PGBgUsPerReq >= 0 {
			notes = append(notes, "pg background: Postgres's checkpointer, WAL writer, background writer and autovacuum during the slices (and until idle after them), shared by every database on that server; not in CPU µs/req")
			break
		}
	}
	if cfg.url != "" && cfg.pid > 0 && cfg.pgDB == "" && len(cfg.targets) == 1 && cfg.targets[0] != targetPocketBase {
		notes = append(notes, "CPU µs/req is the --pid process's only: if this server uses Postgres, its backends' CPU is NOT included (--postgres-db NAME counts that database's backends)")
	}
	return notes
}

func writeCompareTable(w io.Writer, cs []comparison) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "vs pocketbase\tscenario\tthroughput\tp99\tpeer p99\t≥2× and lower p99\t")
	for _, c := range cs {
		verdict := "no"
		if c.Met {
			verdict = "yes"
		}
		if c.Mode == "open" {
			verdict = "n/a (open loop)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f×\t%s\t%s\t%s\t\n",
			c.Target, c.Scenario, c.Throughput, fmtMs(c.P99Ms), fmtMs(c.PeerP99Ms), verdict)
	}
	tw.Flush()
}

func writeJSONLine(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
}
