package zkmem

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// Conn is one client of the in-memory server (a zkconn.Conn). Its
// connection breaks on Drop and LoseAnswer faults and comes back by
// itself; its session survives a break shorter than the session timeout.
type Conn struct {
	srv     *Server
	timeout time.Duration
	onEvent func(zk.Event)
	gone    chan struct{} // closed by Close and Vanish: held requests give up

	// guarded by srv.mu
	session int64
	state   zk.State
	gen     int64 // counts connections: a request held across a break is not applied
	closed  bool
	downAt  time.Time
	tail    chan struct{} // closed once the last request sent is processed
	up      chan struct{} // while disconnected: closed at the reconnect

	movedGen int64 // guarded by srv.mu: the connection (gen) whose session moved (SessionMoved)
}

var _ zkconn.Conn = (*Conn)(nil)

func (c *Conn) newSessionLocked() {
	c.srv.nextSess++
	c.session = c.srv.nextSess
	c.srv.sessions[c.session] = c
	c.state = zk.StateHasSession
	c.gen++
}

// expireLocked ends c's session on the server: its ephemerals and watches
// go.
func (c *Conn) expireLocked() {
	s := c.srv
	if s.sessions[c.session] != c {
		return
	}
	delete(s.sessions, c.session)
	t := &tree{s: s, nodes: s.nodes}
	var own []string
	for p, n := range s.nodes {
		if n.owner == c.session {
			own = append(own, p)
		}
	}
	slices.Sort(own)
	for _, p := range own {
		_ = t.delete(p, -1)
	}
	t.commitLocked()
	s.dropWatchesLocked(c)
}

func (c *Conn) emit(st zk.State) {
	if c.onEvent != nil {
		c.onEvent(zk.Event{Type: zk.EventSession, State: st})
	}
}

// breakLocked takes the connection down for d; the session expires on the
// server when d reaches the session timeout. It returns what to run once
// mu is released.
func (c *Conn) breakLocked(d time.Duration) func() {
	if c.closed || c.state != zk.StateHasSession {
		return func() {}
	}
	if d <= 0 {
		d = DefaultDown
	}
	c.state = zk.StateDisconnected
	c.gen++
	gen := c.gen
	c.downAt = time.Now()
	c.up = make(chan struct{})
	return func() {
		c.emit(zk.StateDisconnected)
		if d >= c.timeout {
			time.AfterFunc(c.timeout, func() {
				c.srv.mu.Lock()
				if c.gen == gen && !c.closed {
					c.expireLocked()
				}
				c.srv.mu.Unlock()
			})
		}
		time.AfterFunc(d, func() { c.reconnect(gen) })
	}
}

// reconnect ends the break numbered gen: the old session when it lives,
// else (after zk.StateExpired) a new one.
func (c *Conn) reconnect(gen int64) {
	s := c.srv
	s.mu.Lock()
	if c.closed || c.gen != gen {
		s.mu.Unlock()
		return
	}
	expired := s.sessions[c.session] != c
	if expired {
		c.newSessionLocked()
	} else {
		c.state = zk.StateHasSession
		c.gen++
	}
	if c.up != nil {
		close(c.up) // requests made while disconnected go out now
		c.up = nil
	}
	s.mu.Unlock()
	if expired {
		c.emit(zk.StateExpired)
	}
	c.emit(zk.StateHasSession)
}

// Vanish is a kill -9 of the client's process: the client answers nothing
// more (every call fails with zk.ErrClosing, held requests are never
// applied), and the server expires its session after the session timeout.
func (c *Conn) Vanish() {
	if c.end() {
		time.AfterFunc(c.timeout, func() {
			c.srv.mu.Lock()
			c.expireLocked()
			c.srv.mu.Unlock()
		})
	}
}

// Close ends the session at once (a clean close).
func (c *Conn) Close() {
	if c.end() {
		c.srv.mu.Lock()
		c.expireLocked()
		c.srv.mu.Unlock()
	}
}

// end closes the client to its caller; it reports false when it was closed
// already.
func (c *Conn) end() bool {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	if c.closed {
		return false
	}
	c.closed = true
	c.gen++
	close(c.gone)
	return true
}

// SessionID is the current session's ID.
func (c *Conn) SessionID() int64 {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	return c.session
}

// State is the connection's state.
func (c *Conn) State() zk.State {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	if c.closed {
		return zk.StateDisconnected
	}
	return c.state
}

// do runs one request through the injector: op runs with the server's lock
// held, on the live tree, unless the fault drops it or the connection
// broke while the server sat on it.
func (c *Conn) do(op, p string, apply func(t *tree) error) error {
	s := c.srv
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return zk.ErrClosing
	}
	// One connection's requests are processed in the order they were sent
	// (ZooKeeper's FIFO client order): this one waits for the one before
	// it, and the next for this one, whatever their delays.
	prev, mine := c.tail, make(chan struct{})
	c.tail = mine
	defer close(mine)
	// A request made while disconnected waits for the reconnect, as
	// go-zookeeper queues it, and goes out then, after the requests queued
	// before it (its caller may have given up long before: it is applied
	// all the same).
	for c.state != zk.StateHasSession {
		up := c.up
		s.mu.Unlock()
		if up == nil {
			return zk.ErrConnectionClosed
		}
		if prev != nil && !await(prev, c.gone) {
			return zk.ErrClosing
		}
		if !await(up, c.gone) {
			return zk.ErrClosing
		}
		s.mu.Lock()
		if c.closed {
			s.mu.Unlock()
			return zk.ErrClosing
		}
	}
	s.requests++
	gen, inject := c.gen, s.inject
	f := Fault{}
	if inject != nil {
		f = inject(Request{Session: c.session, Op: op, Path: p})
	}
	s.mu.Unlock()
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		if !await(t.C, c.gone) {
			return zk.ErrClosing
		}
	}
	if prev != nil && !await(prev, c.gone) {
		return zk.ErrClosing
	}
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return zk.ErrClosing
	}
	if c.gen != gen {
		err := c.lostLocked(gen)
		s.mu.Unlock()
		return err
	}
	if f.Kind == Drop || f.Kind == SessionMoved {
		err := c.refuseLocked(f.Kind, gen)
		after := c.breakLocked(f.Down)
		s.mu.Unlock()
		after()
		return err
	}
	err := apply(&tree{s: s, nodes: s.nodes})
	if f.Kind == LoseAnswer {
		after := c.breakLocked(f.Down)
		s.mu.Unlock()
		after()
		return zk.ErrConnectionClosed
	}
	s.mu.Unlock()
	if f.Kind == LateAnswer {
		return c.holdAnswer(f.Hold, gen, err)
	}
	return err
}

// await waits for ch, or reports false when gone closes first.
func await[T any](ch <-chan T, gone <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-gone:
		return false
	}
}

// Get reads a znode.
func (c *Conn) Get(p string) (data []byte, st *zk.Stat, err error) {
	err = c.do("get", p, func(t *tree) error {
		n := t.node(p)
		if n == nil {
			return zk.ErrNoNode
		}
		data, st = slices.Clone(n.data), t.s.statLocked(n)
		return nil
	})
	return data, st, err
}

// Exists tells whether a znode exists.
func (c *Conn) Exists(p string) (ok bool, st *zk.Stat, err error) {
	err = c.do("exists", p, func(t *tree) error {
		if n := t.node(p); n != nil {
			ok, st = true, t.s.statLocked(n)
		}
		return nil
	})
	return ok, st, err
}

// ExistsW is Exists with a watch on the znode's next change.
func (c *Conn) ExistsW(p string) (ok bool, st *zk.Stat, ch <-chan zk.Event, err error) {
	err = c.do("exists", p, func(t *tree) error {
		if n := t.node(p); n != nil {
			ok, st = true, t.s.statLocked(n)
		}
		ch = t.s.addWatchLocked(c, watchKey{p, false})
		return nil
	})
	return ok, st, ch, err
}

// Children lists a znode's children (sorted).
func (c *Conn) Children(p string) (names []string, st *zk.Stat, err error) {
	err = c.do("children", p, func(t *tree) error {
		n := t.node(p)
		if n == nil {
			return zk.ErrNoNode
		}
		names, st = sortedKeys(n.children), t.s.statLocked(n)
		return nil
	})
	return names, st, err
}

// ChildrenW is Children with a watch on the next change of the list.
func (c *Conn) ChildrenW(p string) (names []string, st *zk.Stat, ch <-chan zk.Event, err error) {
	err = c.do("children", p, func(t *tree) error {
		n := t.node(p)
		if n == nil {
			return zk.ErrNoNode
		}
		names, st = sortedKeys(n.children), t.s.statLocked(n)
		ch = t.s.addWatchLocked(c, watchKey{p, true})
		return nil
	})
	return names, st, ch, err
}

// Create creates a znode; ACLs are accepted and not enforced.
func (c *Conn) Create(p string, data []byte, flags int32, _ []zk.ACL) (created string, err error) {
	err = c.do("create", p, func(t *tree) error {
		var err error
		created, err = t.create(p, data, flags, c.session)
		if err == nil {
			t.commitLocked()
		}
		return err
	})
	return created, err
}

// Set writes a znode's data when its version matches (-1: any).
func (c *Conn) Set(p string, data []byte, version int32) (st *zk.Stat, err error) {
	err = c.do("set", p, func(t *tree) error {
		var err error
		st, err = t.set(p, data, version)
		if err == nil {
			t.commitLocked()
		}
		return err
	})
	return st, err
}

// Delete removes a znode when its version matches (-1: any).
func (c *Conn) Delete(p string, version int32) error {
	return c.do("delete", p, func(t *tree) error {
		err := t.delete(p, version)
		if err == nil {
			t.commitLocked()
		}
		return err
	})
}

// Multi applies ops all or none.
func (c *Conn) Multi(ops ...any) (resp []zk.MultiResponse, err error) {
	err = c.do("multi", "", func(live *tree) error {
		t := &tree{s: live.s, nodes: maps.Clone(live.nodes), cloned: map[string]bool{}, isMulti: true}
		resp = make([]zk.MultiResponse, len(ops))
		failed := -1
		for i, op := range ops {
			var err error
			switch o := op.(type) {
			case *zk.CreateRequest:
				resp[i].String, err = t.create(o.Path, o.Data, o.Flags, c.session)
			case *zk.SetDataRequest:
				resp[i].Stat, err = t.set(o.Path, o.Data, o.Version)
			case *zk.DeleteRequest:
				err = t.delete(o.Path, o.Version)
			case *zk.CheckVersionRequest:
				err = t.check(o.Path, o.Version)
			default:
				err = zk.ErrBadArguments
			}
			if err != nil {
				failed = i
				resp[i].Error = err
				break
			}
		}
		if failed >= 0 {
			for i := range resp {
				switch {
				case i < failed:
					resp[i] = zk.MultiResponse{}
				case i > failed:
					resp[i] = zk.MultiResponse{Error: ErrRuntimeInconsistency}
				}
			}
			return resp[failed].Error
		}
		live.s.nodes = t.nodes
		t.commitLocked()
		return nil
	})
	if errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrClosing) {
		resp = nil // as go-zookeeper: no answer, no responses
	}
	return resp, err
}

// Sync answers once the server caught up: at once, one server.
func (c *Conn) Sync(p string) (string, error) {
	return p, c.do("sync", p, func(*tree) error { return nil })
}

// AddAuth is accepted; ACLs are not enforced.
func (c *Conn) AddAuth(string, []byte) error {
	return c.do("auth", "", func(*tree) error { return nil })
}
