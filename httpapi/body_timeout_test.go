package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/yaps-dev/yaps/httpapi"
)

// A client that stops sending in the middle of its body is answered 408
// request_timeout once Config.BodyReadTimeout has passed; before, the
// request held its handler and connection for ever (ops review). A body
// that arrives slowly but in time is read, and the deadline does not
// outlive the body: the next request on the connection is served.
func TestBodyReadTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, backends()[0], envOptions{cfg: httpapi.Config{BodyReadTimeout: 300 * time.Millisecond}})
	u, err := url.Parse(e.srv.URL)
	require.NoError(t, err)

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", u.Host)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		return c, bufio.NewReader(c)
	}
	const head = "POST /api/v1/lists HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n"

	c, r := dial()
	_, err = io.WriteString(c, head+`{"ti`)
	require.NoError(t, err)
	start := time.Now()
	res, err := http.ReadResponse(r, nil)
	require.NoError(t, err, "no answer to a stalled body")
	require.Less(t, time.Since(start), 5*time.Second)
	var p struct {
		Error struct{ Code string } `json:"error"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&p))
	res.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, res.StatusCode)
	require.Equal(t, "request_timeout", p.Error.Code)
	require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))

	c, r = dial()
	_, err = io.WriteString(c, head+`{"ti`)
	require.NoError(t, err)
	time.Sleep(150 * time.Millisecond)
	_, err = io.WriteString(c, `tle":"a"}  `)
	require.NoError(t, err)
	res, err = http.ReadResponse(r, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)

	time.Sleep(500 * time.Millisecond) // past the first request's deadline, had it stayed
	_, err = io.WriteString(c, head+`{"title":"b"}  `)
	require.NoError(t, err)
	res, err = http.ReadResponse(r, nil)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
}
