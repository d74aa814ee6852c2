// Package natsio is everything of uid-dispenser that speaks NATS: the
// dispenser's micro service (Service), the Go client (Client) with its
// prefetching source (Prefetcher), connecting with authentication
// (Connect), and the embedded nats-server of the zero-config run
// (LocalServer).
//
// # Protocol
//
// The service is named "uid-dispenser" and joins the queue group
// "uid-dispenser" (not micro's default "q", which demo services share).
// Under a subject prefix ("uid" by default):
//
//	uid.next   any body            → one ID in decimal ASCII
//	uid.batch  decimal count       → that many IDs, newline-separated decimal,
//	                                 or 8-byte big-endian each when the request
//	                                 has the header "Uid-Encoding: binary"
//	uid.parse  decimal ID          → {"UID":"…","timestamp":"yyyy-MM-dd HH:mm:ss","workerId":"…","sequence":"…"}
//
// Errors carry the micro headers Nats-Service-Error (what was wrong) and
// Nats-Service-Error-Code: 400 for bad input, 503 when no ID can be given
// right now (buffer empty, worker claim lost or not yet reserved, shutting
// down), 500 otherwise. Every request is answered.
//
// The largest batch is configurable and capped so that the reply fits the
// connection's max payload (8 bytes per ID binary, 20 decimal); a larger
// count is a 400, never a truncated reply.
//
// # ID blocks
//
// BlockPublisher keeps a JetStream work-queue stream ("UID_BLOCKS" on
// "uid.blocks") topped up with prefilled blocks of IDs: one message per
// block, the IDs 8 bytes big-endian each, with the headers Uid-Count,
// Uid-Worker-Id, Uid-First, Uid-Last and Nats-Msg-Id. BlockSource pulls
// one block at a time from a durable consumer shared by every source and
// uses a block only on its first delivery and after a server-confirmed
// ack, so each block is used by exactly one consumer.
package natsio
