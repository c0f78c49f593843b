package zkmem

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
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
	tail    chan struct{}  // closed once the last request sent is processed
	up      chan struct{}  // while disconnected: closed at the reconnect
	dropped []droppedWatch // watches of an ended session the client has not ended yet

	movedGen int64 // guarded by srv.mu: the connection (gen) whose session moved (SessionMoved)

	label    string   // guarded by srv.mu: the client's name, for an Injector (SetLabel)
	sessions int      // guarded by srv.mu: the sessions this client has had
	digests  []string // guarded by srv.mu: the digest IDs AddAuth gave (user:hash)
}

type droppedWatch struct {
	w   *watch
	key watchKey
}

var _ zkconn.Conn = (*Conn)(nil)

func (c *Conn) newSessionLocked() {
	c.srv.nextSess++
	c.session = c.srv.nextSess
	c.sessions++
	c.srv.opened++
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

// emitLocked queues session events for c's callback.
func (c *Conn) emitLocked(states ...zk.State) {
	if c.onEvent == nil {
		return
	}
	for _, st := range states {
		ev := zk.Event{Type: zk.EventSession, State: st}
		c.srv.outbox = append(c.srv.outbox, func() { c.onEvent(ev) })
	}
}

// invalidateLocked ends the watches of c's ended session as go-zookeeper
// does once it learns why: a zk.EventNotWatching with err, to the callback
// and the channel, which then closes.
func (c *Conn) invalidateLocked(err error) {
	c.srv.dropWatchesLocked(c) // the server may not know yet (a close)
	var keys []watchKey        // one event per path and kind, to each of its watches
	byKey := map[watchKey][]*watch{}
	for _, d := range c.dropped {
		if byKey[d.key] == nil {
			keys = append(keys, d.key)
		}
		byKey[d.key] = append(byKey[d.key], d.w)
	}
	for _, k := range keys {
		c.sendLocked(zk.Event{Type: zk.EventNotWatching, State: zk.StateDisconnected, Path: k.path, Err: err}, byKey[k]...)
	}
	c.dropped = nil
}

// breakLocked takes the connection down for d; the session expires on the
// server when d reaches the session timeout. It returns what to run once
// mu is released.
func (c *Conn) breakLocked(d time.Duration) func() {
	if c.closed || c.state != zk.StateHasSession {
		return func() {}
	}
	if d <= 0 {
		d = defaultDown
	}
	c.state = zk.StateDisconnected
	c.gen++
	gen := c.gen
	c.downAt = time.Now()
	c.up = make(chan struct{})
	c.emitLocked(zk.StateDisconnected)
	return func() {
		if d >= c.timeout {
			clock.AfterFunc(c.srv.timers(), c.timeout, func() {
				c.srv.mu.Lock()
				if c.gen == gen && !c.closed {
					c.expireLocked()
				}
				c.srv.unlock()
			})
		}
		clock.AfterFunc(c.srv.timers(), d, func() { c.reconnect(gen) })
	}
}

// reconnect ends the break numbered gen with go-zookeeper's events: the
// old session when it lives, else the expiry (its watches end), a new
// connection and a new session.
func (c *Conn) reconnect(gen int64) {
	s := c.srv
	s.mu.Lock()
	if c.closed || c.gen != gen {
		s.mu.Unlock()
		return
	}
	c.emitLocked(zk.StateConnecting, zk.StateConnected)
	if s.sessions[c.session] != c {
		c.emitLocked(zk.StateExpired)
		c.invalidateLocked(zk.ErrSessionExpired)
		c.emitLocked(zk.StateDisconnected, zk.StateConnecting, zk.StateConnected)
		c.newSessionLocked()
	} else {
		c.state = zk.StateHasSession
		c.gen++
	}
	c.emitLocked(zk.StateHasSession)
	if c.up != nil {
		close(c.up) // requests made while disconnected go out now
		c.up = nil
	}
	s.unlock()
}

// Vanish is a kill -9 of the client's process: the client answers nothing
// more (every call fails with zk.ErrConnectionClosed, held requests are
// never applied, its watches end as at a close), and the server expires
// its session after the session timeout.
func (c *Conn) Vanish() {
	if c.end(false) {
		clock.AfterFunc(c.srv.timers(), c.timeout, func() {
			c.srv.mu.Lock()
			c.expireLocked()
			c.srv.unlock()
		})
	}
}

// Close ends the session at once (a clean close). As go-zookeeper's, the
// client then reports zk.StateDisconnected, ends its watches with
// zk.ErrClosing, and fails every call with zk.ErrConnectionClosed.
func (c *Conn) Close() {
	c.end(true)
}

// end closes the client to its caller, and when clean ends the session on
// the server; it reports false when it was closed already.
func (c *Conn) end(clean bool) bool {
	c.srv.mu.Lock()
	if c.closed {
		c.srv.mu.Unlock()
		return false
	}
	c.closed = true
	c.gen++
	close(c.gone)
	if clean {
		c.expireLocked()
	}
	if c.state == zk.StateHasSession {
		c.emitLocked(zk.StateDisconnected)
	}
	c.invalidateLocked(zk.ErrClosing)
	c.srv.unlock()
	return true
}

// SetLabel names the client for an Injector (Request.Client): a name its
// creator chose, which does not depend on which client connected first, as
// session IDs do.
func (c *Conn) SetLabel(label string) {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	c.label = label
}

// Label is the client's label (SetLabel) and which of its sessions it
// has now, from 1.
func (c *Conn) Label() (string, int) {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	return c.label, c.sessions
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
		return zk.ErrConnectionClosed
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
			return zk.ErrConnectionClosed
		}
		if !await(up, c.gone) {
			return zk.ErrConnectionClosed
		}
		s.mu.Lock()
		if c.closed {
			s.mu.Unlock()
			return zk.ErrConnectionClosed
		}
	}
	s.requests++
	gen, inject := c.gen, s.inject
	f := Fault{}
	if inject != nil {
		f = inject(Request{Session: c.session, Client: c.label, Renewal: c.sessions, Op: op, Path: p})
	}
	s.mu.Unlock()
	if f.Delay > 0 {
		t := clock.NewTimer(s.timers(), f.Delay)
		defer t.Stop()
		if !await(t.C, c.gone) {
			return zk.ErrConnectionClosed
		}
	}
	if prev != nil && !await(prev, c.gone) {
		return zk.ErrConnectionClosed
	}
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return zk.ErrConnectionClosed
	}
	if c.gen != gen {
		err := c.lostLocked(gen)
		s.mu.Unlock()
		return err
	}
	if f.Kind == Drop || f.Kind == SessionMoved {
		err := c.refuseLocked(f.Kind, gen)
		after := c.breakLocked(f.Down)
		s.unlock()
		after()
		return err
	}
	err := apply(&tree{s: s, nodes: s.nodes})
	if f.Kind == LoseAnswer {
		after := c.breakLocked(f.Down)
		s.unlock()
		after()
		return zk.ErrConnectionClosed
	}
	s.unlock()
	if f.Kind == LateAnswer {
		return c.holdAnswer(f.Hold, gen, err)
	}
	return err
}

// statOf is the Stat go-zookeeper returns with err: none when the
// connection closed, a zero one for the server's errors.
func statOf(st *zk.Stat, err error) *zk.Stat {
	switch {
	case errors.Is(err, zk.ErrConnectionClosed):
		return nil
	case st == nil:
		return &zk.Stat{}
	}
	return st
}

// await waits for ch, or reports false when gone closes first.
func await[T any](ch <-chan T, gone <-chan struct{}) bool {
	select {
	case <-gone: // a closed client wins (select picks at random)
		return false
	default:
	}
	select {
	case <-ch:
		return true
	case <-gone:
		return false
	}
}

// Get reads a znode.
func (c *Conn) Get(p string) (data []byte, st *zk.Stat, err error) {
	if err := checkPath(p, false); err != nil {
		return nil, nil, err
	}
	err = c.do("get", p, func(t *tree) error {
		n := t.node(p)
		if n == nil {
			return zk.ErrNoNode
		}
		data, st = slices.Clone(n.data), t.s.statLocked(n)
		return nil
	})
	return data, statOf(st, err), err
}

// GetACL reads a znode's ACL, as it was created (the in-memory server
// keeps ACLs but does not enforce them; the root's is world:anyone, all).
// As ZooKeeper does, digest IDs read as "user:x" unless the client added
// the digest of an entry that grants admin.
func (c *Conn) GetACL(p string) (acl []zk.ACL, st *zk.Stat, err error) {
	if err := checkPath(p, false); err != nil {
		return nil, nil, err
	}
	err = c.do("getacl", p, func(t *tree) error {
		n := t.node(p)
		if n == nil {
			return zk.ErrNoNode
		}
		acl, st = slices.Clone(n.acl), t.s.statLocked(n)
		if p == "/" && acl == nil {
			acl = zk.WorldACL(zk.PermAll)
		}
		admin := slices.ContainsFunc(acl, func(a zk.ACL) bool {
			return a.Scheme == "digest" && a.Perms&zk.PermAdmin != 0 && slices.Contains(c.digests, a.ID)
		})
		for i, a := range acl {
			if user, _, ok := strings.Cut(a.ID, ":"); ok && a.Scheme == "digest" && !admin {
				acl[i].ID = user + ":x"
			}
		}
		return nil
	})
	return acl, statOf(st, err), err
}

// Exists tells whether a znode exists.
func (c *Conn) Exists(p string) (ok bool, st *zk.Stat, err error) {
	if err := checkPath(p, false); err != nil {
		return false, nil, err
	}
	err = c.do("exists", p, func(t *tree) error {
		if n := t.node(p); n != nil {
			ok, st = true, t.s.statLocked(n)
		}
		return nil
	})
	return ok, statOf(st, err), err
}

// ExistsW is Exists with a watch on the znode's next change.
func (c *Conn) ExistsW(p string) (ok bool, st *zk.Stat, ch <-chan zk.Event, err error) {
	if err := checkPath(p, false); err != nil {
		return false, nil, nil, err
	}
	err = c.do("exists", p, func(t *tree) error {
		if n := t.node(p); n != nil {
			ok, st = true, t.s.statLocked(n)
		}
		ch = t.s.addWatchLocked(c, watchKey{p, false})
		return nil
	})
	if err != nil {
		return false, nil, nil, err
	}
	return ok, statOf(st, nil), ch, nil
}

// Children lists a znode's children in a ZooKeeper server's order.
func (c *Conn) Children(p string) (names []string, st *zk.Stat, err error) {
	if err := checkPath(p, false); err != nil {
		return nil, nil, err
	}
	err = c.do("children", p, func(t *tree) error {
		n := t.node(p)
		if n == nil {
			return zk.ErrNoNode
		}
		names, st = n.hashOrder(), t.s.statLocked(n)
		return nil
	})
	return names, statOf(st, err), err
}

// ChildrenW is Children with a watch on the next change of the list.
func (c *Conn) ChildrenW(p string) (names []string, st *zk.Stat, ch <-chan zk.Event, err error) {
	if err := checkPath(p, false); err != nil {
		return nil, nil, nil, err
	}
	err = c.do("children", p, func(t *tree) error {
		n := t.node(p)
		if n == nil {
			return zk.ErrNoNode
		}
		names, st = n.hashOrder(), t.s.statLocked(n)
		ch = t.s.addWatchLocked(c, watchKey{p, true})
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return names, st, ch, nil
}

// Create creates a znode; ACLs are accepted and not enforced.
func (c *Conn) Create(p string, data []byte, flags int32, acl []zk.ACL) (created string, err error) {
	if err := checkPath(p, flags&zk.FlagSequence != 0); err != nil {
		return "", err
	}
	err = c.do("create", p, func(t *tree) error {
		var err error
		created, err = t.create(p, data, flags, c.session, acl)
		if err == nil {
			t.commitLocked()
		}
		return err
	})
	return created, err
}

// Set writes a znode's data when its version matches (-1: any).
func (c *Conn) Set(p string, data []byte, version int32) (st *zk.Stat, err error) {
	if err := checkPath(p, false); err != nil {
		return nil, err
	}
	err = c.do("set", p, func(t *tree) error {
		var err error
		st, err = t.set(p, data, version)
		if err == nil {
			t.commitLocked()
		}
		return err
	})
	return statOf(st, err), err
}

// Delete removes a znode when its version matches (-1: any).
func (c *Conn) Delete(p string, version int32) error {
	if err := checkPath(p, false); err != nil {
		return err
	}
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
				resp[i].String, err = t.create(o.Path, o.Data, o.Flags, c.session, o.Acl)
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
					resp[i] = zk.MultiResponse{Error: errRuntimeInconsistency}
				}
			}
			return resp[failed].Error
		}
		live.s.nodes = t.nodes
		t.commitLocked()
		return nil
	})
	if errors.Is(err, zk.ErrConnectionClosed) {
		resp = nil // as go-zookeeper: no answer, no responses
	}
	return resp, err
}

// Sync answers once the server caught up: at once, one server.
func (c *Conn) Sync(p string) (string, error) {
	if err := checkPath(p, false); err != nil {
		return "", err
	}
	if err := c.do("sync", p, func(*tree) error { return nil }); err != nil {
		return "", err
	}
	return p, nil
}

// AddAuth is accepted; ACLs are not enforced.
func (c *Conn) AddAuth(scheme string, auth []byte) error {
	return c.do("auth", "", func(*tree) error {
		if user, pass, ok := strings.Cut(string(auth), ":"); ok && scheme == "digest" {
			c.digests = append(c.digests, zk.DigestACL(zk.PermAll, user, pass)[0].ID)
		}
		return nil
	})
}
