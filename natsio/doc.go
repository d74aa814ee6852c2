// Package natsio is the server side of uid-dispenser on NATS: the
// dispenser's micro service (Service), the publisher of prefilled ID
// blocks (BlockPublisher) and the embedded nats-server of the
// zero-config run (LocalServer). Connecting, with authentication, is
// natsio/natsconn, which clients use too.
//
// The wire protocol (subjects, encodings, error codes, block messages) is
// natsio/protocol, which this package and the client share. Programs that
// only want IDs import natsio/uidclient and never link this package or
// nats-server. The JetStream KV worker-ID store is natsio/kvstore.
//
// # Service
//
// The service is named protocol.ServiceName and joins the queue group
// protocol.DefaultQueueGroup (not micro's default "q", which demo
// services share), with the endpoints next, batch and parse under the
// subject prefix; the ring buffer's state is in the micro stats, once,
// under next (and the sequences' under seq_next). Every
// request is answered: a handler's error becomes a 400, 404, 503 or 500
// reply that says what was wrong (see the protocol package doc). The
// largest batch is configurable and capped so that the reply fits the
// connection's max payload.
//
// # ID blocks
//
// BlockPublisher keeps a JetStream work-queue stream ("UID_BLOCKS" on
// "uid.blocks") topped up with prefilled blocks of IDs from the
// instance's generator, encoded with protocol.EncodeBlock; the stream's
// message cap with discard-new keeps several publishers from overfilling
// it. uidclient.BlockSource is the consumer.
package natsio
