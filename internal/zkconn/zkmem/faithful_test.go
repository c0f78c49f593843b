package zkmem

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// These tests pin, without a ZooKeeper, what differential_test.go saw
// ZooKeeper 3.8 and go-zookeeper v1.0.4 do.

// eventLog is an OnEvent callback that keeps what it gets.
type eventLog struct {
	mu  sync.Mutex
	evs []string
}

func (l *eventLog) on(ev zk.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := ev.Type.String() + " " + ev.State.String()
	if ev.Err != nil {
		s += " " + ev.Err.Error()
	}
	l.evs = append(l.evs, s)
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.evs
	l.evs = nil
	return out
}

func TestSessionEventsAsGoZookeeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		var log eventLog
		c := s.Connect(zkconn.Options{SessionTimeout: time.Second, OnEvent: log.on})
		t.Cleanup(c.Close)
		want := []string{"EventSession StateConnecting", "EventSession StateConnected", "EventSession StateHasSession"}
		if got := log.take(); !slices.Equal(got, want) {
			t.Fatalf("at connect: %q, want %q", got, want)
		}
		_, _, ch, err := c.ExistsW("/none")
		if err != nil {
			t.Fatal(err)
		}
		s.Expire(c.SessionID())
		time.Sleep(time.Second)
		want = []string{"EventSession StateDisconnected", "EventSession StateConnecting", "EventSession StateConnected",
			"EventSession StateExpired", "EventNotWatching StateDisconnected " + zk.ErrSessionExpired.Error(),
			"EventSession StateDisconnected", "EventSession StateConnecting", "EventSession StateConnected", "EventSession StateHasSession"}
		if got := log.take(); !slices.Equal(got, want) {
			t.Fatalf("around an expiry: %q, want %q", got, want)
		}
		if ev := <-ch; ev.Type != zk.EventNotWatching || !errors.Is(ev.Err, zk.ErrSessionExpired) {
			t.Fatalf("the old session's watch got %+v, want EventNotWatching with ErrSessionExpired", ev)
		}
		_, _, ch, err = c.ExistsW("/none")
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		want = []string{"EventSession StateDisconnected", "EventNotWatching StateDisconnected " + zk.ErrClosing.Error()}
		if got := log.take(); !slices.Equal(got, want) {
			t.Fatalf("at close: %q, want %q", got, want)
		}
		if ev := <-ch; ev.Type != zk.EventNotWatching || !errors.Is(ev.Err, zk.ErrClosing) {
			t.Fatalf("a watch at close got %+v, want EventNotWatching with ErrClosing", ev)
		}
		if _, _, err := c.Get("/"); !errors.Is(err, zk.ErrConnectionClosed) {
			t.Fatalf("get after close: %v, want zk.ErrConnectionClosed", err)
		}
	})
}

func TestWatchEventsAsGoZookeeper(t *testing.T) {
	s := New()
	var log eventLog
	c := s.Connect(zkconn.Options{SessionTimeout: time.Second, OnEvent: log.on})
	t.Cleanup(c.Close)
	other := connect(t, s, time.Second)
	if _, err := other.Create("/w", nil, zk.FlagPersistent, nil); err != nil {
		t.Fatal(err)
	}
	_ = log.take()
	_, _, ech, err := c.ExistsW("/w")
	if err != nil {
		t.Fatal(err)
	}
	_, _, cch, err := c.ChildrenW("/w")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Delete("/w", -1); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan zk.Event{ech, cch} {
		ev := <-ch
		if ev.Type != zk.EventNodeDeleted || ev.State != zk.StateSyncConnected {
			t.Fatalf("watch event %+v, want EventNodeDeleted in StateSyncConnected", ev)
		}
		if _, ok := <-ch; ok {
			t.Fatal("a fired watch channel stays open")
		}
	}
	if got, want := log.take(), []string{"EventNodeDeleted StateSyncConnected"}; !slices.Equal(got, want) {
		t.Fatalf("callback got %q, want %q (one event for the client's two watches)", got, want)
	}
}

func TestStatsZxidsAndNamesAsZooKeeper(t *testing.T) {
	s := New()
	c := connect(t, s, time.Second)
	for _, p := range []string{"/m", "/m/v", "/o"} {
		if _, err := c.Create(p, nil, zk.FlagPersistent, nil); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.Multi(&zk.CreateRequest{Path: "/m/c"}, &zk.SetDataRequest{Path: "/m/c", Data: []byte("x"), Version: 0},
		&zk.DeleteRequest{Path: "/m/v", Version: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, st, _ := c.Get("/m")
	if resp[1].Stat.Czxid != resp[1].Stat.Mzxid || st.Pzxid != resp[1].Stat.Mzxid {
		t.Fatalf("multi's stats %+v and parent's %+v: want one zxid for the whole multi", resp[1].Stat, st)
	}
	resp, _ = c.Multi(&zk.CheckVersionRequest{Path: "/m", Version: -1}, &zk.CheckVersionRequest{Path: "/m", Version: 9},
		&zk.CheckVersionRequest{Path: "/m", Version: -1})
	if e := resp[2].Error; e == nil || e.Error() != "unknown error: -2" {
		t.Fatalf("the op after the failed one: %v, want go-zookeeper's \"unknown error: -2\"", e)
	}
	if _, st, err := c.Get("/none"); !errors.Is(err, zk.ErrNoNode) || st == nil || *st != (zk.Stat{}) {
		t.Fatalf("get of a missing znode: %+v %v, want a zero Stat and ErrNoNode", st, err)
	}
	if st, err := c.Set("/m", nil, 7); !errors.Is(err, zk.ErrBadVersion) || st == nil || *st != (zk.Stat{}) {
		t.Fatalf("set at a wrong version: %+v %v, want a zero Stat and ErrBadVersion", st, err)
	}
	if _, _, err := c.Get("/m/./c"); err != zk.ErrInvalidPath {
		t.Fatalf("get of /m/./c: %v, want zk.ErrInvalidPath itself", err)
	}
	if p, err := c.Create("/m/", nil, zk.FlagSequence, nil); err != nil || p != "/m/0000000002" {
		t.Fatalf("sequential create under /m/: %q %v, want /m/0000000002 (2 children created before)", p, err)
	}
	// Seen on ZooKeeper 3.8: its HashSet's order.
	for _, n := range []string{"zeta", "alpha", "m-0000000012", "m-0000000003", "worker-7", "b", "lease-42", "a1", "0"} {
		if _, err := c.Create("/o/"+n, nil, zk.FlagPersistent, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"zeta", "a1", "0", "b", "worker-7", "m-0000000003", "m-0000000012", "alpha", "lease-42"}
	if got, _, _ := c.Children("/o"); !slices.Equal(got, want) {
		t.Fatalf("children %q, want ZooKeeper's order %q", got, want)
	}
}
