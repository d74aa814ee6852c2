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
// with [ErrBadRequest], [ErrNotFound] or [ErrUnavailable] tells them apart.
//
// The connection stays the caller's, with one exception: a Client moves
// it off a NATS server cut off from its cluster, where every request
// gets no responders, by forcing it to reconnect to another server of
// its pool ([Mover]; Config.MoveAfter negative turns that off).
//
// The package links nats.go, the OpenTelemetry API (never the SDK: the
// program chooses its providers) and uid-dispenser's uidcore, nothing of
// the server side (package natsio). A test keeps it so.
//
// # Protocol
//
// The subjects, headers, error codes and encodings the client speaks are
// in package natsio/protocol, which the dispensers import too.
//
// # Tracing
//
// Each call is one client span ("send uid.next"), whose trace context
// goes along in the request headers through the global propagator; set
// one (the default is a no-op). [protocol.HeaderCarrier] reads and
// writes NATS headers without regard to the case of their names.
package uidclient
