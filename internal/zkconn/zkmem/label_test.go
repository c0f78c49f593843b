package zkmem

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestRequestsNameTheirClient: an Injector learns a labelled client's name
// and which of its sessions sent a request, whatever session ID the server
// handed out; after an expiry the same client's next session counts one
// more.
func TestRequestsNameTheirClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		var mu sync.Mutex
		var got []Request
		s.SetInjector(func(r Request) Fault {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, r)
			return Fault{}
		})
		other := connect(t, s, time.Second) // takes a session ID first
		c := connect(t, s, time.Second)
		c.SetLabel("n1/dial0")
		if label, renewal := c.Label(); label != "n1/dial0" || renewal != 1 {
			t.Fatalf("Label() = %q, %d, want \"n1/dial0\", 1", label, renewal)
		}
		steps := []struct {
			name    string
			conn    *Conn
			expire  bool
			client  string
			renewal int
		}{
			{"an unlabelled client", other, false, "", 1},
			{"a labelled client", c, false, "n1/dial0", 1},
			{"the labelled client after an expiry", c, true, "n1/dial0", 2},
		}
		for _, st := range steps {
			if st.expire {
				s.Expire(st.conn.SessionID())
				time.Sleep(time.Second) // it reconnects with a new session
			}
			mu.Lock()
			got = nil
			mu.Unlock()
			if _, _, err := st.conn.Exists("/"); err != nil {
				t.Fatalf("%s: exists: %v", st.name, err)
			}
			mu.Lock()
			reqs := got
			mu.Unlock()
			if len(reqs) != 1 {
				t.Fatalf("%s: the injector saw %d requests, want 1", st.name, len(reqs))
			}
			r := reqs[0]
			if r.Client != st.client || r.Renewal != st.renewal || r.Session != st.conn.SessionID() {
				t.Fatalf("%s: request %+v, want client %q, renewal %d, session %x", st.name, r, st.client, st.renewal, st.conn.SessionID())
			}
		}
		if st := c.State(); st != zk.StateHasSession {
			t.Fatalf("the labelled client's state %v, want StateHasSession", st)
		}
	})
}
