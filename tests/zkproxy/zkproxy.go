// Package zkproxy is a loopback TCP proxy in front of one ZooKeeper server
// for tests: it forwards connections until told to cut them (Block: a
// partition, or a process that stops heartbeating, while the server keeps
// running), and it can let one request through and lose the server's
// answer (LoseAnswerTo: the request takes effect, the client sees a
// connection loss).
package zkproxy

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards to one server. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex
	blocked bool
	marker  []byte // the next request containing it goes through unanswered
	onLost  func() // runs once that answer is lost
	lost    bool
	conns   map[net.Conn]struct{}
}

// Start listens on a free 127.0.0.1 port and forwards to target; t's
// cleanup closes everything.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.Block()
		p.wg.Wait()
	})
	return p
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Block cuts every connection and refuses new ones until Unblock.
func (p *Proxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Unblock lets connections through again.
func (p *Proxy) Unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
}

// LoseAnswerTo lets the next request whose bytes contain marker through to
// the server, then drops the server's answer and cuts that connection: the
// client sees a connection loss for a request that did take effect. then,
// when not nil, runs right after (under no lock), e.g. Block to keep the
// client away for a while.
func (p *Proxy) LoseAnswerTo(marker string, then func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker, p.onLost, p.lost = []byte(marker), then, false
}

// Lost reports whether the answer LoseAnswerTo asked for was lost.
func (p *Proxy) Lost() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

func (p *Proxy) accept() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		up, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		if p.blocked {
			p.mu.Unlock()
			down.Close()
			up.Close()
			continue
		}
		p.conns[down], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		var muted atomic.Bool // the next answer from the server is dropped, with the connection
		p.wg.Go(func() { p.toServer(down, up, &muted) })
		p.wg.Go(func() { p.toClient(down, up, &muted) })
	}
}

func (p *Proxy) toServer(down, up net.Conn, muted *atomic.Bool) {
	defer up.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := down.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.marker != nil && bytes.Contains(buf[:n], p.marker) {
				p.marker = nil
				muted.Store(true)
			}
			p.mu.Unlock()
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) toClient(down, up net.Conn, muted *atomic.Bool) {
	defer down.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 && muted.Load() {
			up.Close() // the server answered (so applied) the request: lose the answer
			p.mu.Lock()
			p.lost = true
			then := p.onLost
			p.onLost = nil
			p.mu.Unlock()
			if then != nil {
				then()
			}
			return
		}
		if n > 0 {
			if _, werr := down.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
