// Package uidattr names the uid.* attributes that more than one package
// puts on spans and metrics, so that telemetry (providers, generator
// observer) and natsio (request spans and metrics) agree on them. It
// depends on the OpenTelemetry attribute package only.
package uidattr

import "go.opentelemetry.io/otel/attribute"

const (
	// WorkerID is the worker ID of the instance that served or padded.
	WorkerID = attribute.Key("uid.worker_id")
	// Endpoint is the service endpoint of a request: next, batch, parse.
	Endpoint = attribute.Key("uid.endpoint")
	// Outcome is how a request ended: ok, or the class of its error.
	Outcome = attribute.Key("uid.outcome")
	// Count is how many IDs a request asked for (batch) or was given.
	Count = attribute.Key("uid.count")
	// Reason is why the ring buffer refused a put or a take.
	Reason = attribute.Key("uid.reject.reason")
	// Region is the instance's region (DISPENSER_REGION), in a fleet
	// across a supercluster.
	Region = attribute.Key("uid.region")
	// Sequence is the name of a named sequence (its requests' spans, its
	// metrics).
	Sequence = attribute.Key("uid.sequence")
)
