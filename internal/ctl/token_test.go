package ctl

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	snowflaked "codeberg.org/snowflaked/snowflaked/node"
	"codeberg.org/snowflaked/snowflaked/segment"
)

// startTokenNode runs a standalone node (node.Run, in process) with
// --api-tokens-file holding token, and returns its address once ready.
func startTokenNode(t *testing.T, token string) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "api-tokens")
	if err := os.WriteFile(file, []byte("# callers\n"+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testsupport.ClosedAddr(t)
	var cfg snowflaked.Config
	fs := flag.NewFlagSet("snowflaked", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"--listen", addr, "--worker-id", "5", "--cache-file", filepath.Join(dir, "cache.json"),
		"--ntp", "", "--api-tokens-file", file}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- snowflaked.Run(ctx, cfg, zerolog.Nop()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("node.Run: %v", err)
		}
	})
	testsupport.Poll(t, 20*time.Second, 20*time.Millisecond, "the node in service", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return addr
}

// get and bench send --token (or the token of --token-file) as
// Authorization: Bearer to a node run with --api-tokens-file; without one,
// or with a wrong one, the node's answer (token_required, token_invalid)
// is the error.
func TestGetAndBenchSendTheAPIToken(t *testing.T) {
	tok := segment.NewToken()
	addr := startTokenNode(t, tok)
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	twoLines := filepath.Join(dir, "two")
	if err := os.WriteFile(twoLines, []byte(tok+"\n"+tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cmd string
		args      []string
		code      int
		out, err  string
	}{
		{"get without a token", "get", nil, exitFailure, "", "token_required"},
		{"get with a wrong token", "get", []string{"--token", segment.NewToken()}, exitFailure, "", "token_invalid"},
		{"get --token", "get", []string{"--token", tok, "--count", "3"}, exitOK, "\n", ""},
		{"get --token-file", "get", []string{"--token-file", tokFile}, exitOK, "\n", ""},
		{"get --uuid --token", "get", []string{"--uuid", "--token", tok}, exitOK, "-7", ""},
		{"bench --token-file", "bench", []string{"--token-file", tokFile, "--duration", "300ms", "--concurrency", "2"}, exitOK, "IDs/s", ""},
		{"bench without a token", "bench", []string{"--duration", "300ms", "--concurrency", "2"}, exitFailure, "", "token_required"},
		{"both", "get", []string{"--token", tok, "--token-file", tokFile}, exitUsage, "", "give --token or --token-file, not both"},
		{"missing file", "get", []string{"--token-file", filepath.Join(dir, "none")}, exitUsage, "", "--token-file"},
		{"two lines", "get", []string{"--token-file", twoLines}, exitUsage, "", "want one token on one line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{tc.cmd, "--servers", addr, "--timeout", "3s"}, tc.args...)
			if code := Main(args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.err) {
				t.Errorf("stdout %q (want %q), stderr %q (want %q)", stdout.String(), tc.out, stderr.String(), tc.err)
			}
			if strings.Contains(stderr.String(), tok) {
				t.Errorf("the token shows on stderr: %q", stderr.String())
			}
		})
	}
}
