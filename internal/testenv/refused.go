package testenv

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// RefusedAddr is a loopback address (host:port) that refuses every
// connection until the test ends, for a test of an unreachable server. A
// port found free and closed again is not enough: on a busy machine the
// system handed it to a nats-server that another test started, and the
// "unreachable" dispenser connected to it and served (make test,
// TestSecretsNeverReachTheOutput). Here a socket is bound to the port and
// never listens: a connection is refused (no listener), and no other
// socket can bind the port while it is held (it is bound without
// SO_REUSEADDR), neither a listener nor a connection's local end.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("a socket for a refused address: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind a refused address: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("the refused address's port: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("the refused address is a %T", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
}
