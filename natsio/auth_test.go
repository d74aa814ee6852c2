package natsio

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/uid-dispenser/uid-dispenser/internal/testenv"
	"github.com/uid-dispenser/uid-dispenser/natsio/uidclient"
)

func TestReconnectKeepsWorkerAndResumes(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := startNATSServer(t, port)
	url := srv.ClientURL()
	inst := startInstance(t, url, 8, instanceOpts{})
	nc := connect(t, url)
	client := uidclient.New(nc.Conn, uidclient.Config{AttemptTimeout: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before, err := client.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	serviceID := inst.svc.ID()

	srv.Shutdown()
	srv.WaitForShutdown()
	startNATSServer(t, port) // the same address, a fresh server

	after, err := client.Next(ctx) // retries while both sides reconnect
	if err != nil {
		t.Fatal(err)
	}
	shares := workerShares(t, []uint64{before, after})
	if shares[8] != 2 || after <= before {
		t.Fatalf("before %d, after %d: want both from worker 8, increasing", before, after)
	}
	if inst.svc.ID() != serviceID {
		t.Fatalf("service re-added across a reconnect: id %s→%s", serviceID, inst.svc.ID())
	}
}

func startNATSServer(t *testing.T, port int) *server.Server {
	t.Helper()
	return testenv.NATS(t, &server.Options{Port: port})
}
