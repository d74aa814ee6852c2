package natsio

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/natsio/protocol"
	"github.com/uid-dispenser/uid-dispenser/sequence"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

func badRequest(format string, args ...any) *protocol.ServiceError {
	return &protocol.ServiceError{Code: protocol.CodeBadRequest, Description: fmt.Sprintf(format, args...)}
}

// replyFor maps an error of a handler to the code and description the
// requester gets. uidcore's errors become 503s that say which condition
// holds, because the requester (or its client's retry) can act on them.
func replyFor(err error) (code int, description string) {
	var se *protocol.ServiceError
	var ce *capacityError
	switch {
	case errors.As(err, &se):
		return se.Code, se.Description
	case errors.As(err, &ce):
		return protocol.CodeUnavailable, ce.Error()
	case errors.Is(err, sequence.ErrUnknownSequence):
		return protocol.CodeNotFound, err.Error()
	case errors.Is(err, sequence.ErrUnavailable):
		// The allocator's error names the sequence and the store.
		return protocol.CodeUnavailable, describe("sequence store unavailable", err)
	case errors.Is(err, sequence.ErrClosed), errors.Is(err, uidcore.ErrClosed):
		return protocol.CodeUnavailable, "shutting down"
	case errors.Is(err, uidcore.ErrClaimLost):
		return protocol.CodeUnavailable, describe("worker claim lost", err)
	case errors.Is(err, uidcore.ErrTimeExhausted):
		// Permanent for every instance of the layout: not worth a retry.
		return protocol.CodeInternal, describe("time field exhausted", err)
	case errors.Is(err, uidcore.ErrNotReserved):
		return protocol.CodeUnavailable, describe("worker claim has not reserved the time yet", err)
	case errors.Is(err, uidcore.ErrBufferEmpty):
		return protocol.CodeUnavailable, describe("buffer empty", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return protocol.CodeUnavailable, "request abandoned: " + err.Error()
	}
	return protocol.CodeInternal, "internal error: " + err.Error()
}

// describe is what a caller reads: the condition once, then the detail
// that the typed errors behind it give (uidcore.Detailer), which names no
// package and does not repeat the condition.
func describe(condition string, err error) string {
	if d := uidcore.Detail(err); d != "" {
		return condition + ": " + d
	}
	return condition
}

// headerSafe makes s fit a header value: one line, bounded length.
func headerSafe(s string) string {
	const maxLen = 512
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	if len(s) > maxLen {
		s = s[:maxLen] + "..."
	}
	return s
}
