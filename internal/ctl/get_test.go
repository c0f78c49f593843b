package ctl

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"
)

// fakeIDs serves /ids?count=N with increasing IDs on 127.0.0.1.
func fakeIDs(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Int64
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		n, err := strconv.Atoi(string(ctx.QueryArgs().Peek("count")))
		if err != nil || string(ctx.Path()) != "/ids" {
			ctx.SetStatusCode(404)
			return
		}
		var b strings.Builder
		for range n {
			fmt.Fprintf(&b, "%d\n", next.Add(1))
		}
		ctx.SetBodyString(b.String())
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

func TestGetAndBench(t *testing.T) {
	addr := fakeIDs(t)
	tests := []struct {
		name     string
		cmd      func([]string, *bytes.Buffer, *bytes.Buffer) int
		args     []string
		code     int
		out, err string
	}{
		{"get 5", runCmd(get), []string{"--count", "5", "--servers", addr}, exitOK, "1\n2\n3\n4\n5\n", ""},
		{"get without a cluster", runCmd(get), []string{"--count", "5"}, exitUsage, "", "give --servers"},
		{"get with both", runCmd(get), []string{"--servers", addr, "--zk", "127.0.0.1:1"}, exitUsage, "", "give --servers"},
		{"get count 0", runCmd(get), []string{"--servers", addr, "--count", "0"}, exitUsage, "", "--count 0"},
		{"get from nothing", runCmd(get), []string{"--servers", "127.0.0.1:1", "--timeout", "2s"}, exitFailure, "", "no snowflaked node available"},
		{"bench", runCmd(bench), []string{"--servers", addr, "--duration", "300ms", "--concurrency", "4"}, exitOK, "IDs/s", ""},
		{"bench off loopback is refused", runCmd(bench), []string{"--servers", "10.1.2.3:8080", "--duration", "1s"}, exitUsage, "", "not a loopback address"},
		{"get stray argument", runCmd(get), []string{"--servers", addr, "5"}, exitUsage, "", `unexpected arguments ["5"]`},
		{"bench stray argument", runCmd(bench), []string{"--servers", addr, "--duration", "300ms", "extra"}, exitUsage, "", `unexpected arguments ["extra"]`},
		{"bench bad duration", runCmd(bench), []string{"--servers", addr, "--duration", "1h"}, exitUsage, "", "--duration 1h0m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := tc.cmd(tc.args, &out, &errb); code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.err) {
				t.Fatalf("stdout %q (want %q), stderr %q (want %q)", out.String(), tc.out, errb.String(), tc.err)
			}
		})
	}
}

func runCmd(f func([]string, io.Writer, io.Writer) int) func([]string, *bytes.Buffer, *bytes.Buffer) int {
	return func(args []string, out, errb *bytes.Buffer) int { return f(args, out, errb) }
}
