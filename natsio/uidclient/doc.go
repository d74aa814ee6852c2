// Package uidclient gets unique 64-bit IDs from uid-dispenser over NATS:
//
//	nc, err := nats.Connect(nats.DefaultURL)
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer nc.Close()
//	ids := uidclient.New(nc, uidclient.Config{})
//	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
//	defer cancel()
//	id, err := ids.Next(ctx) // or ids.Batch(ctx, 1000)
//	if err != nil {
//		log.Fatal(err)
//	}
//	fmt.Println(id)
//
// [Client] asks the dispensers, retrying while none answers; a
// [Prefetcher] keeps a reserve of IDs in-process, fetched in batches in
// the background; a [BlockSource] takes whole prefilled blocks of IDs
// from a JetStream stream. Error replies are [*ServiceError]; errors.Is
// with [ErrBadRequest] or [ErrUnavailable] tells them apart.
//
// The package links nats.go, the OpenTelemetry API (never the SDK: the
// program chooses its providers) and uid-dispenser's uidcore, nothing of
// the server side (package natsio, which imports this one for the codec).
// A test keeps it so.
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
// Dispensers (natsio.BlockPublisher) keep a JetStream work-queue stream
// ("UID_BLOCKS" on "uid.blocks") topped up with prefilled blocks of IDs:
// one message per block, the IDs 8 bytes big-endian each, with the
// headers Uid-Count, Uid-Worker-Id, Uid-First, Uid-Last and Nats-Msg-Id.
// BlockSource pulls at most two blocks at a time from a durable consumer
// shared by every source and uses a block only on its first delivery,
// after a server-confirmed ack, and when the consumer is still the
// instance it bound (the same Created time after the ack), so each block
// is used by exactly one consumer even across a re-created consumer.
//
// # Tracing
//
// Each call is one client span ("send uid.next"), whose trace context
// goes along in the request headers through the global propagator; set
// one (the default is a no-op). [HeaderCarrier] reads and writes NATS
// headers without regard to the case of their names.
package uidclient
