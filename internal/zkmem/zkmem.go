// Package zkmem is an in-memory ZooKeeper for simulations: one server with
// ZooKeeper's semantics for what snowflaked uses (versions, persistent,
// ephemeral and sequential znodes, sessions that survive a broken
// connection until they expire, multi, one-shot watches, sync), and faults
// injected per request: a request lost before it is applied, a request
// applied whose answer is lost, an answer delayed or held until the
// connection closes, a session expired by the server; and (faults.go) a
// session moved to another server, an answer delivered after its caller
// gave up, a server restored to an older snapshot.
//
// Like ZooKeeper and go-zookeeper, one connection's requests are processed
// in the order they were sent, and a request made while the connection is
// down waits for the reconnect and goes out then (its caller may have given
// up: it is applied all the same).
//
// What it does not model: more than one server (sync is a no-op and no read
// is ever stale), ACLs (accepted, not enforced), the server's clamping of
// the session timeout (the timeout asked for is granted).
//
// Every timer is the time package's: inside a testing/synctest bubble the
// whole server runs in virtual time.
package zkmem

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// Kind is what a fault does to one request.
type Kind int

// The kinds of fault.
const (
	// Pass: the request is applied and answered.
	Pass Kind = iota
	// Drop: the connection breaks before the request reaches the server;
	// it is not applied, the caller gets zk.ErrConnectionClosed.
	Drop
	// LoseAnswer: the request is applied, then the connection breaks; the
	// caller gets zk.ErrConnectionClosed.
	LoseAnswer
)

// Fault is the fate of one request: its kind, how long the server sits on
// it first (Delay; the request waits, and is then applied unless its
// connection broke meanwhile), and for Drop and LoseAnswer how long the
// connection stays down (Down; the session expires when that reaches the
// session timeout).
type Fault struct {
	Kind  Kind
	Delay time.Duration
	Down  time.Duration
	Hold  time.Duration // LateAnswer: how long the answer is held
}

// Request names one request for an Injector.
type Request struct {
	Session int64
	Op      string // "get", "exists", "children", "create", "set", "delete", "multi", "sync", "auth"
	Path    string // "" for multi
}

// Injector decides the fate of each request; nil passes everything.
type Injector func(Request) Fault

// ErrRuntimeInconsistency is the error of a multi's ops after the one that
// failed (ZooKeeper's ZRUNTIMEINCONSISTENCY).
var ErrRuntimeInconsistency = errors.New("zk: runtime inconsistency (an earlier op of the multi failed)")

// DefaultDown is how long a connection stays down after a fault that does
// not say.
const DefaultDown = 100 * time.Millisecond

type znode struct {
	data     []byte
	version  int32
	cversion int32
	czxid    int64
	mzxid    int64
	pzxid    int64
	owner    int64 // ephemeral owner session, 0 when persistent
	children map[string]struct{}
}

// Server is the in-memory ZooKeeper. Its methods are safe for concurrent
// use.
type Server struct {
	mu       sync.Mutex
	nodes    map[string]*znode
	zxid     int64
	nextSess int64
	sessions map[int64]*Conn // live sessions, by ID
	inject   Injector
	watches  map[watchKey][]*watch
	requests int64
}

type watchKey struct {
	path     string
	children bool
}

type watch struct {
	conn *Conn
	ch   chan zk.Event
}

// New returns a server holding only "/".
func New() *Server {
	return &Server{
		nodes:    map[string]*znode{"/": {children: map[string]struct{}{}}},
		nextSess: 0x5e55_0000,
		sessions: map[int64]*Conn{},
		watches:  map[watchKey][]*watch{},
	}
}

// SetInjector sets the fault injector for every request from now on.
func (s *Server) SetInjector(f Injector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inject = f
}

// Requests counts the requests the server has seen.
func (s *Server) Requests() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Dial is a zkconn.Dialer: a new client whose session starts at once.
func (s *Server) Dial(_ []string, opt zkconn.Options) (zkconn.Conn, error) {
	return s.Connect(opt), nil
}

// Connect opens a client with a session.
func (s *Server) Connect(opt zkconn.Options) *Conn {
	timeout := opt.SessionTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	c := &Conn{srv: s, timeout: timeout, onEvent: opt.OnEvent, gone: make(chan struct{})}
	s.mu.Lock()
	c.newSessionLocked()
	s.mu.Unlock()
	c.emit(zk.StateConnected)
	c.emit(zk.StateHasSession)
	return c
}

// Expire ends a session as the server would after its timeout: its
// ephemeral znodes go and its client learns it at once (zk.StateExpired),
// then starts a new session after DefaultDown.
func (s *Server) Expire(session int64) {
	s.mu.Lock()
	c := s.sessions[session]
	if c == nil {
		s.mu.Unlock()
		return
	}
	c.expireLocked()
	c.state = zk.StateExpired
	c.gen++
	gen := c.gen
	if c.up == nil {
		c.up = make(chan struct{})
	}
	s.mu.Unlock()
	c.emit(zk.StateExpired)
	time.AfterFunc(DefaultDown, func() { c.reconnect(gen) })
}

// Get returns a znode's data as the server holds it (no faults), for
// checkers.
func (s *Server) Get(p string) ([]byte, int32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[p]
	if n == nil {
		return nil, 0, false
	}
	return slices.Clone(n.data), n.version, true
}

// Children lists a znode's children as the server holds them (sorted, no
// faults), for checkers.
func (s *Server) Children(p string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[p]
	if n == nil {
		return nil
	}
	return sortedKeys(n.children)
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (s *Server) statLocked(n *znode) *zk.Stat {
	return &zk.Stat{Czxid: n.czxid, Mzxid: n.mzxid, Pzxid: n.pzxid, Version: n.version, Cversion: n.cversion,
		EphemeralOwner: n.owner, DataLength: int32(len(n.data)), NumChildren: int32(len(n.children))}
}

// fire delivers the watches of key with event type t; called with mu held.
func (s *Server) fireLocked(key watchKey, t zk.EventType) {
	for _, w := range s.watches[key] {
		w.ch <- zk.Event{Type: t, Path: key.path, State: zk.StateHasSession}
	}
	delete(s.watches, key)
}

func (s *Server) addWatchLocked(c *Conn, key watchKey) <-chan zk.Event {
	ch := make(chan zk.Event, 1)
	s.watches[key] = append(s.watches[key], &watch{c, ch})
	return ch
}

// dropWatchesLocked ends the watches a client set (its session is gone).
func (s *Server) dropWatchesLocked(c *Conn) {
	for key, ws := range s.watches {
		kept := ws[:0]
		for _, w := range ws {
			if w.conn == c {
				w.ch <- zk.Event{Type: zk.EventNotWatching, Path: key.path, State: zk.StateExpired, Err: zk.ErrSessionExpired}
				continue
			}
			kept = append(kept, w)
		}
		if len(kept) == 0 {
			delete(s.watches, key)
		} else {
			s.watches[key] = kept
		}
	}
}

func checkPath(p string) error {
	if p == "" || p[0] != '/' || (p != "/" && strings.HasSuffix(p, "/")) || strings.Contains(p, "//") {
		return fmt.Errorf("%w: %q", zk.ErrInvalidPath, p)
	}
	return nil
}

// tree is the mutable view an operation works on: the server's nodes, or a
// copy for a multi that may fail.
type tree struct {
	s       *Server
	nodes   map[string]*znode
	events  []pendingEvent
	cloned  map[string]bool
	isMulti bool
}

type pendingEvent struct {
	key watchKey
	t   zk.EventType
}

func (t *tree) node(p string) *znode { return t.nodes[p] }

// writable returns p's node, copied first when t is a multi's scratch tree.
func (t *tree) writable(p string) *znode {
	n := t.nodes[p]
	if n == nil || !t.isMulti || t.cloned[p] {
		return n
	}
	cp := *n
	cp.children = make(map[string]struct{}, len(n.children))
	for k := range n.children {
		cp.children[k] = struct{}{}
	}
	t.nodes[p] = &cp
	t.cloned[p] = true
	return &cp
}

func (t *tree) create(p string, data []byte, flags int32, owner int64) (string, error) {
	if err := checkPath(p); err != nil || p == "/" {
		return "", fmt.Errorf("%w: %q", zk.ErrInvalidPath, p)
	}
	if flags&^(zk.FlagEphemeral|zk.FlagSequence) != 0 {
		return "", fmt.Errorf("%w: flags %d", zk.ErrBadArguments, flags)
	}
	parentPath := path.Dir(p)
	parent := t.node(parentPath)
	if parent == nil {
		return "", zk.ErrNoNode
	}
	if parent.owner != 0 {
		return "", zk.ErrNoChildrenForEphemerals
	}
	if flags&zk.FlagSequence != 0 {
		p = fmt.Sprintf("%s%010d", p, parent.cversion)
	}
	if t.node(p) != nil {
		return "", zk.ErrNodeExists
	}
	t.s.zxid++
	n := &znode{data: slices.Clone(data), czxid: t.s.zxid, mzxid: t.s.zxid, pzxid: t.s.zxid, children: map[string]struct{}{}}
	if flags&zk.FlagEphemeral != 0 {
		n.owner = owner
	}
	t.nodes[p] = n
	if t.isMulti {
		t.cloned[p] = true
	}
	parent = t.writable(parentPath)
	parent.children[path.Base(p)] = struct{}{}
	parent.cversion++
	parent.pzxid = t.s.zxid
	t.events = append(t.events, pendingEvent{watchKey{p, false}, zk.EventNodeCreated}, pendingEvent{watchKey{parentPath, true}, zk.EventNodeChildrenChanged})
	return p, nil
}

func (t *tree) set(p string, data []byte, version int32) (*zk.Stat, error) {
	n := t.node(p)
	if n == nil {
		return nil, zk.ErrNoNode
	}
	if version != -1 && version != n.version {
		return nil, zk.ErrBadVersion
	}
	n = t.writable(p)
	t.s.zxid++
	n.data = slices.Clone(data)
	n.version++
	n.mzxid = t.s.zxid
	t.events = append(t.events, pendingEvent{watchKey{p, false}, zk.EventNodeDataChanged})
	return t.s.statLocked(n), nil
}

func (t *tree) delete(p string, version int32) error {
	n := t.node(p)
	if n == nil || p == "/" {
		return zk.ErrNoNode
	}
	if version != -1 && version != n.version {
		return zk.ErrBadVersion
	}
	if len(n.children) > 0 {
		return zk.ErrNotEmpty
	}
	t.s.zxid++
	delete(t.nodes, p)
	parentPath := path.Dir(p)
	parent := t.writable(parentPath)
	delete(parent.children, path.Base(p))
	parent.cversion++
	parent.pzxid = t.s.zxid
	t.events = append(t.events, pendingEvent{watchKey{p, false}, zk.EventNodeDeleted}, pendingEvent{watchKey{p, true}, zk.EventNodeDeleted},
		pendingEvent{watchKey{parentPath, true}, zk.EventNodeChildrenChanged})
	return nil
}

func (t *tree) check(p string, version int32) error {
	n := t.node(p)
	if n == nil {
		return zk.ErrNoNode
	}
	if version != -1 && version != n.version {
		return zk.ErrBadVersion
	}
	return nil
}

// commitLocked fires the watches of what t changed.
func (t *tree) commitLocked() {
	for _, e := range t.events {
		t.s.fireLocked(e.key, e.t)
	}
}
