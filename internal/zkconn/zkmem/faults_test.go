package zkmem

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// TestRestoreForgetsWhatWasAcknowledgedSince: a restore puts the tree of
// the snapshot back (writes, creates, deletes and ephemerals since are
// forgotten), sessions live on, the watches on what changed fire, and the
// zxids of a new epoch are above every earlier one, so a znode created
// again is a new incarnation.
func TestRestoreForgetsWhatWasAcknowledgedSince(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := connect(t, s, 10*time.Second)
		other := connect(t, s, 10*time.Second)
		for _, p := range []string{"/a", "/gone"} {
			if _, err := c.Create(p, []byte("1"), zk.FlagPersistent, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := other.Create("/eph-old", nil, zk.FlagEphemeral, nil); err != nil {
			t.Fatal(err)
		}
		snap := s.Snapshot()
		if _, err := c.Set("/a", []byte("2"), 0); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete("/gone", -1); err != nil {
			t.Fatal(err)
		}
		forgotten, err := c.Create("/new", nil, zk.FlagPersistent, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, st, _ := c.Exists(forgotten)
		forgottenCzxid := st.Czxid
		if _, err := c.Create("/eph-new", nil, zk.FlagEphemeral, nil); err != nil {
			t.Fatal(err)
		}
		_, _, dataW, err := c.ExistsW("/a")
		if err != nil {
			t.Fatal(err)
		}
		_, _, newW, err := c.ExistsW("/new")
		if err != nil {
			t.Fatal(err)
		}
		_, _, rootW, err := c.ChildrenW("/")
		if err != nil {
			t.Fatal(err)
		}
		before := s.Zxid()
		session := c.SessionID()
		other.Close() // its ephemeral is in the snapshot: it goes at the restore

		s.Restore(snap)

		if b, v, ok := s.Get("/a"); !ok || string(b) != "1" || v != 0 {
			t.Errorf("/a after the restore = %q version %d (%v), want the snapshot's \"1\" version 0", b, v, ok)
		}
		for p, want := range map[string]bool{"/gone": true, "/new": false, "/eph-new": false, "/eph-old": false} {
			if _, _, ok := s.Get(p); ok != want {
				t.Errorf("%s exists after the restore: %v, want %v", p, ok, want)
			}
		}
		for name, tc := range map[string]struct {
			ch   <-chan zk.Event
			want zk.EventType
		}{"data of /a": {dataW, zk.EventNodeDataChanged}, "/new": {newW, zk.EventNodeDeleted}, "children of /": {rootW, zk.EventNodeChildrenChanged}} {
			select {
			case e := <-tc.ch:
				if e.Type != tc.want {
					t.Errorf("watch on %s fired %v, want %v", name, e.Type, tc.want)
				}
			default:
				t.Errorf("watch on %s did not fire", name)
			}
		}
		synctest.Wait() // the election's break ends
		time.Sleep(2 * defaultDown)
		if c.SessionID() != session || c.State() != zk.StateHasSession {
			t.Fatalf("session %x state %v after the restore, want %x with a session", c.SessionID(), c.State(), session)
		}
		again, err := c.Create("/new", nil, zk.FlagPersistent, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, st, _ = c.Exists(again)
		if st.Czxid <= before || st.Czxid == forgottenCzxid || st.Czxid>>32 != before>>32+1 {
			t.Fatalf("created again after the restore: czxid %#x; want a new epoch's, above %#x (the forgotten one was %#x)", st.Czxid, before, forgottenCzxid)
		}
	})
}

// TestSessionMovedFailsTheRequestsInFlight: a request whose session moved
// is not applied and fails with zk.ErrSessionMoved, as does the request
// sent behind it on the same connection; the connection comes back on the
// same session and serves the next request. zkclient counts the error as
// transient.
func TestSessionMovedFailsTheRequestsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := connect(t, s, 10*time.Second)
		n := 0
		s.SetInjector(func(r Request) Fault {
			n++
			switch n {
			case 1:
				return Fault{Kind: SessionMoved, Delay: 100 * time.Millisecond, Down: 200 * time.Millisecond}
			case 2:
				return Fault{Delay: 50 * time.Millisecond} // sent behind it, on the old connection
			}
			return Fault{}
		})
		session := c.SessionID()
		errs := make(chan error, 2)
		go func() { _, err := c.Create("/a", nil, zk.FlagPersistent, nil); errs <- err }()
		synctest.Wait()
		go func() { _, err := c.Create("/b", nil, zk.FlagPersistent, nil); errs <- err }()
		for range 2 {
			if err := <-errs; !errors.Is(err, zk.ErrSessionMoved) {
				t.Fatalf("a request in flight when the session moved: %v, want zk.ErrSessionMoved", err)
			}
		}
		if !zkclient.Transient(zk.ErrSessionMoved) {
			t.Fatal("zkclient does not count zk.ErrSessionMoved as transient")
		}
		for _, p := range []string{"/a", "/b"} {
			if _, _, ok := s.Get(p); ok {
				t.Fatalf("%s was applied although its session moved", p)
			}
		}
		if _, err := c.Create("/c", nil, zk.FlagPersistent, nil); err != nil {
			t.Fatalf("after the reconnect: %v", err)
		}
		if c.SessionID() != session {
			t.Fatalf("session %x after the move, want %x", c.SessionID(), session)
		}
	})
}

// TestLateAnswerArrivesAfterTheCallerGaveUp: a LateAnswer write is
// applied at once (another session reads it) while zkclient's bounded call
// gives up; the answer comes after the hold, and the connection's next
// request is answered only after it.
func TestLateAnswerArrivesAfterTheCallerGaveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := connect(t, s, 10*time.Second)
		reader := connect(t, s, 10*time.Second)
		late := c.SessionID()
		s.SetInjector(func(r Request) Fault {
			if r.Session == late && r.Op == "create" && r.Path == "/a" {
				return Fault{Kind: LateAnswer, Hold: 5 * time.Second}
			}
			return Fault{}
		})
		z := zkclient.Client{Conn: c, Timeout: 2 * time.Second}
		start := time.Now()
		answered := make(chan time.Duration, 1)
		go func() {
			_, err := c.Create("/a", nil, zk.FlagPersistent, nil)
			if err != nil {
				t.Errorf("the late answer: %v", err)
			}
			answered <- time.Since(start)
		}()
		synctest.Wait()
		if _, _, ok := s.Get("/a"); !ok {
			t.Fatal("a LateAnswer request was not applied at once")
		}
		if ok, _, err := reader.Exists("/a"); err != nil || !ok {
			t.Fatalf("another session does not see the write: %v %v", ok, err)
		}
		if _, err := z.Create(context.Background(), "/b", nil, zk.FlagPersistent, nil); !errors.Is(err, zkclient.ErrOpTimeout) {
			t.Fatalf("a bounded call behind the late answer: %v, want zkclient.ErrOpTimeout", err)
		}
		if got := <-answered; got != 5*time.Second {
			t.Fatalf("the answer came after %v, want 5s", got)
		}
		synctest.Wait()
		if _, _, ok := s.Get("/b"); !ok {
			t.Fatal("the request behind the late answer was not applied")
		}
	})
}

// TestRebuildStartsAnEmptyEnsemble: a rebuilt server holds only "/",
// expires every session, and gives a znode created again in the same
// order the creation zxid it had before (what makes a rebuilt ensemble
// indistinguishable by zxid: the cluster's incarnation tells them apart).
func TestRebuildStartsAnEmptyEnsemble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		c := connect(t, s, 10*time.Second)
		create := func() int64 {
			t.Helper()
			for _, p := range []string{"/a", "/a/b"} {
				if _, err := c.Create(p, nil, zk.FlagPersistent, nil); err != nil {
					t.Fatal(err)
				}
			}
			_, st, err := c.Exists("/a/b")
			if err != nil {
				t.Fatal(err)
			}
			return st.Czxid
		}
		before, session := create(), c.SessionID()
		s.Rebuild()
		if _, _, ok := s.Get("/a"); ok {
			t.Fatal("/a survived the rebuild")
		}
		time.Sleep(2 * defaultDown)
		if c.SessionID() == session || c.State() != zk.StateHasSession {
			t.Fatalf("session %x state %v after the rebuild, want a new session", c.SessionID(), c.State())
		}
		if after := create(); after != before {
			t.Fatalf("created again in the same order after the rebuild: czxid %#x, want %#x as before", after, before)
		}
	})
}
