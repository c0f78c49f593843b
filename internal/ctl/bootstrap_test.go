package ctl

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// fakeSeed answers GET /cluster/nodes on 127.0.0.1 with nodes.
func fakeSeed(t *testing.T, nodes ...string) string {
	t.Helper()
	body := wire.ClusterNodesBody{Nodes: []wire.ClusterNode{}}
	for i, n := range nodes {
		body.Nodes = append(body.Nodes, wire.ClusterNode{WorkerID: int64(i), Addr: n})
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != wire.PathClusterNodes {
			ctx.SetStatusCode(404)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(b)
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// get and bench find the nodes through --bootstrap seeds, one of
// --servers, --bootstrap and --zk.
func TestGetAndBenchBootstrap(t *testing.T) {
	addr := fakeIDs(t)
	seed := fakeSeed(t, addr)
	farSeed := fakeSeed(t, "10.1.2.3:8080")
	tests := []struct {
		name     string
		cmd      string
		args     []string
		code     int
		out, err string
	}{
		{"get", "get", []string{"--count", "5", "--bootstrap", seed}, exitOK, "1\n2\n3\n4\n5\n", ""},
		{"get, a dead seed first", "get", []string{"--count", "2", "--bootstrap", "127.0.0.1:1," + seed}, exitOK, "\n", ""},
		{"bench", "bench", []string{"--bootstrap", seed, "--duration", "300ms", "--concurrency", "4"}, exitOK, "IDs/s", ""},
		{"bench off loopback is refused", "bench", []string{"--bootstrap", farSeed, "--duration", "1s"}, exitUsage, "", "not a loopback address"},
		{"with --servers", "get", []string{"--bootstrap", seed, "--servers", addr}, exitUsage, "", "only one"},
		{"with --zk", "bench", []string{"--bootstrap", seed, "--zk", "127.0.0.1:1"}, exitUsage, "", "only one"},
		{"all three", "get", []string{"--bootstrap", seed, "--zk", "127.0.0.1:1", "--servers", addr}, exitUsage, "", "only one"},
		{"none", "bench", []string{"--duration", "1s"}, exitUsage, "", "--bootstrap host:port"},
		{"not host:port", "get", []string{"--bootstrap", "seed-without-port"}, exitUsage, "", `--bootstrap seed-without-port: new bootstrap: invalid client config: seed "seed-without-port" is not host:port`},
		{"no seed answers", "get", []string{"--bootstrap", "127.0.0.1:1", "--timeout", "2s"}, exitFailure, "", "no snowflaked node available"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := runCmd(get)
			if tc.cmd == "bench" {
				run = runCmd(bench)
			}
			var out, errb bytes.Buffer
			if code := run(tc.args, &out, &errb); code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.err) {
				t.Fatalf("stdout %q (want %q), stderr %q (want %q)", out.String(), tc.out, errb.String(), tc.err)
			}
		})
	}
}
