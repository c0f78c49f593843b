package server

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// GET /cluster/nodes answers Config.ClusterNodes' list as a
// wire.ClusterNodesBody, given the address the request came in on; an empty
// list (or none configured) is {"nodes":[]}, never null. Other methods are
// 405.
func TestClusterNodes(t *testing.T) {
	tests := []struct {
		name  string
		nodes func(net.Addr) []wire.ClusterNode // nil: Config.ClusterNodes unset
		want  string
	}{
		{"unset", nil, `{"nodes":[]}`},
		{"nil list", func(net.Addr) []wire.ClusterNode { return nil }, `{"nodes":[]}`},
		{"two", func(net.Addr) []wire.ClusterNode {
			return []wire.ClusterNode{{WorkerID: 1, Addr: "10.0.0.1:8080"}, {WorkerID: 4, Addr: "10.0.0.4:8080"}}
		}, `{"nodes":[{"worker_id":1,"addr":"10.0.0.1:8080"},{"worker_id":4,"addr":"10.0.0.4:8080"}]}`},
		{"the request's local address", func(local net.Addr) []wire.ClusterNode {
			if local == nil {
				return nil
			}
			return []wire.ClusterNode{{WorkerID: 0, Addr: "local:" + local.Network()}}
		}, `{"nodes":[{"worker_id":0,"addr":"local:inmemory"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
				c.ClusterNodes = tc.nodes
				c.Observer = obs
			}).serve(t)
			r := f.do(t, "GET", wire.PathClusterNodes)
			if r.status != fasthttp.StatusOK || r.contentType != "application/json" || string(r.body) != tc.want {
				t.Fatalf("GET %s: %d %q %s; want 200 %s", wire.PathClusterNodes, r.status, r.contentType, r.body, tc.want)
			}
			if got, _ := obs.snapshot(); len(got) != 1 || got[0] != "nodes 200" {
				t.Fatalf("observed %q, want one nodes 200", got)
			}
			if r := f.do(t, "POST", wire.PathClusterNodes); r.status != fasthttp.StatusMethodNotAllowed {
				t.Fatalf("POST: %d %s", r.status, r.body)
			}
		})
	}
}
