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
		return protocol.CodeUnavailable, describe("sequence store unavailable", err, sequence.ErrUnavailable)
	case errors.Is(err, sequence.ErrClosed):
		return protocol.CodeUnavailable, describe("shutting down", err, sequence.ErrClosed)
	case errors.Is(err, uidcore.ErrClosed):
		return protocol.CodeUnavailable, describe("shutting down", err, uidcore.ErrClosed)
	case errors.Is(err, uidcore.ErrClaimLost):
		return protocol.CodeUnavailable, describe("worker claim lost", err, uidcore.ErrClaimLost)
	case errors.Is(err, uidcore.ErrTimeExhausted):
		// Permanent for every instance of the layout: not worth a retry.
		return protocol.CodeInternal, describe("time field exhausted", err, uidcore.ErrTimeExhausted)
	case errors.Is(err, uidcore.ErrNotReserved):
		return protocol.CodeUnavailable, describe("worker claim has not reserved the time yet", err, uidcore.ErrNotReserved)
	case errors.Is(err, uidcore.ErrBufferEmpty):
		return protocol.CodeUnavailable, describe("buffer empty", err, uidcore.ErrBufferEmpty)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return protocol.CodeUnavailable, describe("request abandoned", err)
	}
	return protocol.CodeInternal, describe("internal error", err)
}

// packagePrefixes are what the layers of the dispenser put before their
// messages; a caller reads the description without them.
var packagePrefixes = strings.NewReplacer("uidcore: ", "", "workerid: ", "", "natsio: ", "", "kvstore: ", "", "dispenser: ", "")

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
	if len(s) > maxLen {
		s = s[:maxLen] + "..."
	}
	return s
}
