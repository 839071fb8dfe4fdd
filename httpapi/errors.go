package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/yaps-dev/yaps/yaps"
)

// problemMediaType is the media type of every error body (RULINGS R2).
const problemMediaType = "application/problem+json"

// errorKind is one row of the error table: the HTTP status and the variant-B
// code a yaps error kind maps to.
type errorKind struct {
	Status int
	Code   string
}

// errorTable is the ONE mapping from the error kinds of package yaps to HTTP
// statuses and error codes (RULINGS R3). Every error body of this package,
// including Huma's own validation errors, is produced from it.
var errorTable = map[string]errorKind{
	yaps.EINVALID:      {http.StatusBadRequest, "bad_request"},
	yaps.EUNAUTHORIZED: {http.StatusUnauthorized, "unauthorized"},
	yaps.EFORBIDDEN:    {http.StatusForbidden, "forbidden"},
	yaps.ENOTFOUND:     {http.StatusNotFound, "not_found"},
	yaps.ECONFLICT:     {http.StatusConflict, "conflict"},
	yaps.EPRECONDITION: {http.StatusPreconditionFailed, "precondition_failed"},
	yaps.ETOOLARGE:     {http.StatusRequestEntityTooLarge, "payload_too_large"},
	yaps.ETIMEOUT:      {http.StatusRequestTimeout, "request_timeout"},
	yaps.ERATELIMITED:  {http.StatusTooManyRequests, "rate_limited"},
	yaps.EUNAVAILABLE:  {http.StatusServiceUnavailable, "unavailable"},
	yaps.EINTERNAL:     {http.StatusInternalServerError, "internal_error"},
}

// kindForStatus maps a bare HTTP status (from Huma or the router) back to a
// row of the table.
func kindForStatus(status int) errorKind {
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest // schema validation is 400, never 422 (R3)
	}
	for _, k := range errorTable {
		if k.Status == status {
			return k
		}
	}
	switch {
	case status == http.StatusMethodNotAllowed:
		return errorKind{status, "method_not_allowed"}
	case status == http.StatusNotAcceptable:
		return errorKind{status, "not_acceptable"}
	case status == http.StatusUnsupportedMediaType:
		return errorKind{status, "unsupported_media_type"}
	case status >= 400 && status < 500:
		return errorKind{status, "bad_request"}
	}
	return errorKind{http.StatusInternalServerError, "internal_error"}
}

// Problem is the error body: the RFC 9457 Problem Details members and, in
// the same object, the variant-B member "error" (RULINGS R2).
type Problem struct {
	Type     string       `json:"type" doc:"Problem type URI; always about:blank, the status says it all" example:"about:blank"`
	Title    string       `json:"title" doc:"HTTP status text" example:"Not Found"`
	Status   int          `json:"status" doc:"HTTP status code" example:"404"`
	Detail   string       `json:"detail" doc:"What went wrong, safe to show" example:"list not found"`
	Instance string       `json:"instance" format:"uri-reference" doc:"The request path, percent-encoded (a URI reference; never the query)" example:"/api/v1/lists/abc"`
	Error    ProblemError `json:"error" doc:"The same error in the {error: {code, message}} form"`
}

// ProblemError is the variant-B error member.
type ProblemError struct {
	Code       string `json:"code" enum:"bad_request,unauthorized,forbidden,not_found,conflict,precondition_failed,payload_too_large,rate_limited,unavailable,internal_error,method_not_allowed" doc:"Machine-readable error code"`
	Message    string `json:"message" doc:"Same text as detail"`
	RetryAfter *int64 `json:"retryAfter,omitempty" doc:"Seconds to wait before retrying (rate limiting only)"`
}

// problem builds the Problem for a status row and message.
func problem(k errorKind, msg, instance string, retryAfter time.Duration) *Problem {
	p := &Problem{
		Type:     "about:blank",
		Title:    http.StatusText(k.Status),
		Status:   k.Status,
		Detail:   msg,
		Instance: instance,
		Error:    ProblemError{Code: k.Code, Message: msg},
	}
	if k.Status == http.StatusTooManyRequests {
		s := retrySeconds(retryAfter)
		p.Error.RetryAfter = &s
	}
	return p
}

// problemFor maps an error through the table. Internal errors carry a
// generic message only.
func problemFor(err error, instance string) (*Problem, errorKind) {
	code := yaps.ErrorCode(err)
	k, ok := errorTable[code]
	if !ok {
		k = errorTable[yaps.EINTERNAL]
	}
	msg := yaps.ErrorMessage(err)
	if k.Status >= 500 {
		msg = http.StatusText(k.Status)
		if k.Status == http.StatusInternalServerError {
			msg = "internal server error"
		} else if m := yaps.ErrorMessage(err); code == yaps.EUNAVAILABLE && m != "" {
			msg = m
		}
	}
	var retry time.Duration
	var ye *yaps.Error
	if errors.As(err, &ye) {
		retry = ye.RetryAfter
	}
	return problem(k, msg, instance, retry), k
}

// retrySeconds rounds a wait up to whole seconds, at least 1.
func retrySeconds(d time.Duration) int64 {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}

func (p *Problem) marshal() []byte {
	b, err := json.Marshal(p)
	if err != nil { // cannot happen: only strings and ints
		return []byte(`{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"internal server error","instance":"","error":{"code":"internal_error","message":"internal server error"}}`)
	}
	return b
}

// errorOut renders err as the response of an operation. Rate-limit errors
// also get a Retry-After header.
func (st *reqState) errorOut(err error) *rawOut {
	if st.r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The client went away (or the host's deadline for the request
		// passed): no fault of the server, and nobody reads the answer.
		st.cfg.Logger.Debug("httpapi: request ended by its context",
			slog.String("method", st.r.Method), slog.String("url", RedactURL(st.r.URL)), slog.String("error", err.Error()))
		p, k := problemFor(yaps.Errorf(yaps.EUNAVAILABLE, "the request was cancelled"), st.instance())
		return &rawOut{Status: k.Status, ContentType: problemMediaType, Body: p.marshal()}
	}
	p, k := problemFor(err, st.instance())
	if k.Status >= 500 {
		st.logFault(err)
	}
	if p.Error.RetryAfter != nil {
		st.header().Set("Retry-After", strconv.FormatInt(*p.Error.RetryAfter, 10))
	}
	if k.Status == http.StatusUnauthorized {
		st.header().Set("WWW-Authenticate", `Bearer realm="yaps"`)
	}
	st.header().Del("ETag")
	return &rawOut{Status: k.Status, ContentType: problemMediaType, Body: p.marshal()}
}

// errInvalid is shorthand for a 400 bad_request error.
func errInvalid(format string, args ...any) error { return yaps.Errorf(yaps.EINVALID, format, args...) }
