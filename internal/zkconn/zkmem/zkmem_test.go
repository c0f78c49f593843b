package zkmem

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

func connect(t *testing.T, s *Server, timeout time.Duration) *Conn {
	t.Helper()
	c := s.Connect(zkconn.Options{SessionTimeout: timeout})
	t.Cleanup(c.Close)
	return c
}

func TestZnodeSemantics(t *testing.T) {
	s := New()
	c := connect(t, s, time.Second)
	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{"create", func() error { _, err := c.Create("/a", []byte("1"), zk.FlagPersistent, nil); return err }, nil},
		{"create again", func() error { _, err := c.Create("/a", nil, zk.FlagPersistent, nil); return err }, zk.ErrNodeExists},
		{"create without parent", func() error { _, err := c.Create("/x/y", nil, zk.FlagPersistent, nil); return err }, zk.ErrNoNode},
		{"set right version", func() error { _, err := c.Set("/a", []byte("2"), 0); return err }, nil},
		{"set stale version", func() error { _, err := c.Set("/a", []byte("3"), 0); return err }, zk.ErrBadVersion},
		{"child of ephemeral", func() error {
			if _, err := c.Create("/e", nil, zk.FlagEphemeral, nil); err != nil {
				return err
			}
			_, err := c.Create("/e/c", nil, zk.FlagPersistent, nil)
			return err
		}, zk.ErrNoChildrenForEphemerals},
		{"delete with children", func() error {
			if _, err := c.Create("/a/b", nil, zk.FlagPersistent, nil); err != nil {
				return err
			}
			return c.Delete("/a", -1)
		}, zk.ErrNotEmpty},
		{"delete stale version", func() error { return c.Delete("/a/b", 3) }, zk.ErrBadVersion},
		{"multi fails whole", func() error {
			_, err := c.Multi(&zk.CreateRequest{Path: "/m", Flags: zk.FlagPersistent}, &zk.CheckVersionRequest{Path: "/a", Version: 0})
			return err
		}, zk.ErrBadVersion},
		{"multi left nothing", func() error { _, _, err := c.Get("/m"); return err }, zk.ErrNoNode},
	}
	for _, st := range steps {
		if err := st.do(); !errors.Is(err, st.want) {
			t.Fatalf("%s: got %v, want %v", st.name, err, st.want)
		}
	}
	data, stat, err := c.Get("/a")
	if err != nil || string(data) != "2" || stat.Version != 1 || stat.NumChildren != 1 {
		t.Fatalf("/a = %q %+v %v; want \"2\", version 1, one child", data, stat, err)
	}
}

// As ZooKeeper's, a sequential suffix counts the children created, not the
// deletes, while the parent's cversion counts both.
func TestSequentialNamesCountCreatesNotDeletes(t *testing.T) {
	s := New()
	c := connect(t, s, time.Second)
	if _, err := c.Create("/w", nil, zk.FlagPersistent, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		p, err := c.Create("/w/n-", nil, zk.FlagSequence, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if err := c.Delete(got[2], -1); err != nil {
		t.Fatal(err)
	}
	p, err := c.Create("/w/n-", nil, zk.FlagSequence, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/w/n-0000000000", "/w/n-0000000001", "/w/n-0000000002"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sequential names %v, want %v", got, want)
		}
	}
	if p != "/w/n-0000000003" {
		t.Fatalf("after a delete the next name is %s, want /w/n-0000000003 (as ZooKeeper)", p)
	}
	if _, st, err := c.Get("/w"); err != nil || st.Cversion != 5 {
		t.Fatalf("parent's stat %+v %v, want cversion 5 (4 creates, 1 delete)", st, err)
	}
}

func TestFaults(t *testing.T) {
	cases := []struct {
		name        string
		fault       Fault
		wantErr     error
		wantApplied bool
		wantExpired bool
	}{
		{"drop", Fault{Kind: Drop}, zk.ErrConnectionClosed, false, false},
		{"lose answer", Fault{Kind: LoseAnswer}, zk.ErrConnectionClosed, true, false},
		{"delay", Fault{Delay: 3 * time.Second}, nil, true, false},
		{"lose answer, down past the session timeout", Fault{Kind: LoseAnswer, Down: 2 * time.Second}, zk.ErrConnectionClosed, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New()
				c := connect(t, s, time.Second)
				if _, err := c.Create("/eph", nil, zk.FlagEphemeral, nil); err != nil {
					t.Fatal(err)
				}
				before := c.SessionID()
				s.SetInjector(func(r Request) Fault {
					if r.Op == "create" {
						return tc.fault
					}
					return Fault{}
				})
				start := time.Now()
				_, err := c.Create("/x", nil, zk.FlagPersistent, nil)
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("create: %v, want %v", err, tc.wantErr)
				}
				if took := time.Since(start); took < tc.fault.Delay {
					t.Fatalf("answered after %v, before the %v delay", took, tc.fault.Delay)
				}
				s.SetInjector(nil)
				time.Sleep(3 * time.Second)
				if got := c.State(); got != zk.StateHasSession {
					t.Fatalf("state %v after the break, want it back", got)
				}
				if _, _, ok := s.Get("/x"); ok != tc.wantApplied {
					t.Fatalf("applied = %v, want %v", ok, tc.wantApplied)
				}
				_, _, eph := s.Get("/eph")
				if expired := c.SessionID() != before; expired != tc.wantExpired || eph == expired {
					t.Fatalf("session changed = %v (ephemeral kept %v), want expired = %v", expired, eph, tc.wantExpired)
				}
			})
		})
	}
}

func TestVanishExpiresTheSessionAfterItsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := s.Connect(zkconn.Options{SessionTimeout: time.Second})
		if _, err := c.Create("/eph", nil, zk.FlagEphemeral, nil); err != nil {
			t.Fatal(err)
		}
		watcher := connect(t, s, time.Second)
		_, _, ch, err := watcher.ExistsW("/eph")
		if err != nil {
			t.Fatal(err)
		}
		vanished := time.Now()
		c.Vanish()
		if _, err := c.Create("/late", nil, zk.FlagPersistent, nil); !errors.Is(err, zk.ErrConnectionClosed) {
			t.Fatalf("a vanished client's request: %v, want zk.ErrConnectionClosed", err)
		}
		time.Sleep(999 * time.Millisecond)
		if _, _, ok := s.Get("/eph"); !ok {
			t.Fatal("ephemeral gone before the session timeout")
		}
		ev := <-ch
		if ev.Type != zk.EventNodeDeleted || time.Since(vanished) != time.Second {
			t.Fatalf("watch event %+v %v after the kill, want EventNodeDeleted after the 1s session timeout", ev, time.Since(vanished))
		}
	})
}

// A connection's requests are processed in the order they were sent: a
// read sent after a delayed write (its caller gave up waiting) sees it.
func TestOneConnectionsRequestsStayInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := connect(t, s, 10*time.Second)
		if _, err := c.Create("/a", []byte("old"), zk.FlagPersistent, nil); err != nil {
			t.Fatal(err)
		}
		s.SetInjector(func(r Request) Fault {
			if r.Op == "set" {
				return Fault{Delay: 2 * time.Second}
			}
			return Fault{}
		})
		go func() { _, _ = c.Set("/a", []byte("new"), -1) }()
		synctest.Wait() // the write is sent, and held
		data, _, err := c.Get("/a")
		if err != nil || string(data) != "new" {
			t.Fatalf("read after a held write: %q %v, want \"new\"", data, err)
		}
	})
}

// A request made while the connection is down waits for the reconnect and
// is applied then, as go-zookeeper queues it, even if its caller gave up.
func TestRequestsWhileDisconnectedGoOutAtTheReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := connect(t, s, 10*time.Second)
		s.SetInjector(func(r Request) Fault {
			if r.Path == "/first" {
				return Fault{Kind: Drop, Down: 2 * time.Second}
			}
			return Fault{}
		})
		if _, err := c.Create("/first", nil, zk.FlagPersistent, nil); !errors.Is(err, zk.ErrConnectionClosed) {
			t.Fatalf("dropped create: %v", err)
		}
		start := time.Now()
		if _, err := c.Create("/queued", nil, zk.FlagPersistent, nil); err != nil {
			t.Fatalf("create while disconnected: %v, want it sent at the reconnect", err)
		}
		if took := time.Since(start); took != 2*time.Second {
			t.Fatalf("the queued create answered after %v, want at the reconnect (2s)", took)
		}
		if _, _, ok := s.Get("/queued"); !ok {
			t.Fatal("the queued create was not applied")
		}
	})
}
