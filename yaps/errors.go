package yaps

import (
	"errors"
	"fmt"
	"time"
)

// Error kinds. They are the only vocabulary the core uses for failures; the
// HTTP and sync edges map each kind to a status in one table.
const (
	EINVALID      = "invalid"             // bad input: 400 bad_request
	EUNAUTHORIZED = "unauthorized"        // missing, malformed, revoked or foreign code: 401
	EFORBIDDEN    = "forbidden"           // role or scope insufficient, archived list: 403
	ENOTFOUND     = "not_found"           // unknown list, yap, permission: 404
	ECONFLICT     = "conflict"            // state conflict the client can resolve: 409
	EPRECONDITION = "precondition_failed" // If-Match no longer matches: 412
	ETOOLARGE     = "too_large"           // body or document over a size limit: 413
	ETIMEOUT      = "timeout"             // the client took too long to send its request: 408
	ERATELIMITED  = "rate_limited"        // 429, with RetryAfter
	EUNAVAILABLE  = "unavailable"         // capacity refusal (rooms, connections): 503
	EINTERNAL     = "internal"            // server fault: 500, no internals leaked
)

// Error is a failure the caller can act on. Message is safe to show to
// clients; internal errors never carry the underlying cause in Message.
type Error struct {
	Code       string
	Message    string
	RetryAfter time.Duration // for ERATELIMITED
	Err        error         // wrapped cause, never shown to clients
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("yaps: %s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("yaps: %s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of the given kind with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the kind of err: the Code of the first *Error in its
// chain, or EINTERNAL for any other non-nil error.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err. Errors that are not
// *Error are internal and produce a generic message.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Code != EINTERNAL {
		return e.Message
	}
	return "internal server error"
}

// IsCode reports whether err is of the given kind.
func IsCode(err error, code string) bool { return ErrorCode(err) == code }
