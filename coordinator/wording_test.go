package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// The fence check's detail says "behind" for a fence the clock has passed,
// never a negative "ahead".
func TestFenceDetail(t *testing.T) {
	for _, tc := range []struct {
		headroom time.Duration
		want     string
		not      string
	}{
		{1500 * time.Millisecond, "ZooKeeper fence 1.5s ahead of the clock", "behind"},
		{-4001 * time.Millisecond, "ZooKeeper fence 4.001s behind the clock", "-"},
		{0, "ZooKeeper fence 0s ahead of the clock", "behind"},
	} {
		got := fenceDetail(tc.headroom, 20*time.Second, time.Minute, "timeout")
		if !strings.Contains(got, tc.want) || strings.Contains(strings.SplitN(got, "(", 2)[0], tc.not) {
			t.Errorf("fenceDetail(%v) = %q, want %q and no %q before the parenthesis", tc.headroom, got, tc.want, tc.not)
		}
	}
}

// The detail of a missing session does not read as a contradiction of the
// connection state it names: StateConnected is a connection without a
// session.
func TestNoSessionDetail(t *testing.T) {
	for _, tc := range []struct {
		state zk.State
		want  string
	}{
		{zk.StateConnected, "no ZooKeeper session (connection state StateConnected: connected to a server, no session established on it yet)"},
		{zk.StateDisconnected, "no ZooKeeper session (connection state StateDisconnected: not connected to a server)"},
		{zk.StateConnecting, "no ZooKeeper session (connection state StateConnecting: connecting to a server)"},
		{zk.StateExpired, "no ZooKeeper session (connection state StateExpired: the session expired)"},
	} {
		if got := noSessionDetail(tc.state); got != tc.want {
			t.Errorf("noSessionDetail(%v) = %q, want %q", tc.state, got, tc.want)
		}
	}
}
