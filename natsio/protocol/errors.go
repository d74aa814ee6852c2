package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Error codes of the protocol, sent in the Nats-Service-Error-Code header.
const (
	CodeBadRequest  = 400 // the request is malformed; retrying it cannot help
	CodeNotFound    = 404 // no such sequence (declared nowhere); retrying it cannot help
	CodeUnavailable = 503 // no ID can be given right now; retry (another instance may answer)
	CodeInternal    = 500 // anything else
)

// Sentinels that *ServiceError matches with errors.Is by its code.
var (
	// ErrBadRequest matches a 400 reply.
	ErrBadRequest = errors.New("protocol: bad request")
	// ErrNotFound matches a 404 reply: an undeclared sequence.
	ErrNotFound = errors.New("protocol: not found")
	// ErrUnavailable matches a 503 reply.
	ErrUnavailable = errors.New("protocol: no ID available right now")
	// ErrHomeUnreachable matches a *HomeUnreachableError.
	ErrHomeUnreachable = errors.New("protocol: the sequence's home region cannot be reached")
)

// HomeUnreachableError is a sequence request that met no responders in
// a fleet of regions where the other instances name the sequence's home:
// only the home region's instances serve a sequence, and none of them
// can be reached (all gone, or the gateway to their region cut). Retry
// later; no other region can answer for it.
type HomeUnreachableError struct {
	Subject  string // the request's subject
	Sequence string
	Home     string // the home region, as the instances reached name it
	Err      error  // what the request met (the client's no-responders error)
}

func (e *HomeUnreachableError) Error() string {
	return fmt.Sprintf("%s: sequence %q is served only by its home region %s, which cannot be reached (no responders)", e.Subject, e.Sequence, e.Home)
}

// Is makes errors.Is(err, ErrHomeUnreachable) true.
func (e *HomeUnreachableError) Is(target error) bool { return target == ErrHomeUnreachable }

// Unwrap is what the request met.
func (e *HomeUnreachableError) Unwrap() error { return e.Err }

// ServiceError is an error reply of the service (400, 404, 503 or 500) or, on
// the service side, the reply a handler wants sent.
type ServiceError struct {
	Subject     string // the request's subject (client side)
	Code        int
	Description string
	// RetryAfter is the service's hint (RetryAfterHeader, with a 503 at
	// capacity): retry no sooner. 0 without one.
	RetryAfter time.Duration
}

// Error is the reply as the service put it, behind the subject and the
// code: "uid.batch: 400 count is 0: ask for 1 to 100000 IDs". It names no
// package, since no package of the caller's made it.
func (e *ServiceError) Error() string {
	if e.Subject == "" {
		return fmt.Sprintf("%d %s", e.Code, e.Description)
	}
	return fmt.Sprintf("%s: %d %s", e.Subject, e.Code, e.Description)
}

// Is makes errors.Is(err, ErrBadRequest), errors.Is(err, ErrNotFound)
// and errors.Is(err, ErrUnavailable) true for the matching codes.
func (e *ServiceError) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.Code == CodeBadRequest
	case ErrNotFound:
		return e.Code == CodeNotFound
	case ErrUnavailable:
		return e.Code == CodeUnavailable
	}
	return false
}

// MaxRetryAfter bounds the retry hint a client honours: a hint beyond
// it (a broken or hostile responder) is read as MaxRetryAfter. The
// service's hints are at most a second.
const MaxRetryAfter = time.Minute

// ErrorFromHeaders returns the error reply that a reply's
// Nats-Service-Error-Code (code), Nats-Service-Error (description) and
// Uid-Retry-After-Ms (retryAfter) headers carry, or nil when code is
// empty (not an error reply). A retryAfter that is not a positive
// number of milliseconds is no hint.
func ErrorFromHeaders(subject string, code, description, retryAfter string) error {
	if code == "" {
		return nil
	}
	n, err := strconv.Atoi(code)
	if err != nil {
		n = CodeInternal
		description = fmt.Sprintf("unparseable error code %q: %s", code, description)
	}
	return &ServiceError{Subject: subject, Code: n, Description: description, RetryAfter: parseRetryAfter(retryAfter)}
}

func parseRetryAfter(ms string) time.Duration {
	if ms == "" {
		return 0
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, int64(MaxRetryAfter/time.Millisecond))) * time.Millisecond
}
