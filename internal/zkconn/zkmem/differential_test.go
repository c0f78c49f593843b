package zkmem_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
	"codeberg.org/snowflaked/snowflaked/tests/zkproxy"
)

// The differential test runs one script of ZooKeeper operations (diffScript)
// against a real ZooKeeper through go-zookeeper and against zkmem, records
// what each call returns (normalised where a value legitimately differs:
// zxids and session IDs become names in order of first appearance, so only
// their relations are compared) and compares the two records observation by
// observation. A difference not in allowedDiffs fails the test.

// allowedDiffs are the observations that differ on purpose, by label, with
// the reason (docs/testing.md, "How faithful the in-memory ZooKeeper is").
var allowedDiffs = map[string]string{}

// diffTimeout is the session timeout of most clients; expiring is the one
// of the client whose session the script expires (ZooKeeper grants 2 to 20
// ticks; the harness's tick is 500 ms).
const (
	diffTimeout     = 4 * time.Second
	expiringTimeout = 2 * time.Second
	waitLimit       = 15 * time.Second
)

// client is one connection of the script, with the events its callback got.
type client struct {
	name string
	conn zkconn.Conn
	mu   sync.Mutex
	evs  []zk.Event
	mark int // events before it were recorded already
}

func (c *client) onEvent(ev zk.Event) {
	c.mu.Lock()
	c.evs = append(c.evs, ev)
	c.mu.Unlock()
}

// waitEvent polls until the client's callback got an event that matches,
// after the mark; it reports false at the deadline.
func (c *client) waitEvent(match func(zk.Event) bool) bool {
	deadline := time.Now().Add(waitLimit)
	for range int(waitLimit/(10*time.Millisecond)) + 1 {
		c.mu.Lock()
		ok := slices.ContainsFunc(c.evs[c.mark:], match)
		c.mu.Unlock()
		if ok || time.Now().After(deadline) {
			return ok
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func isSession(st zk.State) func(zk.Event) bool {
	return func(ev zk.Event) bool { return ev.Type == zk.EventSession && ev.State == st }
}

// world is what differs between the two ZooKeepers.
type world interface {
	// connect opens a client and waits for its session.
	connect(t *testing.T, name string, timeout time.Duration) *client
	// expire has the server expire c's session while c is cut off (one
	// of its ephemerals is eph, gone once the session is), and waits until
	// c has a new session.
	expire(t *testing.T, c *client, eph string)
	// cut breaks c's connection for d (less than the session timeout) and
	// waits until c has its session back.
	cut(t *testing.T, c *client, d time.Duration)
	// hold breaks c's connection until c closes.
	hold(t *testing.T, c *client)
}

// recorder collects the observations of one run.
type recorder struct {
	obs   []obs
	zxids map[int64]string
	sess  map[int64]string
}

type obs struct{ label, value string }

func newRecorder() *recorder {
	return &recorder{zxids: map[int64]string{0: "0"}, sess: map[int64]string{0: "0"}}
}

func (r *recorder) add(label, format string, args ...any) {
	r.obs = append(r.obs, obs{label, fmt.Sprintf(format, args...)})
}

func (r *recorder) zxid(z int64) string {
	if n, ok := r.zxids[z]; ok {
		return n
	}
	n := fmt.Sprintf("z%d", len(r.zxids))
	r.zxids[z] = n
	return n
}

func (r *recorder) session(id int64) string {
	if n, ok := r.sess[id]; ok {
		return n
	}
	n := fmt.Sprintf("s%d", len(r.sess))
	r.sess[id] = n
	return n
}

func (r *recorder) stat(st *zk.Stat) string {
	if st == nil {
		return "nil"
	}
	return fmt.Sprintf("{czxid=%s mzxid=%s pzxid=%s v=%d cv=%d av=%d owner=%s len=%d kids=%d}",
		r.zxid(st.Czxid), r.zxid(st.Mzxid), r.zxid(st.Pzxid), st.Version, st.Cversion, st.Aversion,
		r.session(st.EphemeralOwner), st.DataLength, st.NumChildren)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func evString(ev zk.Event) string {
	s := fmt.Sprintf("%v %v", ev.Type, ev.State)
	if ev.Path != "" {
		s += " " + ev.Path
	}
	if ev.Err != nil {
		s += " err=" + ev.Err.Error()
	}
	return s
}

// events records c's callback events since the last mark and moves the
// mark. Failed connection attempts (Connecting, then another Connecting,
// or Disconnected, or a Connected without a session before Disconnected)
// depend on timing and are left out.
func (r *recorder) events(label string, c *client) {
	c.mu.Lock()
	evs := slices.Clone(c.evs[c.mark:])
	c.mark = len(c.evs)
	c.mu.Unlock()
	var out []string
	for i := 0; i < len(evs); i++ {
		if evs[i].Type == zk.EventSession && evs[i].State == zk.StateConnecting {
			j := i + 1
			if j < len(evs) && evs[j].Type == zk.EventSession && evs[j].State == zk.StateConnecting {
				continue // a server that did not answer
			}
			if j < len(evs) && evs[j].Type == zk.EventSession && evs[j].State == zk.StateConnected {
				j++
			}
			if j < len(evs) && evs[j].Type == zk.EventSession && evs[j].State == zk.StateDisconnected {
				i = j
				continue
			}
		}
		out = append(out, evString(evs[i]))
	}
	r.add(label, "%s", strings.Join(out, ", "))
}

// watch records what a watch channel delivers: its first event (or that
// none came) and whether a second receive finds it closed.
func (r *recorder) watch(label string, ch <-chan zk.Event) {
	if ch == nil {
		r.add(label, "no channel")
		return
	}
	select {
	case ev, ok := <-ch:
		if !ok {
			r.add(label, "closed without an event")
			return
		}
		r.add(label, "%s", evString(ev))
	case <-time.After(waitLimit):
		r.add(label, "no event within %v", waitLimit)
		return
	}
	select {
	case _, ok := <-ch:
		r.add(label+" second receive", "ok=%v", ok)
	case <-time.After(200 * time.Millisecond):
		r.add(label+" second receive", "blocks")
	}
}

// quiet records that a watch channel delivered nothing yet.
func (r *recorder) quiet(label string, ch <-chan zk.Event) {
	select {
	case ev, ok := <-ch:
		r.add(label, "fired early: %s ok=%v", evString(ev), ok)
	default:
		r.add(label, "quiet")
	}
}

// diffScript is the script: every observation goes to r.
func diffScript(t *testing.T, w world, r *recorder) {
	a := w.connect(t, "a", diffTimeout)
	r.events("a connect events", a)
	b := w.connect(t, "b", diffTimeout)
	r.add("a and b sessions differ", "%v", a.conn.SessionID() != b.conn.SessionID())
	r.add("a state", "%v", a.conn.State())

	create := func(label string, c *client, p string, data string, flags int32) string {
		got, err := c.conn.Create(p, []byte(data), flags, zk.WorldACL(zk.PermAll))
		r.add(label, "%q %s", got, errString(err))
		return got
	}
	get := func(label string, c *client, p string) {
		data, st, err := c.conn.Get(p)
		r.add(label, "data=%q stat=%s %s", data, r.stat(st), errString(err))
	}
	exists := func(label string, c *client, p string) {
		ok, st, err := c.conn.Exists(p)
		r.add(label, "%v stat=%s %s", ok, r.stat(st), errString(err))
	}
	set := func(label string, c *client, p, data string, v int32) {
		st, err := c.conn.Set(p, []byte(data), v)
		r.add(label, "stat=%s %s", r.stat(st), errString(err))
	}
	del := func(label string, c *client, p string, v int32) {
		r.add(label, "%s", errString(c.conn.Delete(p, v)))
	}
	children := func(label string, c *client, p string) {
		names, st, err := c.conn.Children(p)
		r.add(label, "%q stat=%s %s", names, r.stat(st), errString(err))
	}
	multi := func(label string, c *client, ops ...any) {
		resp, err := c.conn.Multi(ops...)
		var parts []string
		for _, m := range resp {
			parts = append(parts, fmt.Sprintf("{%q stat=%s %s}", m.String, r.stat(m.Stat), errString(m.Error)))
		}
		r.add(label, "%s resp=[%s]", errString(err), strings.Join(parts, " "))
	}

	const root = "/zkdiff"
	create("create root", a, root, "r", zk.FlagPersistent)
	exists("exists root", b, root)

	// ACLs are kept as created and read back (zkmem does not enforce them).
	getACL := func(label string, c *client, p string) {
		acl, st, err := c.conn.GetACL(p)
		r.add(label, "%v stat=%s %s", acl, r.stat(st), errString(err))
	}
	secured := append(zk.DigestACL(zk.PermAll, "snow", "s3cret"), zk.WorldACL(zk.PermRead)...)
	got, err := a.conn.Create(root+"/acl", nil, 0, secured)
	r.add("create with a digest ACL", "%q %s", got, errString(err))
	multi("multi create with a digest ACL", a, &zk.CreateRequest{Path: root + "/acl-multi", Acl: secured})
	getACL("getacl of the root", b, root)
	getACL("getacl of a digest znode", b, root+"/acl")
	getACL("getacl of a digest znode made in a multi", b, root+"/acl-multi")
	getACL("getacl of a missing znode", b, root+"/no-such")
	r.add("add the digest's credentials", "%s", errString(a.conn.AddAuth("digest", []byte("snow:s3cret"))))
	getACL("getacl of a digest znode, as its admin", a, root+"/acl")
	del("delete the digest znode", a, root+"/acl", -1)
	del("delete the multi's digest znode", a, root+"/acl-multi", -1)

	// Create with every flag the product uses.
	create("create persistent", a, root+"/p", "p", zk.FlagPersistent)
	create("create existing", a, root+"/p", "p", zk.FlagPersistent)
	create("create into missing parent", a, root+"/missing/x", "", zk.FlagPersistent)
	create("create ephemeral", a, root+"/e", "e", zk.FlagEphemeral)
	create("create under ephemeral", a, root+"/e/x", "", zk.FlagPersistent)
	create("create ephemeral under ephemeral", a, root+"/e/y", "", zk.FlagEphemeral)
	get("get ephemeral", b, root+"/e")
	create("create dir", a, root+"/d", "", zk.FlagPersistent)
	s1 := create("create sequential 1", a, root+"/d/s-", "1", zk.FlagSequence)
	create("create sequential 2", a, root+"/d/s-", "2", zk.FlagSequence)
	s3 := create("create sequential 3", a, root+"/d/s-", "3", zk.FlagSequence)
	del("delete sequential 3", a, s3, -1)
	del("delete sequential 1", a, s1, -1)
	create("create sequential after deletes", a, root+"/d/s-", "4", zk.FlagSequence)
	get("dir stat after sequential deletes", a, root+"/d")
	es := create("create ephemeral sequential 1", b, root+"/d/es-", "", zk.FlagEphemeral|zk.FlagSequence)
	del("delete ephemeral sequential 1", b, es, -1)
	es2 := create("create ephemeral sequential after delete", b, root+"/d/es-", "", zk.FlagEphemeral|zk.FlagSequence)
	get("ephemeral sequential", a, es2)
	create("create sequential in root-less dir", a, root+"/none/s-", "", zk.FlagSequence)

	// Get, set, delete with versions.
	get("get persistent", a, root+"/p")
	get("get missing", a, root+"/nope")
	set("set version 0", a, root+"/p", "p1", 0)
	set("set stale version", a, root+"/p", "p2", 0)
	set("set any version", a, root+"/p", "p3", -1)
	set("set missing", a, root+"/nope", "x", -1)
	get("get after sets", b, root+"/p")
	del("delete stale version", a, root+"/p", 0)
	del("delete not empty", a, root+"/d", -1)
	del("delete missing", a, root+"/nope", -1)
	del("delete right version", a, root+"/p", 2)
	exists("exists deleted", a, root+"/p")
	exists("exists ephemeral", a, root+"/e")
	children("children of dir", a, root+"/d")
	children("children of missing", a, root+"/nope")
	get("root stat after deletes", a, root)

	// Children order: ZooKeeper's hash order.
	create("create order dir", a, root+"/o", "", zk.FlagPersistent)
	for _, n := range []string{"zeta", "alpha", "m-0000000012", "m-0000000003", "worker-7", "b", "lease-42", "a1", "0"} {
		create("create order child "+n, a, root+"/o/"+n, "", zk.FlagPersistent)
	}
	children("children in order", b, root+"/o")

	// Invalid paths, for each call.
	for _, p := range []string{"", "zkdiff", root + "/", root + "//x", root + "/./x", root + "/../x", root + "/x\x00"} {
		_, err := a.conn.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
		r.add(fmt.Sprintf("create invalid %q", p), "%s", errString(err))
		_, _, err = a.conn.Get(p)
		r.add(fmt.Sprintf("get invalid %q", p), "%s", errString(err))
		_, err = a.conn.Set(p, nil, -1)
		r.add(fmt.Sprintf("set invalid %q", p), "%s", errString(err))
		err = a.conn.Delete(p, -1)
		r.add(fmt.Sprintf("delete invalid %q", p), "%s", errString(err))
	}
	create("create sequential with trailing slash", a, root+"/d/", "", zk.FlagSequence)
	multi("multi create invalid path", a, &zk.CreateRequest{Path: root + "//x", Acl: zk.WorldACL(zk.PermAll)})
	multi("multi set invalid path", a, &zk.SetDataRequest{Path: root + "/", Version: -1})

	// Multi: success, then each kind of failure.
	create("create multi dir", a, root+"/m", "", zk.FlagPersistent)
	create("create multi victim", a, root+"/m/v", "", zk.FlagPersistent)
	multi("multi ok", a,
		&zk.CreateRequest{Path: root + "/m/c", Data: []byte("c"), Acl: zk.WorldACL(zk.PermAll)},
		&zk.SetDataRequest{Path: root + "/m/c", Data: []byte("c2"), Version: 0},
		&zk.CheckVersionRequest{Path: root + "/m/c", Version: 1},
		&zk.DeleteRequest{Path: root + "/m/v", Version: 0},
		&zk.CreateRequest{Path: root + "/m/q-", Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence | zk.FlagEphemeral})
	get("after multi ok", a, root+"/m/c")
	get("multi dir after multi ok", a, root+"/m")
	okFirst := &zk.CheckVersionRequest{Path: root + "/m/c", Version: 1}
	then := &zk.SetDataRequest{Path: root + "/m/c", Data: []byte("never"), Version: -1}
	failures := []struct {
		name string
		op   any
	}{
		{"create exists", &zk.CreateRequest{Path: root + "/m/c", Acl: zk.WorldACL(zk.PermAll)}},
		{"create no parent", &zk.CreateRequest{Path: root + "/m/none/x", Acl: zk.WorldACL(zk.PermAll)}},
		{"set bad version", &zk.SetDataRequest{Path: root + "/m/c", Version: 7}},
		{"set no node", &zk.SetDataRequest{Path: root + "/m/none", Version: -1}},
		{"check bad version", &zk.CheckVersionRequest{Path: root + "/m/c", Version: 0}},
		{"check no node", &zk.CheckVersionRequest{Path: root + "/m/none", Version: -1}},
		{"delete bad version", &zk.DeleteRequest{Path: root + "/m/c", Version: 0}},
		{"delete no node", &zk.DeleteRequest{Path: root + "/m/none", Version: -1}},
		{"delete not empty", &zk.DeleteRequest{Path: root + "/m", Version: -1}},
	}
	for _, f := range failures {
		multi("multi "+f.name, a, okFirst, f.op, then)
	}
	get("after failed multis", a, root+"/m/c")
	multi("multi create then delete", a,
		&zk.CreateRequest{Path: root + "/m/t", Acl: zk.WorldACL(zk.PermAll)},
		&zk.DeleteRequest{Path: root + "/m/t", Version: -1})
	create("sequential after multi with a delete", a, root+"/m/q-", "", zk.FlagSequence)
	get("multi dir stat", a, root+"/m")

	// Watches.
	ok, st, ch, err := a.conn.ExistsW(root + "/w")
	r.add("existsW missing", "%v stat=%s %s", ok, r.stat(st), errString(err))
	r.quiet("existsW missing before create", ch)
	create("create watched", b, root+"/w", "", zk.FlagPersistent)
	r.watch("existsW missing fires on create", ch)
	_, _, ch, err = a.conn.ExistsW(root + "/w")
	r.add("existsW existing", "%s", errString(err))
	set("set watched", b, root+"/w", "x", -1)
	r.watch("existsW existing fires on set", ch)
	_, _, ch, _ = a.conn.ExistsW(root + "/w")
	_, _, cch, err := a.conn.ChildrenW(root + "/w")
	r.add("childrenW", "%s", errString(err))
	create("create watched child", b, root+"/w/k", "", zk.FlagPersistent)
	r.watch("childrenW fires on create of a child", cch)
	r.quiet("existsW quiet on create of a child", ch)
	names, _, cch, err := a.conn.ChildrenW(root + "/w")
	r.add("childrenW again", "%q %s", names, errString(err))
	del("delete watched child", b, root+"/w/k", -1)
	r.watch("childrenW fires on delete of a child", cch)
	_, _, cch, _ = a.conn.ChildrenW(root + "/w")
	del("delete watched", b, root+"/w", -1)
	r.watch("existsW existing fires on delete", ch)
	r.watch("childrenW fires on delete of the parent", cch)
	_, _, ch, _ = a.conn.ExistsW(root + "/w")
	_, _, ch2, _ := a.conn.ExistsW(root + "/w")
	create("create watched twice", b, root+"/w", "", zk.FlagPersistent)
	r.watch("first of two watches", ch)
	r.watch("second of two watches", ch2)
	_, _, _, err = a.conn.ChildrenW(root + "/nope")
	r.add("childrenW missing", "%s", errString(err))
	r.events("a events after watches", a)

	// Sync.
	p, err := a.conn.Sync(root)
	r.add("sync", "%q %s", p, errString(err))
	r.add("add auth", "%s", errString(a.conn.AddAuth("digest", []byte("u:p"))))

	// A session closed by its owner.
	c := w.connect(t, "c", diffTimeout)
	r.events("c connect events", c)
	create("c creates ephemeral", c, root+"/ce", "", zk.FlagEphemeral)
	_, _, och, _ := c.conn.ExistsW(root + "/nope")
	_, _, bch, _ := b.conn.ExistsW(root + "/ce")
	c.conn.Close()
	r.watch("b's watch on c's ephemeral after c closes", bch)
	exists("c's ephemeral after close", b, root+"/ce")
	r.watch("c's own watch after close", och)
	get("c get after close", c, root)
	create("c create after close", c, root+"/x", "", zk.FlagPersistent)
	multi("c multi after close", c, &zk.CheckVersionRequest{Path: root, Version: -1})
	r.add("c state after close", "%v", c.conn.State())
	c.conn.Close()
	r.add("c second close", "returns")
	r.events("c events after close", c)

	// A call in flight when the client closes.
	f := w.connect(t, "f", diffTimeout)
	r.events("f connect events", f)
	w.hold(t, f)
	done := make(chan error, 1)
	go func() { _, _, err := f.conn.Get(root); done <- err }()
	f.conn.Close()
	select {
	case err := <-done:
		r.add("f get in flight at close", "%s", errString(err))
	case <-time.After(waitLimit):
		r.add("f get in flight at close", "no answer within %v", waitLimit)
	}

	// A session that expires.
	d := w.connect(t, "d", expiringTimeout)
	r.events("d connect events", d)
	before := d.conn.SessionID()
	create("d creates ephemeral", d, root+"/de", "", zk.FlagEphemeral)
	_, _, och, _ = d.conn.ExistsW(root + "/nope")
	_, _, bch, _ = b.conn.ExistsW(root + "/de")
	w.expire(t, d, root+"/de")
	r.events("d events around expiry", d)
	r.watch("d's own watch after expiry", och)
	r.watch("b's watch on d's ephemeral after expiry", bch)
	r.add("d session after expiry", "new=%v", d.conn.SessionID() != before)
	r.add("d state after expiry", "%v", d.conn.State())
	exists("d's ephemeral after expiry", d, root+"/de")
	create("d creates its ephemeral again", d, root+"/de", "", zk.FlagEphemeral)
	get("d's new ephemeral", b, root+"/de")
	d.conn.Close()

	a.conn.Close()
	b.conn.Close()
	cutScript(t, w, r)
}

// cutScript is the part of the script where a connection is lost and
// regained within the session timeout: the session and its ephemerals and
// watches survive.
func cutScript(t *testing.T, w world, r *recorder) {
	const root = "/zkcut"
	b := w.connect(t, "b", diffTimeout)
	_, err := b.conn.Create(root, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
	r.add("create cut root", "%s", errString(err))
	e := w.connect(t, "e", diffTimeout)
	r.events("e connect events", e)
	before := e.conn.SessionID()
	got, err := e.conn.Create(root+"/ee", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	r.add("e creates ephemeral", "%q %s", got, errString(err))
	_, _, ech, _ := e.conn.ExistsW(root + "/ee")
	w.cut(t, e, time.Second)
	r.events("e events around a lost connection", e)
	r.add("e session after reconnect", "same=%v", e.conn.SessionID() == before)
	r.add("e state after reconnect", "%v", e.conn.State())
	ok, st, err := e.conn.Exists(root + "/ee")
	r.add("e's ephemeral after reconnect", "%v stat=%s %s", ok, r.stat(st), errString(err))
	r.quiet("e's watch after reconnect", ech)
	if !poll(func() bool { return b.conn.State() == zk.StateHasSession }) {
		t.Fatalf("client b: no session within %v", waitLimit)
	}
	st, err = b.conn.Set(root+"/ee", []byte("x"), -1)
	r.add("b sets e's ephemeral", "stat=%s %s", r.stat(st), errString(err))
	r.watch("e's watch fires after reconnect", ech)
	e.conn.Close()
	b.conn.Close()
}

// realWorld is a standalone ZooKeeper; each client goes through its own
// proxy, which cuts it off.
type realWorld struct {
	zk      *zkharness.Cluster
	observe *zk.Conn
	proxies map[*client]*zkproxy.Proxy
}

func (w *realWorld) connect(t *testing.T, name string, timeout time.Duration) *client {
	t.Helper()
	p := zkproxy.Start(t, w.zk.Servers[0].ClientAddr())
	c := dialClient(t, name, func(onEvent func(zk.Event)) (zkconn.Conn, error) {
		return zkconn.Dial([]string{p.Addr()}, zkconn.Options{SessionTimeout: timeout, OnEvent: onEvent, Logger: quietLogger{}})
	})
	w.proxies[c] = p
	return c
}

// dialClient opens a client named name with dial (given the client's
// event callback) and waits for its session.
func dialClient(t *testing.T, name string, dial func(onEvent func(zk.Event)) (zkconn.Conn, error)) *client {
	t.Helper()
	c := &client{name: name}
	conn, err := dial(c.onEvent)
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	t.Cleanup(conn.Close)
	c.conn = conn
	if !c.waitEvent(isSession(zk.StateHasSession)) {
		t.Fatalf("client %s: no session within %v", name, waitLimit)
	}
	return c
}

func (w *realWorld) expire(t *testing.T, c *client, eph string) {
	t.Helper()
	p := w.proxies[c]
	p.Block()
	if !poll(func() bool { ok, _, err := w.observe.Exists(eph); return err == nil && !ok }) {
		t.Fatalf("%s's ephemeral %s still there %v after its connection was cut", c.name, eph, waitLimit)
	}
	p.Unblock()
	if !c.waitEvent(isSession(zk.StateHasSession)) {
		t.Fatalf("client %s: no new session within %v", c.name, waitLimit)
	}
}

func (w *realWorld) cut(t *testing.T, c *client, d time.Duration) {
	t.Helper()
	p := w.proxies[c]
	p.Block()
	if !c.waitEvent(isSession(zk.StateDisconnected)) {
		t.Fatalf("client %s: still connected %v after its connection was cut", c.name, waitLimit)
	}
	time.Sleep(d) // the length of the break is the point, not a guess
	p.Unblock()
	if !c.waitEvent(isSession(zk.StateHasSession)) {
		t.Fatalf("client %s: no session within %v", c.name, waitLimit)
	}
}

func (w *realWorld) hold(t *testing.T, c *client) {
	t.Helper()
	w.proxies[c].Block()
	if !c.waitEvent(isSession(zk.StateDisconnected)) {
		t.Fatalf("client %s: still connected %v after its connection was cut", c.name, waitLimit)
	}
}

// memWorld is zkmem.
type memWorld struct {
	srv *zkmem.Server
}

// ensembleWorld is a 3-server ensemble whose leader dies: each client
// connects to every server.
type ensembleWorld struct {
	zk *zkharness.Cluster
}

func (w *ensembleWorld) connect(t *testing.T, name string, timeout time.Duration) *client {
	t.Helper()
	return dialClient(t, name, func(onEvent func(zk.Event)) (zkconn.Conn, error) {
		return zkconn.Dial(strings.Split(w.zk.ConnectString(), ","), zkconn.Options{SessionTimeout: timeout, OnEvent: onEvent, Logger: quietLogger{}})
	})
}

// cut kills the leader: every client loses its connection (a follower
// drops its clients when it loses the leader) until a new leader serves.
func (w *ensembleWorld) cut(t *testing.T, c *client, _ time.Duration) {
	t.Helper()
	leader, err := w.zk.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	if !c.waitEvent(isSession(zk.StateDisconnected)) {
		t.Fatalf("client %s: still connected %v after the leader died", c.name, waitLimit)
	}
	if !c.waitEvent(isSession(zk.StateHasSession)) {
		t.Fatalf("client %s: no session within %v after the leader died", c.name, waitLimit)
	}
}

func (w *ensembleWorld) expire(t *testing.T, _ *client, _ string) {
	t.Fatal("ensembleWorld: not used for expiry")
}

func (w *ensembleWorld) hold(t *testing.T, _ *client) {
	t.Fatal("ensembleWorld: not used for hold")
}

func (w *memWorld) connect(t *testing.T, name string, timeout time.Duration) *client {
	t.Helper()
	return dialClient(t, name, func(onEvent func(zk.Event)) (zkconn.Conn, error) {
		return w.srv.Dial(nil, zkconn.Options{SessionTimeout: timeout, OnEvent: onEvent})
	})
}

func (w *memWorld) expire(t *testing.T, c *client, _ string) {
	t.Helper()
	w.srv.Expire(c.conn.SessionID())
	if !c.waitEvent(isSession(zk.StateHasSession)) {
		t.Fatalf("client %s: no new session within %v", c.name, waitLimit)
	}
}

// breakNext has the next request of c's session drop, its connection down
// for d, and sends one.
func (w *memWorld) breakNext(c *client, d time.Duration) {
	session := c.conn.SessionID()
	var once atomic.Bool
	w.srv.SetInjector(func(r zkmem.Request) zkmem.Fault {
		if r.Session == session && once.CompareAndSwap(false, true) {
			return zkmem.Fault{Kind: zkmem.Drop, Down: d}
		}
		return zkmem.Fault{}
	})
	_, _ = c.conn.Sync("/")
	w.srv.SetInjector(nil)
}

func (w *memWorld) cut(t *testing.T, c *client, d time.Duration) {
	t.Helper()
	w.breakNext(c, d)
	if !c.waitEvent(isSession(zk.StateHasSession)) {
		t.Fatalf("client %s: no session within %v", c.name, waitLimit)
	}
}

func (w *memWorld) hold(t *testing.T, c *client) {
	t.Helper()
	w.breakNext(c, time.Hour)
}

func poll(cond func() bool) bool {
	deadline := time.Now().Add(waitLimit)
	for range int(waitLimit/(20*time.Millisecond)) + 1 {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// TestIntegration_ZkmemMatchesZooKeeper runs the script against a real
// ZooKeeper and against zkmem and fails on every difference not allowed.
func TestIntegration_ZkmemMatchesZooKeeper(t *testing.T) {
	t.Parallel()
	cluster := zkharness.StartStandalone(t)
	observe, _, err := zk.Connect([]string{cluster.Servers[0].ClientAddr()}, diffTimeout, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(observe.Close)
	real, mem := newRecorder(), newRecorder()
	t.Run("zookeeper", func(t *testing.T) {
		diffScript(t, &realWorld{zk: cluster, observe: observe, proxies: map[*client]*zkproxy.Proxy{}}, real)
	})
	t.Run("zkmem", func(t *testing.T) { diffScript(t, &memWorld{srv: zkmem.New()}, mem) })
	if t.Failed() {
		return
	}
	diffs, report := compare(real.obs, mem.obs, allowedDiffs)
	t.Logf("%d observations, %d differ (allowed: %d)", len(real.obs), diffs, len(allowedDiffs))
	if report != "" {
		t.Errorf("zkmem differs from ZooKeeper (- zookeeper, + zkmem):\n%s", report)
	}
}

// TestIntegration_ZkmemMatchesZooKeeperLeaderLoss runs the part of the
// script where a connection is lost and regained against a 3-server
// ensemble whose leader dies, and against zkmem.
func TestIntegration_ZkmemMatchesZooKeeperLeaderLoss(t *testing.T) {
	t.Parallel()
	cluster := zkharness.StartEnsemble(t, 3)
	real, mem := newRecorder(), newRecorder()
	t.Run("zookeeper", func(t *testing.T) { cutScript(t, &ensembleWorld{zk: cluster}, real) })
	t.Run("zkmem", func(t *testing.T) { cutScript(t, &memWorld{srv: zkmem.New()}, mem) })
	if t.Failed() {
		return
	}
	diffs, report := compare(real.obs, mem.obs, nil)
	t.Logf("%d observations, %d differ", len(real.obs), diffs)
	if report != "" {
		t.Errorf("zkmem differs from ZooKeeper (- zookeeper, + zkmem):\n%s", report)
	}
}

// compare lists the observations that differ and are not allowed, the
// allowed ones that no longer differ, and counts the differences.
func compare(real, mem []obs, allowed map[string]string) (int, string) {
	var b strings.Builder
	diffs := 0
	differed := map[string]bool{}
	for i := range max(len(real), len(mem)) {
		var r, m obs
		if i < len(real) {
			r = real[i]
		}
		if i < len(mem) {
			m = mem[i]
		}
		if r == m {
			continue
		}
		diffs++
		differed[r.label], differed[m.label] = true, true
		if r.label == m.label && allowed[r.label] != "" {
			continue
		}
		fmt.Fprintf(&b, "%3d - %s: %s\n    + %s: %s\n", i, r.label, r.value, m.label, m.value)
	}
	for label := range allowed {
		if !differed[label] {
			fmt.Fprintf(&b, "allowed difference %q no longer differs: take it off allowedDiffs\n", label)
		}
	}
	return diffs, b.String()
}
