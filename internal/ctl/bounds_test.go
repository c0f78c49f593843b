package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/server"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// realNode serves a node's API (the real server, a generator of layout l)
// on 127.0.0.1 and returns its URL.
func realNode(t *testing.T, l snowflake.Layout) string {
	t.Helper()
	gen, err := snowflake.NewGenerator(snowflake.Config{Layout: l, WorkerID: 5, Clock: clock.NewSystem()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{IDs: gen, Guard: health.New(zerolog.Nop(), nil), Clock: clock.NewSystem(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

func TestBounds(t *testing.T) {
	node := realNode(t, snowflake.DefaultLayout())
	const epoch = 1704067200000
	minID := strconv.FormatInt((1767225600000-epoch)<<22, 10)
	maxID := strconv.FormatInt((1767225601000-epoch)<<22-1, 10)
	tests := []struct {
		name    string
		args    []string
		code    int
		wantOut []string
		wantErr string
	}{
		{"text", []string{"bounds", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T01:00:01+01:00", "--node", node}, 0, []string{
			"from      2026-01-01T00:00:00.000Z  (1767225600000)",
			"to        2026-01-01T00:00:01.000Z  (1767225601000, excluded)",
			"min_id    " + minID, "max_id    " + maxID,
			"min_uuid  019b76da-a800-7000-8000-000000000000", "max_uuid  019b76da-abe7-7fff-bfff-ffffffffffff",
		}, ""},
		{"unix ms, node with a slash", []string{"bounds", "--from", "1767225600000", "--to", "1767225601000", "--node", node + "/"}, 0, []string{"min_id    " + minID}, ""},
		{"flags first", []string{"--node", node, "bounds", "--from", "1767225600000", "--to", "1767225601000"}, 0, []string{"max_id    " + maxID}, ""},
		{"reversed", []string{"bounds", "--from", "2026-01-02T00:00:00Z", "--to", "2026-01-01T00:00:00Z", "--node", node}, 2, nil, "invalid_range: the range is reversed"},
		{"before the epoch", []string{"bounds", "--from", "2000-01-01T00:00:00Z", "--to", "2026-01-01T00:00:00Z", "--node", node}, 2, nil, "before the layout's epoch"},
		{"no to", []string{"bounds", "--from", "2026-01-01T00:00:00Z", "--node", node}, 2, nil, "--from and --to are required"},
		{"bad node", []string{"bounds", "--from", "1", "--to", "2", "--node", "127.0.0.1:8080"}, 2, nil, "not an http(s) URL"},
		{"positional", []string{"bounds", "x", "--from", "1", "--to", "2"}, 2, nil, `unexpected argument "x"`},
		{"node down", []string{"bounds", "--from", "1767225600000", "--to", "1767225601000", "--node", "http://" + closedAddr(t)}, 1, nil, "snowflakectl bounds:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(tt.args, &out, &errOut)
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tt.code, out.String(), errOut.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w+"\n") {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tt.wantErr)
			}
		})
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"bounds", "--json", "--from", "1767225600000", "--to", "1767225601000", "--node", node}, &out, &errOut); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut.String())
	}
	var b wire.BoundsBody
	if err := json.Unmarshal(out.Bytes(), &b); err != nil || b.MinID != minID || b.MaxID != maxID || b.FromMS != 1767225600000 {
		t.Fatalf("--json: %s: %+v, %v", out.String(), b, err)
	}
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
