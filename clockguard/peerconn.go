package clockguard

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/ctxlock"
)

// peerConn is a connection to a peer's HTTP API, plain or TLS, with its
// reader.
type peerConn struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
}

// close closes the connection.
func (c *peerConn) close() { _ = c.conn.Close() }

// connPool keeps one idle keep-alive connection per peer of the current
// sample, so that a peer kept from one round to the next is asked over the
// connection of the round before. It holds at most the sample's size: the
// connections of peers that leave the sample are closed.
type connPool struct {
	mu     sync.Mutex
	idle   map[int64]*peerConn
	closed bool // after close: no connection is kept
}

// newConnPool returns an empty pool.
func newConnPool() *connPool { return &connPool{idle: map[int64]*peerConn{}} }

// take removes and returns the idle connection to the peer, nil when there
// is none; one to another address (the peer moved) is closed.
func (p *connPool) take(peer Peer) *peerConn {
	p.mu.Lock()
	c := p.idle[peer.WorkerID]
	delete(p.idle, peer.WorkerID)
	p.mu.Unlock()
	if c != nil && c.addr != peer.Addr {
		c.close()
		return nil
	}
	return c
}

// put keeps c as the peer's idle connection, or closes it once the pool is
// closed or when it holds one already.
func (p *connPool) put(id int64, c *peerConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, held := p.idle[id]; held || p.closed {
		c.close()
		return
	}
	p.idle[id] = c
}

// retain closes the connections of the peers not in ids (sorted).
func (p *connPool) retain(ids []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, c := range p.idle {
		if _, found := slices.BinarySearch(ids, id); !found {
			c.close()
			delete(p.idle, id)
		}
	}
}

// close closes every idle connection; later ones are closed when put.
func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for id, c := range p.idle {
		c.close()
		delete(p.idle, id)
	}
}

// open reports whether connections are kept, and how many are.
func (p *connPool) open() (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed, len(p.idle)
}

// dial connects to the peer (and does the TLS handshake with cfg.TLS).
func (p *Peers) dial(ctx context.Context, peer Peer) (*peerConn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", peer.Addr)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", peerTimePath, err)
	}
	if p.cfg.TLS != nil {
		tc := tls.Client(conn, peerTLS(p.cfg.TLS, peer.Addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("GET %s: TLS handshake: %w", peerTimePath, err)
		}
		conn = tc
	}
	return &peerConn{addr: peer.Addr, conn: conn, br: bufio.NewReaderSize(conn, 1024)}, nil
}

// exchange is one peer's measurement over one connection: peerSamples
// requests, the one with the lowest round trip kept.
type exchange struct {
	rtt, offset time.Duration
	got         bool // a sample answered
	reusable    bool // the connection may be kept: every sample answered and the peer keeps it open
}

// measure asks the peer peerSamples times over c, bounded by ctx; keep
// says the connection is to be kept (no Connection: close on the last
// request). It returns what it measured and the error of the first sample
// that failed: a failure after a good sample ends the exchange with the
// samples it has.
func (p *Peers) measure(ctx context.Context, c *peerConn, keep bool) (exchange, error) {
	deadline, _ := ctx.Deadline()
	_ = c.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(pastDeadline) })
	var ex exchange
	var err error
	closing := false
	for i := range peerSamples {
		var rtt, offset time.Duration
		rtt, offset, closing, err = p.sample(c.conn, c.br, c.addr, !keep && i == peerSamples-1)
		if err != nil {
			break
		}
		if !ex.got || rtt < ex.rtt {
			ex.rtt, ex.offset, ex.got = rtt, offset, true
		}
		if closing { // the peer closes the connection after this answer: keep what it measured
			break
		}
	}
	// A connection whose deadline the context's end may have set cannot be
	// kept; one that is kept waits without a deadline.
	stopped := stop()
	ex.reusable = err == nil && stopped && keep && !closing && c.conn.SetDeadline(time.Time{}) == nil
	return ex, err
}

// askSample resolves the addresses of the sample's peers and asks them,
// each result judged against MaxOffset, in worker-ID order. The source is
// told to forget the address of every peer that could not be reached.
func (p *Peers) askSample(ctx context.Context, ids []int64) ([]PeerResult, error) {
	peers, err := p.src.PeerAddrs(ctx, ids)
	if err != nil {
		return nil, err
	}
	peers = onlySampled(peers, ids)
	results := p.askAll(ctx, peers)
	slices.SortFunc(results, func(a, b PeerResult) int { return cmp.Compare(a.WorkerID, b.WorkerID) })
	forget, _ := p.src.(peerForgetter)
	for i, r := range results {
		if r.Reachable() {
			results[i].Judged = judgeOffset(r.Offset, r.RTT, p.cfg.MaxOffset)
		} else if forget != nil && ctx.Err() == nil {
			forget.ForgetPeer(r.WorkerID)
		}
	}
	return results, nil
}

// onlySampled keeps the peers whose worker ID is in ids (sorted), once
// each: a source that answers more than it was asked for does not widen
// the sample.
func onlySampled(peers []Peer, ids []int64) []Peer {
	out := make([]Peer, 0, len(ids))
	seen := make(map[int64]bool, len(ids))
	for _, peer := range peers {
		if _, found := slices.BinarySearch(ids, peer.WorkerID); found && !seen[peer.WorkerID] {
			seen[peer.WorkerID] = true
			out = append(out, peer)
		}
	}
	return out
}

// askAll asks every peer, at most Concurrency at a time. The connections
// of the peers in the sample kept for the next round are kept open.
func (p *Peers) askAll(ctx context.Context, peers []Peer) []PeerResult {
	results := make([]PeerResult, len(peers))
	sem := ctxlock.NewSemaphore(p.cfg.Concurrency)
	keeping, _ := p.pool.open()
	var wg sync.WaitGroup
	for i, peer := range peers {
		if err := sem.Acquire(ctx); err != nil {
			results[i] = PeerResult{WorkerID: peer.WorkerID, Addr: peer.Addr, Error: err.Error()}
			continue
		}
		_, kept := slices.BinarySearch(p.sampler.cur, peer.WorkerID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sem.Release()
			results[i] = p.ask(ctx, peer, keeping && kept)
		}()
	}
	wg.Wait()
	return results
}

// ask measures one peer's clock: over the connection kept from the round
// before, or a new one, it asks peerSamples times and keeps the sample with
// the lowest round trip. A kept connection that fails before any answer
// (the peer closed it while idle) is replaced by a new one, once. keep
// says the connection is kept for the next round.
func (p *Peers) ask(ctx context.Context, peer Peer, keep bool) PeerResult {
	res := PeerResult{WorkerID: peer.WorkerID, Addr: peer.Addr}
	ex, err := p.exchangeWith(ctx, peer, keep)
	res.CheckedAt = clock.WallTime(p.clk)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.RTT, res.Offset = ex.rtt, ex.offset
	return res
}

// exchangeWith does ask's exchange, bounded by Timeout; it fails only when
// no sample answered.
func (p *Peers) exchangeWith(ctx context.Context, peer Peer, keep bool) (exchange, error) {
	if err := wire.CheckHostPort(peer.Addr); err != nil {
		return exchange{}, fmt.Errorf("bad peer address: %w", err)
	}
	ctx, cancel := clock.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	c := p.pool.take(peer)
	reused := c != nil
	if !reused {
		var err error
		if c, err = p.dial(ctx, peer); err != nil {
			return exchange{}, err
		}
	}
	ex, err := p.measure(ctx, c, keep)
	if !ex.got && reused && ctx.Err() == nil {
		c.close()
		var dialErr error
		if c, dialErr = p.dial(ctx, peer); dialErr != nil {
			return exchange{}, fmt.Errorf("%w (after the kept connection failed: %w)", dialErr, err)
		}
		ex, err = p.measure(ctx, c, keep)
	}
	if ex.reusable {
		p.pool.put(peer.WorkerID, c)
	} else {
		c.close()
	}
	if !ex.got {
		return ex, fmt.Errorf("GET %s: %w", peerTimePath, err)
	}
	return ex, nil
}
