package clustercheck

import (
	"io"
	"net"
	"sync"
)

// Proxy is a TCP proxy in front of one replica's peer port that carries
// the traffic of one other replica: a directed link. mqgate's replicas
// each dial the others to send (Raft messages and forwarded requests go
// from the dialer to the listener; only answers come back), so blocking
// the proxy between A and B's port is a one-way partition: A's messages
// no longer reach B, while B's still reach A through B's own link.
//
// Block cuts the link the way a partition looks to TCP: the connections
// open are closed and new ones are accepted but never forwarded (a black
// hole: the dialer's requests time out). Heal forwards again (the held
// connections are closed, so their dialers redial).
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	blocked bool
	closed  bool
	conns   map[net.Conn]struct{} // forwarded (both ends) or held
	wg      sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's address: the one the dialing replica is given for
// the target in its --peers.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Block cuts the link: open connections are closed, new ones held.
func (p *Proxy) Block() { p.set(true) }

// Heal restores the link: held connections are closed (their dialers
// redial and are forwarded).
func (p *Proxy) Heal() { p.set(false) }

// Blocked reports whether the link is cut.
func (p *Proxy) Blocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocked
}

func (p *Proxy) set(blocked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked == blocked {
		return
	}
	p.blocked = blocked
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track registers c unless the proxy is closed (then c is closed).
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.Blocked() {
			p.track(in) // held: read nothing, forward nothing
			continue
		}
		p.wg.Go(func() { p.forward(in) })
	}
}

func (p *Proxy) forward(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = in.Close()
		return
	}
	if !p.track(in, out) {
		return
	}
	if p.Blocked() { // blocked between Accept and here
		_ = in.Close()
		_ = out.Close()
		return
	}
	var pipes sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // ends when either side closes, or Block closes both
		_ = dst.Close()
		_ = src.Close()
	}
	pipes.Go(func() { pipe(out, in) })
	pipes.Go(func() { pipe(in, out) })
	pipes.Wait()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}
