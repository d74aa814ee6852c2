// Package natsconn connects to NATS the way every uid-dispenser program
// does: with user and password, a token, an NKey seed, a credentials
// file or a TLS client certificate (Config), reconnecting for ever once
// connected (Connect), or waiting for a server that is not up yet
// (ConnectWaiting). Secrets never appear in its logs or errors
// (RedactURL), and Config.Validate says which setting is unusable (a
// credentials file included) before anything connects.
//
// It is the client side's as much as the dispenser's: it links nats.go,
// nkeys and the JWT library, never nats-server, so that a client program
// (cmd/client-demo) gets an authenticated connection without linking
// the server side. A test keeps it so.
package natsconn
