package node

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/server"
)

// startPhase answers HTTP from the moment the node listens until its server
// serves (the claim of a worker ID waits for ZooKeeper and for a dead
// predecessor's lease): /healthz 200, /readyz 503 starting with what the
// node waits for, everything else 503, under the node's TLS allow-lists
// (403 client_not_allowed) with the detail for admins only. Then it hands
// the listener over.
type startPhase struct {
	h     *handoff
	view  net.Listener // the start phase server's view of the listener
	srv   *server.Starting
	done  chan error
	since time.Time
	// timers is the context the hand-over's deadline arms its timer under
	// (the node's: a simulation's clock.Schedule reaches it).
	timers context.Context
	// step says what the node does now; claim, once set, says what the
	// claim waits for (it wins while it says anything).
	step  atomic.Pointer[string]
	claim atomic.Pointer[func() string]
}

// startServing starts the start phase's server on ln.
func (n *node) startServing(ln net.Listener) (*startPhase, error) {
	p := &startPhase{h: newHandoff(ln), done: make(chan error, 1), since: time.Now(), timers: n.timers}
	p.setStep("starting")
	srv, err := server.NewStarting(server.StartingConfig{
		Status: p.status,
		// The node's allow-lists, as its server applies them; the detail
		// (ZooKeeper's addresses, the lease holder) only to the clients
		// that may read its admin paths.
		Authorize: n.tls.authorizer(),
		Admin:     n.tls.adminCheck(),
		Log:       n.log.With().Str("component", "http").Logger(),
	})
	if err != nil {
		return nil, err
	}
	p.srv = srv
	p.view = p.h.view()
	go func() { p.done <- srv.Serve(p.view) }()
	return p, nil
}

// setStep records what the node does now, for /readyz.
func (p *startPhase) setStep(s string) { p.step.Store(&s) }

// setClaim makes /readyz say what the claim waits for, while it says
// anything.
func (p *startPhase) setClaim(f func() string) { p.claim.Store(&f) }

// status is the start phase's answer: starting, with what it waits for.
func (p *startPhase) status() health.Status {
	detail := *p.step.Load()
	if f := p.claim.Load(); f != nil {
		if s := (*f)(); s != "" {
			detail = s
		}
	}
	return health.Status{State: health.Starting, Reason: health.ReasonStarting, Detail: detail, Since: p.since}
}

// handOver stops the start phase's server (its requests in flight finish,
// within a second) and returns the listener for the node's server; the
// connections that arrive meanwhile wait for it.
func (p *startPhase) handOver() net.Listener {
	ctx, cancel := clock.WithTimeout(p.timers, time.Second)
	defer cancel()
	// The view first: fasthttp's Shutdown does nothing to a Serve that has
	// not registered its listener yet (a node that starts within
	// microseconds), which would then serve beside the node's server for
	// good. A closed view ends Serve whenever it starts. Serve's return
	// comes before the drain: fasthttp's drain counts a Serve still
	// waiting in accept as an open connection and polls every 100 ms
	// while one is open.
	_ = p.view.Close()
	select {
	case <-p.done:
	case <-ctx.Done():
	}
	_ = p.srv.Shutdown(ctx) // past the deadline the last answers go on beside the node's server
	return p.h.view()
}

// stop ends the start phase without a hand-over: the node did not start.
func (p *startPhase) stop() {
	p.handOver()
	p.h.close()
}

// closeListener closes the listener once the node's server has stopped.
func (p *startPhase) closeListener() { p.h.close() }

// handoff lets servers serve one listener in turn. One goroutine accepts;
// each view gives the connections to its server until it is closed; a
// connection accepted between two views waits for the next one.
type handoff struct {
	ln    net.Listener
	conns chan net.Conn
	carry chan net.Conn // accepted by a view closed meanwhile: for the next view
	stop  chan struct{} // closed by close
	done  chan struct{} // closed when accepting ended; err says why
	err   error
	once  sync.Once
}

func newHandoff(ln net.Listener) *handoff {
	h := &handoff{ln: ln, conns: make(chan net.Conn), carry: make(chan net.Conn, 16), stop: make(chan struct{}), done: make(chan struct{})}
	go h.accept()
	return h
}

func (h *handoff) accept() {
	defer close(h.done)
	for {
		c, err := h.ln.Accept()
		if err != nil {
			h.err = err
			return
		}
		select {
		case h.conns <- c:
		case <-h.stop:
			c.Close()
			return
		}
	}
}

// close closes the listener and every connection no view took.
func (h *handoff) close() {
	h.once.Do(func() {
		close(h.stop)
		h.ln.Close()
		<-h.done
		for {
			select {
			case c := <-h.carry:
				c.Close()
			default:
				return
			}
		}
	})
}

// view returns a listener that hands out the accepted connections until it
// is closed; closing it leaves the real listener open.
func (h *handoff) view() net.Listener { return &handoffView{h: h, closed: make(chan struct{})} }

type handoffView struct {
	h      *handoff
	closed chan struct{}
	once   sync.Once
}

func (v *handoffView) Accept() (net.Conn, error) {
	select {
	case c := <-v.h.carry:
		return c, nil
	default:
	}
	var c net.Conn
	select {
	case c = <-v.h.carry:
	case c = <-v.h.conns:
	case <-v.closed:
		return nil, net.ErrClosed
	case <-v.h.done:
		if v.h.err != nil && !errors.Is(v.h.err, net.ErrClosed) {
			return nil, v.h.err
		}
		return nil, net.ErrClosed
	}
	select {
	case <-v.closed: // closed meanwhile: the next view serves it
		select {
		case v.h.carry <- c:
		default:
			c.Close()
		}
		return nil, net.ErrClosed
	default:
		return c, nil
	}
}

func (v *handoffView) Close() error {
	v.once.Do(func() { close(v.closed) })
	return nil
}

func (v *handoffView) Addr() net.Addr { return v.h.ln.Addr() }
