// Package zkdiscovery finds a snowflaked cluster's nodes in ZooKeeper: a
// client.Discovery that follows the cluster's alive/ znodes.
//
// The znodes it reads are wire.AliveNode's,
// /snowflaked/<cluster>/alive/<worker-id>, each holding the address
// ("host:port") of a node in service. A node creates its alive znode
// (ephemeral) when it enters service and deletes it when it leaves, so the
// children of alive/ are exactly the nodes to call.
//
// A Discovery follows only a subset of them: the first Config.Subset
// (DefaultSubset, 12, by default: twice the client's, so that a client
// whose own subset is down has nodes to go on to) of its rendezvous
// ranking of the worker IDs, the same hashing
// the client applies to addresses (client.Config.Subset). Ranking needs
// the children's names only, so it reads the data (the address) of the
// children it uses and no other, keeps them, and sets a data watch on each
// to notice one deleted and created again (the same worker ID, perhaps
// another address). A change of alive/ costs each client one
// getChildren, plus one read per node that enters its subset: O(1) reads
// per change and client, however many nodes and clients there are. Each
// re-list waits a random pause first (up to Config.RelistDelay, 2 s by
// default), so that the events of one change coalesce and thousands of
// clients do not re-list at the same moment.
//
// It is a package of its own so that the client's core builds on the
// standard library alone: only a program that imports zkdiscovery gets the
// ZooKeeper client (github.com/go-zookeeper/zk).
package zkdiscovery

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/client/internal/rendezvous"
	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/client/zktls"
)

// DefaultSubset is how many nodes a Discovery follows by default: twice the
// client's default subset (client.DefaultSubset), so that a client whose
// own nodes are all down or unreachable from it has as many to go on to.
const DefaultSubset = 2 * client.DefaultSubset

// connectTimeout bounds the wait for a first session and each read.
const connectTimeout = 10 * time.Second

// DefaultRelistDelay bounds the random pause before a re-list
// (Config.RelistDelay).
const DefaultRelistDelay = 2 * time.Second

// NoRelistDelay, as Config.RelistDelay, re-lists at once after a change
// (tests; a small fleet).
const NoRelistDelay time.Duration = -1

// Config says where the cluster's znodes are.
type Config struct {
	// Servers lists the ZooKeeper servers, "host:port" each (required).
	Servers []string
	// Cluster is the cluster's name (default "default").
	Cluster string
	// Auth is "user:password" when the znodes are protected (digest).
	Auth string
	// TLS, when set, connects to ZooKeeper over TLS (its secureClientPort)
	// with these settings: RootCAs verify the server (against the host of
	// each server address unless ServerName is set), Certificates hold a
	// client certificate for mutual TLS. zktls.Load makes one from PEM
	// files. nil is plain TCP.
	TLS *tls.Config
	// Log receives a line per entry skipped and per failed re-read (Warn),
	// and the ZooKeeper client's lines (Debug); nil discards everything.
	Log *slog.Logger
	// Subset is how many nodes it follows and gives the client,
	// 0..client.MaxSubset (0: DefaultSubset, 12): the first Subset of its
	// rendezvous ranking of the worker IDs in alive/ (entries that are not
	// host:port skipped). Make it about twice the client's Config.Subset:
	// the client picks its subset among these, and goes beyond its own
	// subset among these only, so a Subset equal to the client's leaves
	// it nothing to go on to when its nodes cannot be reached from it. At
	// least the cluster's size: every node (each change then reads the
	// data of the nodes that joined).
	Subset int
	// SubsetID keys the ranking (0: the random ID drawn once per process,
	// the one a client.Config without SubsetID uses). Leave it 0 but in
	// tests.
	SubsetID uint64
	// RelistDelay bounds the pause before alive/ is listed again after a
	// change: uniform at random in 0..RelistDelay, so that one change's
	// events coalesce and clients do not all re-list at once (0:
	// DefaultRelistDelay, 2s; NoRelistDelay or any negative: none). A node
	// that leaves still gets calls for up to that long; failover routes
	// around it meanwhile.
	RelistDelay time.Duration
}

// reader is what a Discovery asks ZooKeeper (*zk.Conn; a counting wrapper
// in tests).
type reader interface {
	Exists(path string) (bool, *zk.Stat, error)
	Children(path string) ([]string, *zk.Stat, error)
	ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error)
	GetW(path string) ([]byte, *zk.Stat, <-chan zk.Event, error)
}

// entry is what a Discovery knows of one alive/ child while a data watch
// on it is armed: its address, or that it is not host:port.
type entry struct {
	addr  string
	valid bool
	gen   uint64 // which watch; a stale watch's event leaves a newer entry be
}

// Discovery follows a cluster's alive/ znodes; it implements
// client.Discovery. Close it after the client that uses it.
type Discovery struct {
	conn   *zk.Conn
	zk     reader
	dir    string
	log    *slog.Logger
	k      int
	id     uint64
	delay  time.Duration
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}  // closed when follow returns
	wg     sync.WaitGroup // the watch goroutines
	kick   chan struct{}  // a change to look at (capacity 1)

	mu      sync.Mutex
	nodes   []string
	changed chan struct{}

	// wmu guards the state the watch goroutines change.
	wmu           sync.Mutex
	cache         map[string]entry // children with an armed data watch
	used          map[string]bool  // the subset's children
	childrenArmed bool             // a watch on alive/'s children is armed
	gen           uint64
	events        int  // watch events received (tests)
	pending       bool // a re-list is asked for and not started
	listing       bool // follow is re-listing

	warned map[string]bool // entries already logged as skipped (follow's own)

	closeOnce sync.Once
}

// New connects to ZooKeeper, reads the live nodes, and keeps following them
// until Close. The cluster must exist. ctx bounds the connection and the
// first read. Trouble after the start is retried and logged; the last list
// stays in force meanwhile. A bad Config is an error wrapping
// client.ErrInvalidConfig.
func New(ctx context.Context, cfg Config) (*Discovery, error) {
	return newDiscovery(ctx, cfg, nil)
}

// withDefaults checks cfg and fills in the defaults.
func (cfg Config) withDefaults() (Config, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("zkdiscovery: %w: %s", client.ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	if len(cfg.Servers) == 0 {
		return Config{}, bad("give the ZooKeeper Servers")
	}
	for _, s := range cfg.Servers {
		if wire.CheckHostPort(s) != nil {
			return Config{}, bad("ZooKeeper server %q is not host:port", s)
		}
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "default"
	}
	if strings.ContainsAny(cfg.Cluster, "/ ") {
		return Config{}, bad("cluster %q contains '/' or a space", cfg.Cluster)
	}
	if u, p, ok := strings.Cut(cfg.Auth, ":"); cfg.Auth != "" && (!ok || u == "" || p == "") {
		return Config{}, bad("Auth must be user:password")
	}
	switch {
	case cfg.Subset < 0 || cfg.Subset > client.MaxSubset:
		return Config{}, bad("Subset %d: want 0..%d", cfg.Subset, client.MaxSubset)
	case cfg.Subset == 0:
		cfg.Subset = DefaultSubset
	}
	if cfg.SubsetID == 0 {
		cfg.SubsetID = rendezvous.ProcessID()
	}
	switch {
	case cfg.RelistDelay == 0:
		cfg.RelistDelay = DefaultRelistDelay
	case cfg.RelistDelay < 0:
		cfg.RelistDelay = 0
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// newDiscovery is New, with wrap (when not nil) between the Discovery and
// its connection.
func newDiscovery(ctx context.Context, cfg Config, wrap func(reader) reader) (*Discovery, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	servers := cfg.Servers
	var conn *zk.Conn
	var dialErr *lastError
	if cfg.TLS != nil {
		dialErr = &lastError{}
		conn, _, err = zk.Connect(servers, connectTimeout, zk.WithLogger(zkLog{cfg.Log}), zk.WithDialer(dialErr.record(zktls.Dialer(cfg.TLS))))
	} else {
		conn, _, err = zk.Connect(servers, connectTimeout, zk.WithLogger(zkLog{cfg.Log}))
	}
	if err != nil {
		return nil, fmt.Errorf("zkdiscovery: connect to ZooKeeper %s: %w", strings.Join(servers, ","), err)
	}
	if err := waitSession(ctx, conn, servers, dialErr); err != nil {
		conn.Close()
		return nil, err
	}
	if cfg.Auth != "" {
		if err := conn.AddAuth("digest", []byte(cfg.Auth)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("zkdiscovery: ZooKeeper auth: %w", err)
		}
	}
	rctx, cancel := context.WithCancel(context.Background())
	d := &Discovery{
		conn: conn, zk: conn, dir: wire.AlivePath(cfg.Cluster), log: cfg.Log,
		k: cfg.Subset, id: cfg.SubsetID, delay: cfg.RelistDelay,
		ctx: rctx, cancel: cancel, done: make(chan struct{}), kick: make(chan struct{}, 1),
		changed: make(chan struct{}), cache: map[string]entry{}, used: map[string]bool{}, warned: map[string]bool{},
	}
	if wrap != nil {
		d.zk = wrap(conn)
	}
	fail := func(err error) (*Discovery, error) {
		cancel()
		conn.Close()
		d.wg.Wait()
		return nil, err
	}
	if ok, _, err := d.zk.Exists(wire.ClusterPath(cfg.Cluster)); err != nil || !ok {
		if err == nil {
			return fail(fmt.Errorf("zkdiscovery: cluster %q does not exist in ZooKeeper %s (create it with snowflakectl cluster create)", cfg.Cluster, strings.Join(servers, ",")))
		}
		return fail(fmt.Errorf("zkdiscovery: look for cluster %q: %w", cfg.Cluster, err))
	}
	if err := d.list(); err != nil {
		return fail(err)
	}
	go d.follow()
	return d, nil
}

// Nodes returns the nodes of the subset, in worker-ID order, and a channel
// closed at the next change (see client.Discovery).
func (d *Discovery) Nodes() ([]string, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.nodes), d.changed
}

// waitSession waits up to connectTimeout for a session; its error names
// why the last connection attempt failed when dialErr (nil: not recorded)
// knows.
func waitSession(ctx context.Context, conn *zk.Conn, servers []string, dialErr *lastError) error {
	const every = 20 * time.Millisecond
	deadline := time.Now().Add(connectTimeout)
	for conn.State() != zk.StateHasSession {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("zkdiscovery: no ZooKeeper session with %s within %v (state %v)%s", strings.Join(servers, ","), connectTimeout, conn.State(), dialErr.suffix())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zkdiscovery: waiting for a ZooKeeper session with %s: %w%s", strings.Join(servers, ","), ctx.Err(), dialErr.suffix())
		case <-time.After(every):
		}
	}
	return nil
}

// lastError remembers the error of the last connection attempt.
type lastError struct {
	mu  sync.Mutex
	err error
}

// record wraps dial to remember each attempt's error.
func (l *lastError) record(dial zktls.DialFunc) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := dial(network, address, timeout)
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		return c, err
	}
}

// suffix is ": last attempt: <why>" after a failed attempt, else "".
func (l *lastError) suffix() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		return ""
	}
	return ": last attempt: " + l.err.Error()
}

// poke asks follow for a re-list; wmu held.
func (d *Discovery) poke() {
	d.pending = true
	select {
	case d.kick <- struct{}{}:
	default: // one is pending already
	}
}

// watch waits for the one event of a watch in a goroutine of its own:
// name's data watch of generation gen, or alive/'s children watch (name
// ""). An event on a child forgets its entry and, when the subset uses
// it, asks for a re-list; an event on the children always does. A watch
// that ends without its event (the session expired: ZooKeeper forgot the
// watches) forgets everything.
func (d *Discovery) watch(name string, gen uint64, ch <-chan zk.Event) {
	d.wg.Go(func() {
		var ev zk.Event
		select {
		case ev = <-ch:
		case <-d.ctx.Done():
			return
		}
		d.wmu.Lock()
		d.events++
		relist := true
		switch {
		case ev.Type == zk.EventNotWatching:
			clear(d.cache)
			d.childrenArmed = false
		case name == "":
			d.childrenArmed = false
		default:
			if e, ok := d.cache[name]; ok && e.gen == gen {
				delete(d.cache, name)
			}
			relist = d.used[name]
		}
		if relist {
			d.poke()
		}
		d.wmu.Unlock()
	})
}

// list reads alive/'s children (with a watch on them unless one is
// armed), ranks them and records the first k usable: the data of those
// not known yet is read, with a data watch.
func (d *Discovery) list() error {
	d.wmu.Lock()
	armed := d.childrenArmed
	d.wmu.Unlock()
	var names []string
	var err error
	if armed {
		names, _, err = d.zk.Children(d.dir)
	} else {
		var ch <-chan zk.Event
		names, _, ch, err = d.zk.ChildrenW(d.dir)
		if err == nil {
			d.wmu.Lock()
			d.childrenArmed = true
			d.wmu.Unlock()
			d.watch("", 0, ch)
		}
	}
	if err != nil {
		return fmt.Errorf("zkdiscovery: list %s: %w", d.dir, err)
	}
	ids := make(map[string]int64, len(names))
	keys := make([]string, 0, len(names))
	for _, name := range names {
		id, ok := wire.ParseAliveName(name)
		if !ok {
			d.warnOnce(name, "snowflaked client: skipping a znode that is not an alive entry")
			continue
		}
		ids[name] = id
		keys = append(keys, name)
	}
	var chosen []string
	addrs := map[string]string{}
	for _, i := range rendezvous.Rank(d.id, keys) {
		if len(chosen) == d.k {
			break
		}
		name := keys[i]
		e, ok, err := d.entry(name)
		switch {
		case err != nil:
			return err
		case !ok:
			continue // left between the list and the read
		case !e.valid:
			d.warnOnce(name, "snowflaked client: skipping an alive entry that is not host:port")
			continue
		}
		chosen = append(chosen, name)
		addrs[name] = e.addr
	}
	d.wmu.Lock()
	clear(d.used)
	for _, name := range chosen {
		d.used[name] = true
	}
	d.wmu.Unlock()
	// In worker-ID order, so that the list reads alike in every client.
	slices.SortFunc(chosen, func(a, b string) int { return int(ids[a] - ids[b]) })
	nodes := make([]string, len(chosen))
	for i, name := range chosen {
		nodes[i] = addrs[name]
	}
	for name := range d.warned {
		if !slices.Contains(names, name) {
			delete(d.warned, name) // gone: warn again should it come back
		}
	}
	d.mu.Lock()
	if !slices.Equal(nodes, d.nodes) {
		d.nodes = nodes
		close(d.changed)
		d.changed = make(chan struct{})
	}
	d.mu.Unlock()
	return nil
}

// entry is what child name holds: from the cache while its data watch is
// armed, else read with a data watch. ok is false when the child does not
// exist (any more).
func (d *Discovery) entry(name string) (entry, bool, error) {
	d.wmu.Lock()
	e, ok := d.cache[name]
	d.wmu.Unlock()
	if ok {
		return e, true, nil
	}
	data, _, ch, err := d.zk.GetW(d.dir + "/" + name)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return entry{}, false, nil
	case err != nil:
		return entry{}, false, fmt.Errorf("zkdiscovery: read %s/%s: %w", d.dir, name, err)
	}
	d.wmu.Lock()
	d.gen++
	e = entry{addr: string(data), valid: wire.CheckHostPort(string(data)) == nil, gen: d.gen}
	d.cache[name] = e
	d.wmu.Unlock()
	d.watch(name, e.gen, ch)
	return e, true, nil
}

// warnOnce logs msg for alive/ child name, once while it stays.
func (d *Discovery) warnOnce(name, msg string) {
	if d.warned[name] {
		return
	}
	d.warned[name] = true
	d.log.Warn(msg, "znode", d.dir+"/"+name)
}

// follow re-lists after each change, a random pause up to the
// RelistDelay later, retrying with a growing pause while ZooKeeper is out
// of reach.
func (d *Discovery) follow() {
	defer close(d.done)
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-d.kick:
		}
		if !d.sleep(d.pause()) {
			return
		}
		for attempt := 0; ; attempt++ {
			d.setListing(true)
			err := d.list()
			d.setListing(false)
			if err == nil {
				break
			}
			d.wmu.Lock()
			d.pending = true // until a list succeeds
			d.wmu.Unlock()
			if attempt == 0 {
				d.log.Warn("snowflaked client: cannot read the live nodes; keeping the last list and retrying", "error", err)
			}
			if !d.sleep(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second)) {
				return
			}
		}
	}
}

// pause is a random pause of 0..RelistDelay.
func (d *Discovery) pause() time.Duration {
	if d.delay <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d.delay) + 1))
}

// sleep waits for p, false when the Discovery closes first.
func (d *Discovery) sleep(p time.Duration) bool {
	if p <= 0 {
		return d.ctx.Err() == nil
	}
	t := time.NewTimer(p)
	defer t.Stop()
	select {
	case <-d.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// setListing records that a list starts (it covers the changes asked for
// so far) or ended (a failed one is asked for again).
func (d *Discovery) setListing(start bool) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.listing = start
	if start {
		d.pending = false
		select {
		case <-d.kick: // covered by this list
		default:
		}
	}
}

var _ client.Discovery = (*Discovery)(nil)

// Close stops following and ends the session. The last list stays what
// Nodes returns. It always returns nil.
func (d *Discovery) Close() error {
	d.closeOnce.Do(func() {
		d.cancel()
		d.conn.Close() // unblocks a read in flight
		<-d.done
		d.wg.Wait()
	})
	return nil
}

// zkLog sends go-zookeeper's lines to the logger at level Debug.
type zkLog struct{ log *slog.Logger }

func (l zkLog) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "zk-client")
}
