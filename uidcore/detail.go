package uidcore

import (
	"errors"
	"fmt"
)

// Detailer is an error that can say what lies behind its condition to a
// requester on another machine: the detail alone, without the condition
// (the service names it: "worker claim lost", "buffer empty") and
// without the package names each layer puts before its messages for its
// Go callers.
type Detailer interface {
	error
	Detail() string
}

// Detail is err's detail for a remote requester: the Detail of the
// outermost Detailer in err's chain, "" when there is none (a sentinel
// alone says all there is).
func Detail(err error) string {
	var d Detailer
	if errors.As(err, &d) {
		return d.Detail()
	}
	return ""
}

// detailOf is the detail of a cause: its Detail when it has one, else
// its message (a cause made without a package name, such as padding's
// reasons).
func detailOf(cause error) string {
	var d Detailer
	if errors.As(cause, &d) {
		return d.Detail()
	}
	return cause.Error()
}

// EmptyError is ErrBufferEmpty with why padding last stopped short: the
// ring is empty because of Cause.
type EmptyError struct{ Cause error }

func (e *EmptyError) Error() string   { return ErrBufferEmpty.Error() + ": " + e.Cause.Error() }
func (e *EmptyError) Unwrap() []error { return []error{ErrBufferEmpty, e.Cause} }

// Detail is the cause's.
func (e *EmptyError) Detail() string { return detailOf(e.Cause) }

// NotReservedError is ErrNotReserved for one second: the claim (on
// WorkerID) has reserved up to Until, and an ID needs Second.
type NotReservedError struct {
	WorkerID      uint64
	Second, Until int64
}

func (e *NotReservedError) Error() string { return ErrNotReserved.Error() + ": " + e.Detail() }
func (e *NotReservedError) Unwrap() error { return ErrNotReserved }

// Detail names the worker ID and the seconds.
func (e *NotReservedError) Detail() string {
	return fmt.Sprintf("worker ID %d, second %d > %d", e.WorkerID, e.Second, e.Until)
}
