// Package faultproxy is a TCP proxy for tests and the soak: it cuts the
// connections to a store on demand to simulate losing the store (or a
// gateway between two NATS clusters), and can delay them like a WAN.
package faultproxy

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a target address
// until Cut, and again after Restore; SetDelay holds back what it
// forwards, each way, like a WAN link.
type Proxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds each way
	// stalled drops what is read, each way, with the connections left
	// open: a link that dies silently, as an iptables DROP makes it.
	stalled atomic.Bool

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy listens on 127.0.0.1 at a random port and forwards to target.
// It is closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Listen is NewProxy for programs outside tests (the soak): the caller
// closes the proxy.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every forwarded connection and refuses new ones (accepting
// and closing them at once) until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// SetDelay delays everything forwarded from now on by d in each
// direction (0: none), keeping its order.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Stall drops everything forwarded from now on, each way, but keeps
// the connections open: neither side sees an error, only silence, until
// Restore.
func (p *Proxy) Stall() { p.stalled.Store(true) }

// Restore forwards new connections again, and ends a Stall.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
	p.stalled.Store(false)
}

// Close stops listening, closes every forwarded connection and waits for
// the forwarding goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refused := p.cut
		p.mu.Unlock()
		if refused {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.cut { // cut while dialling
			p.mu.Unlock()
			client.Close()
			server.Close()
			continue
		}
		p.conns[client] = struct{}{}
		p.conns[server] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

// pipe copies one direction, each chunk SetDelay's delay after it was
// read; when it ends both sides are closed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	type chunk struct {
		b   []byte
		due time.Time
	}
	chunks := make(chan chunk, 256)
	written := make(chan struct{})
	go func() {
		defer close(written)
		failed := false
		for c := range chunks {
			if failed {
				continue // drain, so the reader never blocks
			}
			if wait := time.Until(c.due); wait > 0 {
				time.Sleep(wait) // the link's latency, not a test's wait
			}
			if _, err := dst.Write(c.b); err != nil {
				failed = true
				src.Close() // stops the reader
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.stalled.Load() {
			chunks <- chunk{slices.Clone(buf[:n]), time.Now().Add(time.Duration(p.delay.Load()))}
		}
		if err != nil {
			break
		}
	}
	close(chunks)
	<-written
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
