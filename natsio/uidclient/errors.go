package uidclient

import "github.com/uid-dispenser/uid-dispenser/natsio/protocol"

// The error replies of the service, as the protocol package defines them,
// named here too so that a program that only gets IDs branches on them
// without importing the protocol.
type ServiceError = protocol.ServiceError

// HomeUnreachableError is a sequence request in a fleet of regions that
// no instance of the sequence's home region could answer (all gone, or
// the gateway to it cut); Home names the region. It matches
// ErrHomeUnreachable and wraps NATS's no-responders error.
type HomeUnreachableError = protocol.HomeUnreachableError

var (
	// ErrBadRequest matches a 400 reply.
	ErrBadRequest = protocol.ErrBadRequest
	// ErrNotFound matches a 404 reply: an undeclared sequence.
	ErrNotFound = protocol.ErrNotFound
	// ErrUnavailable matches a 503 reply.
	ErrUnavailable = protocol.ErrUnavailable
	// ErrHomeUnreachable matches a *HomeUnreachableError.
	ErrHomeUnreachable = protocol.ErrHomeUnreachable
)
