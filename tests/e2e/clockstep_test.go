package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// peerRounds reads the peer check's last round from GET /clock: when it
// ended (on the node's clock) and how many rounds the node has done.
func (p *proc) peerRounds() (checkedAt time.Time, rounds int64) {
	p.t.Helper()
	code, body := p.get("/clock")
	var rep struct {
		Peers *struct {
			CheckedAt time.Time `json:"checked_at"`
			Rounds    int64     `json:"rounds"`
		} `json:"peers"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil || rep.Peers == nil {
		p.t.Fatalf("/clock peers: %d %s", code, body)
	}
	return rep.Peers.CheckedAt, rep.Peers.Rounds
}

// A node whose clock steps, with slow regular peer rounds (30 s): the step
// itself starts a peer round, so the node is out of service by its peers'
// verdict (peer_offset) within 2 s, not at its next regular round. Either
// way: 5 s back, and forward within the fence headroom (--fence-ahead 1s,
// so no clock_jump) but beyond --peer-max-offset. The nodes start one after
// the other, so the last one's first round (at its start) already sees the
// other two and its next regular round is 30 s later. No ID is issued
// before the step, so the rollback check has nothing to trip on:
// peer_offset is what takes it out.
func TestIntegration_ClusterClockStepRechecksThePeersAtOnce(t *testing.T) {
	const interval = 30 * time.Second
	for _, tc := range []struct {
		name, offset, maxOffset string
	}{
		{"5s back", "-5s", "1s"},
		{"forward within the headroom", "800ms", "300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zk := zkharness.StartStandalone(t)
			var nodes []*proc
			for i := 1; i <= 3; i++ {
				p := startNode(t, binChaos, clusterArgs(t.TempDir(), zk.ConnectString(), "step", fmt.Sprintf("node-%d", i),
					"--peer-interval", interval.String(), "--peer-max-offset", tc.maxOffset))
				p.waitReadyz(http.StatusOK, readyTimeout)
				nodes = append(nodes, p)
			}
			stepped := nodes[2]
			stepped.waitClock(interval+readyTimeout, func(r clockReport) bool {
				return r.Peers != nil && r.Peers.Reachable == 2 && r.Peers.Agree == 3
			})
			lastRound, rounds := stepped.peerRounds()
			if since := time.Since(lastRound); since > interval-5*time.Second {
				t.Fatalf("the stepped node's last peer round ended %v ago: its next regular round could come within the bound", since)
			}

			start := time.Now()
			if code, body := stepped.do(http.MethodPost, "/debug/chaos/clock?offset="+tc.offset); code != http.StatusOK {
				t.Fatalf("chaos offset: %d %s", code, body)
			}
			rep := stepped.waitClock(10*time.Second, func(r clockReport) bool { return r.Failing["peer_offset"] != "" })
			took := time.Since(start)
			t.Logf("step %s: out of service (reason %s) after %v; failing: %v", tc.offset, rep.Reason, took.Round(time.Millisecond), rep.Failing)
			if took > 2*time.Second {
				t.Errorf("peer_offset %v after a step of %s, want within 2 s", took.Round(time.Millisecond), tc.offset)
			}
			if _, after := stepped.peerRounds(); after <= rounds {
				t.Errorf("peer rounds %d after the step, %d before: no round was started", after, rounds)
			}
			if code, body := stepped.get("/readyz"); code == http.StatusOK {
				t.Errorf("the stepped node is in service: %s", body)
			}
			for i, p := range nodes[:2] {
				if code, body := p.get("/readyz"); code != http.StatusOK {
					t.Errorf("node-%d (good clock) left service: %s", i+1, body)
				}
			}
		})
	}
}
