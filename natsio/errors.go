package natsio

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

// Error codes of the protocol, sent in the Nats-Service-Error-Code header.
const (
	CodeBadRequest  = 400 // the request is malformed; retrying it cannot help
	CodeUnavailable = 503 // no ID can be given right now; retry (another instance may answer)
	CodeInternal    = 500 // anything else
)

// Sentinels that *ServiceError matches with errors.Is by its code.
var (
	// ErrBadRequest matches a 400 reply.
	ErrBadRequest = errors.New("natsio: bad request")
	// ErrUnavailable matches a 503 reply.
	ErrUnavailable = errors.New("natsio: no ID available right now")
)

// ErrShuttingDown is the reason a service that is stopping gives.
var ErrShuttingDown = errors.New("shutting down")

// ServiceError is an error reply of the service (400, 503 or 500) or, on
// the service side, the reply a handler wants sent.
type ServiceError struct {
	Subject     string // the request's subject (client side)
	Code        int
	Description string
}

func (e *ServiceError) Error() string {
	if e.Subject == "" {
		return fmt.Sprintf("natsio: %d %s", e.Code, e.Description)
	}
	return fmt.Sprintf("natsio: %s: %d %s", e.Subject, e.Code, e.Description)
}

// Is makes errors.Is(err, ErrBadRequest) and errors.Is(err,
// ErrUnavailable) true for the matching codes.
func (e *ServiceError) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.Code == CodeBadRequest
	case ErrUnavailable:
		return e.Code == CodeUnavailable
	}
	return false
}

func badRequest(format string, args ...any) *ServiceError {
	return &ServiceError{Code: CodeBadRequest, Description: fmt.Sprintf(format, args...)}
}

// replyFor maps an error of a handler to the code and description the
// requester gets. uidcore's errors become 503s that say which condition
// holds, because the requester (or its client's retry) can act on them.
func replyFor(err error) (code int, description string) {
	var se *ServiceError
	switch {
	case errors.As(err, &se):
		return se.Code, se.Description
	case errors.Is(err, ErrShuttingDown), errors.Is(err, uidcore.ErrClosed):
		return CodeUnavailable, describe("shutting down", err, ErrShuttingDown, uidcore.ErrClosed)
	case errors.Is(err, uidcore.ErrClaimLost):
		return CodeUnavailable, describe("worker claim lost", err, uidcore.ErrClaimLost)
	case errors.Is(err, uidcore.ErrTimeExhausted):
		// Permanent for every instance of the layout: not worth a retry.
		return CodeInternal, describe("time field exhausted", err, uidcore.ErrTimeExhausted)
	case errors.Is(err, uidcore.ErrNotReserved):
		return CodeUnavailable, describe("worker claim has not reserved the time yet", err, uidcore.ErrNotReserved)
	case errors.Is(err, uidcore.ErrBufferEmpty):
		return CodeUnavailable, describe("buffer empty", err, uidcore.ErrBufferEmpty)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return CodeUnavailable, describe("request abandoned", err)
	}
	return CodeInternal, describe("internal error", err)
}

// packagePrefixes are what the layers of the dispenser put before their
// messages; a caller reads the description without them.
var packagePrefixes = strings.NewReplacer("uidcore: ", "", "workerid: ", "", "natsio: ", "", "dispenser: ", "")

// describe is what a caller reads: the condition once, then the details
// of err without the package prefixes each layer put in and without the
// parts that only repeat the condition (the sentinels it matched, the
// empty ring a failed padding round left).
func describe(condition string, err error, repeats ...error) string {
	skip := map[string]bool{condition: true, packagePrefixes.Replace(uidcore.ErrBufferEmpty.Error()): true}
	for _, r := range repeats {
		skip[packagePrefixes.Replace(r.Error())] = true
	}
	var kept []string
	for part := range strings.SplitSeq(packagePrefixes.Replace(err.Error()), ": ") {
		if !skip[part] {
			kept = append(kept, part)
		}
	}
	if len(kept) == 0 {
		return condition
	}
	return condition + ": " + strings.Join(kept, ": ")
}

// headerSafe makes s fit a header value: one line, bounded length.
func headerSafe(s string) string {
	const maxLen = 512
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	return shorten(s, maxLen)
}

// serviceErrorFromHeaders returns the error reply in a message's headers,
// or nil when it is not one.
func serviceErrorFromHeaders(subject string, code, description string) error {
	if code == "" {
		return nil
	}
	n, err := strconv.Atoi(code)
	if err != nil {
		n = CodeInternal
		description = fmt.Sprintf("unparseable error code %q: %s", code, description)
	}
	return &ServiceError{Subject: subject, Code: n, Description: description}
}
