package natsio

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
	"github.com/uid-dispenser/uid-dispenser/uidcore"
)

func badRequest(format string, args ...any) *uidclient.ServiceError {
	return &uidclient.ServiceError{Code: uidclient.CodeBadRequest, Description: fmt.Sprintf(format, args...)}
}

// replyFor maps an error of a handler to the code and description the
// requester gets. uidcore's errors become 503s that say which condition
// holds, because the requester (or its client's retry) can act on them.
func replyFor(err error) (code int, description string) {
	var se *uidclient.ServiceError
	var ce *capacityError
	switch {
	case errors.As(err, &se):
		return se.Code, se.Description
	case errors.As(err, &ce):
		return uidclient.CodeUnavailable, ce.Error()
	case errors.Is(err, uidcore.ErrClosed):
		return uidclient.CodeUnavailable, "shutting down: " + err.Error()
	case errors.Is(err, uidcore.ErrClaimLost):
		return uidclient.CodeUnavailable, "worker claim lost: " + err.Error()
	case errors.Is(err, uidcore.ErrTimeExhausted):
		// Permanent for every instance of the layout: not worth a retry.
		return uidclient.CodeInternal, "time field exhausted: " + err.Error()
	case errors.Is(err, uidcore.ErrNotReserved):
		return uidclient.CodeUnavailable, "worker claim has not reserved the time yet: " + err.Error()
	case errors.Is(err, uidcore.ErrBufferEmpty):
		return uidclient.CodeUnavailable, "buffer empty: " + err.Error()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return uidclient.CodeUnavailable, "request abandoned: " + err.Error()
	}
	return uidclient.CodeInternal, "internal error: " + err.Error()
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
