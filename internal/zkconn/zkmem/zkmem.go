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
// It answers as ZooKeeper 3.8 behind go-zookeeper v1.0.4 does, which
// differential_test.go checks against a real server: sequential suffixes
// count the children created (the parent's cversion counts deletes too), a
// multi is one zxid, failed reads and sets return a zero Stat, paths are
// checked as go-zookeeper checks them (and a multi's as the server does),
// children come in the server's HashSet order, a watch event comes in
// zk.StateSyncConnected, once per client, to the event callback too, and
// its channel closes after it; Close ends watches with zk.ErrClosing and
// every later call fails with zk.ErrConnectionClosed; session events are
// go-zookeeper's (Connecting, Connected, HasSession at connect and
// reconnect; Disconnected, Connecting, Connected, Expired, Disconnected,
// Connecting, Connected, HasSession around an expiry, when the watches of
// the old session end with zk.ErrSessionExpired).
//
// Like ZooKeeper and go-zookeeper, one connection's requests are processed
// in the order they were sent, and a request made while the connection is
// down waits for the reconnect and goes out then (its caller may have given
// up: it is applied all the same).
//
// What it does not model (docs/testing.md, "How faithful the in-memory
// ZooKeeper is"): more than one server (sync is a no-op and no read is ever
// stale), ACLs (accepted, not enforced), the server's clamping of the
// session timeout (the timeout asked for is granted), go-zookeeper failing
// a request queued while disconnected with zk.ErrNoServer, Ctime and Mtime.
//
// Every timer is the time package's: inside a testing/synctest bubble the
// whole server runs in virtual time.
package zkmem

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
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
	Client  string // the client's label (Conn.SetLabel), "" when none
	Renewal int    // which of the client's sessions, from 1 (a new one after each expiry)
	Op      string // "get", "exists", "children", "create", "set", "delete", "multi", "sync", "auth"
	Path    string // "" for multi
}

// Injector decides the fate of each request; nil passes everything.
type Injector func(Request) Fault

// errRuntimeInconsistency is the error of a multi's ops after the one that
// failed (ZooKeeper's ZRUNTIMEINCONSISTENCY), worded as go-zookeeper words
// an error code it does not know.
var errRuntimeInconsistency = errors.New("unknown error: -2")

// defaultDown is how long a connection stays down after a fault that does
// not say.
const defaultDown = 100 * time.Millisecond

type znode struct {
	data     []byte
	version  int32
	cversion int32
	czxid    int64
	mzxid    int64
	pzxid    int64
	owner    int64    // ephemeral owner session, 0 when persistent
	acl      []zk.ACL // as created (kept and read back, not enforced)
	// children maps each child to when it was added (a stamp that grows),
	// for ZooKeeper's listing order (see hashOrder).
	children map[string]uint64
	// seq counts the children ever created: the next sequential suffix
	// (ZooKeeper's cversion counts deletes too, the suffix does not).
	seq int32
	// table is the capacity of the Java HashMap that holds the children on
	// a ZooKeeper server (0 until the first child).
	table int
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
	opened   int64    // sessions started, expired and closed ones included
	stamp    uint64   // children's stamps
	outbox   []func() // deliveries to clients, run by unlock in order
	deliver  sync.Mutex
	sched    atomic.Pointer[clock.Schedule] // arms its timers (nil: they wait as asked)
}

// unlock releases mu, then makes the deliveries queued while it was held
// (events to callbacks and watch channels), in the order they were queued,
// as go-zookeeper delivers them from its one receiving goroutine. An event
// callback must not block (zkconn.Options): it must not call the Conn
// either, which may wait for mu meanwhile.
func (s *Server) unlock() {
	out := s.outbox
	s.outbox = nil
	if len(out) == 0 {
		s.mu.Unlock()
		return
	}
	s.deliver.Lock()
	s.mu.Unlock()
	defer s.deliver.Unlock()
	for _, f := range out {
		f()
	}
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
		nodes:    map[string]*znode{"/": {children: map[string]uint64{}}},
		nextSess: 0x5e55_0000,
		sessions: map[int64]*Conn{},
		watches:  map[watchKey][]*watch{},
	}
}

// SetSchedule arms the server's timers (delayed and held answers, breaks,
// session expiries) through sched from now on.
func (s *Server) SetSchedule(sched clock.Schedule) { s.sched.Store(&sched) }

// timers is the context the server arms its timers under.
func (s *Server) timers() context.Context {
	if p := s.sched.Load(); p != nil {
		return clock.WithSchedule(context.Background(), *p)
	}
	return context.Background()
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

// SessionsOpened counts the sessions the server has started: one per
// Connect, plus one per new session after an expiry.
func (s *Server) SessionsOpened() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened
}

// LiveSessions counts the sessions the server holds now (neither closed
// nor expired), as ZooKeeper's per-client connection limit counts them.
func (s *Server) LiveSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
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
	c.emitLocked(zk.StateConnecting, zk.StateConnected, zk.StateHasSession)
	s.unlock()
	return c
}

// Expire ends a session as the server does after its timeout, which it
// can only while the client is cut off: the client's connection breaks
// (zk.StateDisconnected), the session's ephemeral znodes go at once, and
// after defaultDown the client reconnects, learns of the expiry
// (zk.StateExpired; its watches end) and starts a new session.
func (s *Server) Expire(session int64) {
	s.mu.Lock()
	c := s.sessions[session]
	if c == nil {
		s.mu.Unlock()
		return
	}
	after := c.breakLocked(defaultDown)
	c.expireLocked()
	s.unlock()
	after()
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

func sortedKeys(m map[string]uint64) []string {
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

// fire queues the delivery of event type t on path to the watches of
// keys; called with mu held. As ZooKeeper, a client gets one event however
// many of its watches it triggers (go-zookeeper hands it to its callback
// once and to each of those watches' channels, which then close).
func (s *Server) fireLocked(t zk.EventType, path string, keys ...watchKey) {
	var conns []*Conn
	byConn := map[*Conn][]*watch{}
	for _, key := range keys {
		for _, w := range s.watches[key] {
			if byConn[w.conn] == nil {
				conns = append(conns, w.conn)
			}
			byConn[w.conn] = append(byConn[w.conn], w)
		}
		delete(s.watches, key)
	}
	for _, c := range conns {
		c.sendLocked(zk.Event{Type: t, Path: path, State: zk.StateSyncConnected}, byConn[c]...)
	}
}

// sendLocked queues ev for c's callback and the channels of ws, which then
// close.
func (c *Conn) sendLocked(ev zk.Event, ws ...*watch) {
	c.srv.outbox = append(c.srv.outbox, func() {
		if c.onEvent != nil {
			c.onEvent(ev)
		}
		for _, w := range ws {
			w.ch <- ev
			close(w.ch)
		}
	})
}

func (s *Server) addWatchLocked(c *Conn, key watchKey) <-chan zk.Event {
	ch := make(chan zk.Event, 1)
	s.watches[key] = append(s.watches[key], &watch{c, ch})
	return ch
}

// dropWatchesLocked takes the watches a client set off the server (its
// session is gone); the client ends them when it learns (invalidateLocked).
func (s *Server) dropWatchesLocked(c *Conn) {
	for key, ws := range s.watches {
		kept := ws[:0]
		for _, w := range ws {
			if w.conn == c {
				c.dropped = append(c.dropped, droppedWatch{w, key})
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

// checkPath is go-zookeeper v1.0.4's validatePath: the client refuses such
// a path before sending anything (zk.ErrInvalidPath). A sequential
// create's path may end in "/" (the server appends the suffix).
func checkPath(p string, sequential bool) error {
	if p == "" || p[0] != '/' {
		return zk.ErrInvalidPath
	}
	n := len(p)
	if n == 1 {
		return nil
	}
	if !sequential && p[n-1] == '/' {
		return zk.ErrInvalidPath
	}
	for i, w := 1, 0; i < n; i += w {
		r, width := utf8.DecodeRuneInString(p[i:])
		switch {
		case r == '\u0000':
			return zk.ErrInvalidPath
		case r == '/':
			if last, _ := utf8.DecodeLastRuneInString(p[:i]); last == '/' {
				return zk.ErrInvalidPath
			}
		case r == '.':
			last, lastWidth := utf8.DecodeLastRuneInString(p[:i])
			if last == '.' {
				last, _ = utf8.DecodeLastRuneInString(p[:i-lastWidth])
			}
			if last == '/' {
				if i+1 == n {
					return zk.ErrInvalidPath
				}
				if next, _ := utf8.DecodeRuneInString(p[i+w:]); next == '/' {
					return zk.ErrInvalidPath
				}
			}
		case r >= '\u0000' && r <= '\u001f', r >= '\u007f' && r <= '\u009f',
			r >= '\uf000' && r <= '\uf8ff', r >= '\ufff0' && r < '\uffff':
			return zk.ErrInvalidPath
		}
		w = width
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
	zxid    int64 // a multi's one zxid, once it has one
}

// nextZxid is the zxid of the next change: a new one per request, one for
// a whole multi (ZooKeeper commits a multi as one transaction).
func (t *tree) nextZxid() int64 {
	if !t.isMulti || t.zxid == 0 {
		t.s.zxid++
		t.zxid = t.s.zxid
	}
	return t.zxid
}

type pendingEvent struct {
	t    zk.EventType
	path string
	keys []watchKey
}

func (t *tree) node(p string) *znode { return t.nodes[p] }

// writable returns p's node, copied first when t is a multi's scratch tree.
func (t *tree) writable(p string) *znode {
	n := t.nodes[p]
	if n == nil || !t.isMulti || t.cloned[p] {
		return n
	}
	cp := *n
	cp.children = maps.Clone(n.children)
	t.nodes[p] = &cp
	t.cloned[p] = true
	return &cp
}

func (t *tree) create(p string, data []byte, flags int32, owner int64, acl []zk.ACL) (string, error) {
	if flags&^(zk.FlagEphemeral|zk.FlagSequence) != 0 {
		return "", zk.ErrBadArguments
	}
	// The server checks a path the client let through (a multi's) in
	// ZooKeeper's order: the parent, then the whole path.
	slash := strings.LastIndexByte(p, '/')
	if slash < 0 || strings.IndexByte(p, 0) >= 0 {
		return "", zk.ErrBadArguments
	}
	parentPath := p[:slash]
	if parentPath == "" {
		parentPath = "/"
	}
	parent := t.node(parentPath)
	if parent == nil {
		return "", zk.ErrNoNode
	}
	if flags&zk.FlagSequence != 0 {
		p = fmt.Sprintf("%s%010d", p, parent.seq)
	}
	if checkPath(p, false) != nil {
		return "", zk.ErrBadArguments
	}
	if t.node(p) != nil {
		return "", zk.ErrNodeExists
	}
	if parent.owner != 0 {
		return "", zk.ErrNoChildrenForEphemerals
	}
	zxid := t.nextZxid()
	n := &znode{data: slices.Clone(data), acl: slices.Clone(acl), czxid: zxid, mzxid: zxid, pzxid: zxid, children: map[string]uint64{}}
	if flags&zk.FlagEphemeral != 0 {
		n.owner = owner
	}
	t.nodes[p] = n
	if t.isMulti {
		t.cloned[p] = true
	}
	parent = t.writable(parentPath)
	t.s.stamp++
	parent.addChild(path.Base(p), t.s.stamp)
	parent.seq++
	parent.cversion++
	parent.pzxid = zxid
	t.events = append(t.events, pendingEvent{zk.EventNodeCreated, p, []watchKey{{p, false}}},
		pendingEvent{zk.EventNodeChildrenChanged, parentPath, []watchKey{{parentPath, true}}})
	return p, nil
}

func (t *tree) set(p string, data []byte, version int32) (*zk.Stat, error) {
	if checkPath(p, false) != nil {
		return nil, zk.ErrBadArguments
	}
	n := t.node(p)
	if n == nil {
		return nil, zk.ErrNoNode
	}
	if version != -1 && version != n.version {
		return nil, zk.ErrBadVersion
	}
	n = t.writable(p)
	n.data = slices.Clone(data)
	n.version++
	n.mzxid = t.nextZxid()
	t.events = append(t.events, pendingEvent{zk.EventNodeDataChanged, p, []watchKey{{p, false}}})
	return t.s.statLocked(n), nil
}

func (t *tree) delete(p string, version int32) error {
	if strings.IndexByte(p, 0) >= 0 {
		return zk.ErrBadArguments
	}
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
	zxid := t.nextZxid()
	delete(t.nodes, p)
	parentPath := path.Dir(p)
	parent := t.writable(parentPath)
	delete(parent.children, path.Base(p))
	parent.cversion++
	parent.pzxid = zxid
	t.events = append(t.events, pendingEvent{zk.EventNodeDeleted, p, []watchKey{{p, false}, {p, true}}},
		pendingEvent{zk.EventNodeChildrenChanged, parentPath, []watchKey{{parentPath, true}}})
	return nil
}

func (t *tree) check(p string, version int32) error {
	if checkPath(p, false) != nil {
		return zk.ErrBadArguments
	}
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
		t.s.fireLocked(e.t, e.path, e.keys...)
	}
}

// addChild adds a child as a ZooKeeper server's java.util.HashSet does
// (initial capacity 8, load factor 0.75, a bucket of more than 8 names
// doubles a table smaller than 64), so that hashOrder lists them in
// ZooKeeper's order.
func (n *znode) addChild(name string, stamp uint64) {
	if n.table == 0 {
		n.table = 8
	}
	if n.table < 64 {
		b, same := javaBucket(name, n.table), 0
		for k := range n.children {
			if javaBucket(k, n.table) == b {
				same++
			}
		}
		if same >= 8 {
			n.table *= 2
		}
	}
	n.children[name] = stamp
	if len(n.children) > n.table*3/4 {
		n.table *= 2
	}
}

// hashOrder lists the children in the order a ZooKeeper server returns
// them: its HashSet's iteration order, bucket by bucket, each bucket's
// names in the order they were added. (A bucket of more than 8 names in a
// table of 64 or more becomes a tree in Java, whose order this does not
// follow.)
func (n *znode) hashOrder() []string {
	names := make([]string, 0, len(n.children))
	for k := range n.children {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(javaBucket(a, n.table), javaBucket(b, n.table)); c != 0 {
			return c
		}
		return cmp.Compare(n.children[a], n.children[b])
	})
	return names
}

// javaBucket is the bucket of name in a java.util.HashMap table of the
// given capacity: String.hashCode, spread as HashMap.hash does.
func javaBucket(name string, table int) int {
	var h int32
	for _, u := range utf16.Encode([]rune(name)) {
		h = 31*h + int32(u)
	}
	h ^= int32(uint32(h) >> 16)
	return int(h) & (table - 1)
}
