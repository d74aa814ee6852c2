// Package protocol is uid-dispenser's wire protocol on NATS, the contract
// between the dispensers (package natsio) and every client (package
// natsio/uidclient, or a client in another language): the service's
// names and subjects, the headers, the error codes, the encodings of IDs
// and the block messages. Both sides import it; neither imports the
// other. It links nats.go and nothing else of this module's but a helper.
//
// docs/protocol.md describes the same protocol for other languages; this
// package's files are its reference:
//
//	protocol.go   service name, queue group, endpoints, subjects, headers
//	errors.go     error codes and *ServiceError
//	encoding.go   the encodings of a batch reply
//	ranges.go     runs of consecutive IDs (Uid-Encoding: ranges)
//	blocks.go     the block messages of the JetStream stream
//	header.go     headers matched without regard to case
//
// # Requests and replies
//
// The service is named "uid-dispenser" and joins the queue group
// "uid-dispenser" (not micro's default "q", which demo services share).
// Under a subject prefix ("uid" by default):
//
//	uid.next   any body            → one ID in decimal ASCII
//	uid.batch  decimal count       → that many IDs, newline-separated decimal,
//	                                 or 8-byte big-endian each when the request
//	                                 has the header "Uid-Encoding: binary", or
//	                                 runs (first ID, count: 16 bytes) with
//	                                 "Uid-Encoding: ranges"
//	uid.parse  decimal ID          → {"UID":"…","timestamp":"yyyy-MM-dd HH:mm:ss","workerId":"…","sequence":"…"}
//
// and the named sequences on uid.seq.<name>.next and uid.seq.<name>.batch,
// answered the same way with the numbers of one sequence.
//
// Errors carry the micro headers Nats-Service-Error (what was wrong) and
// Nats-Service-Error-Code: 400 for bad input, 404 for an undeclared
// sequence, 503 when no ID can be given right now (buffer empty, worker
// claim lost or not yet reserved, shutting down), 500 otherwise. Every
// request is answered.
//
// The largest batch is configurable and capped so that the reply fits the
// connection's max payload (8 bytes per ID binary, 20 decimal); a larger
// count is a 400, never a truncated reply.
//
// # ID blocks
//
// Dispensers keep a JetStream work-queue stream ("UID_BLOCKS" on
// "uid.blocks") topped up with prefilled blocks of IDs: one message per
// block, the IDs 8 bytes big-endian each, with the headers Uid-Count,
// Uid-Worker-Id, Uid-First, Uid-Last and Nats-Msg-Id (EncodeBlock,
// DecodeBlock). How a consumer takes each block exactly once is
// docs/blocks.md.
//
// # Trace context
//
// A request may carry W3C trace context (traceparent, tracestate) in its
// headers; HeaderCarrier reads and writes them whatever the case of their
// names.
package protocol
