package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	testproc "codeberg.org/snowflaked/snowflaked/tests/proc"
)

// No start of either binary, not even --help, prints a stray line: stderr
// stays empty (a library that logs from its initializer, as
// VictoriaMetrics/metrics once did with "INFO: metrics: disable exposing
// PSI metrics ...", would write there before main could route the standard
// logger). Once running, every line is one JSON object naming each key once, including what the HTTP
// library says about clients that send garbage.
func TestIntegration_EveryLogLineIsJSON(t *testing.T) {
	for _, tc := range []struct {
		bin  string
		args []string
	}{
		{binSnowflaked, []string{"--help"}},
		{binSnowflaked, []string{"--version"}},
		{binChaos, []string{"--version"}},
		{binCtl, []string{"--help"}},
		{binCtl, []string{"decode", "1"}},
	} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(tc.bin, tc.args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stdout.Len() == 0 || stderr.Len() > 0 {
			t.Errorf("%s %v: %v, %d bytes out, stderr (want none):\n%s", filepath.Base(tc.bin), tc.args, err, stdout.Len(), stderr.String())
		}
	}

	// A normal start, a scrape, and clients that send garbage (not HTTP, a
	// TLS hello, a body beyond the limit) on many connections: every line on
	// stderr is JSON, and the HTTP library's complaints are rate-limited.
	p := startNode(t, binSnowflaked, nodeArgs(t.TempDir(), 4))
	p.waitReadyz(http.StatusOK, readyTimeout)
	if code, body := p.get("/metrics"); code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	sendGarbage(t, p.addr, 40)
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	library := 0
	for _, line := range strings.Split(strings.TrimSpace(p.Output()), "\n") {
		if err := testproc.CheckJSONLine([]byte(line)); err != nil {
			t.Errorf("a line that is not one JSON object with each key once: %v: %q", err, line)
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("a line that is not JSON: %q", line)
		}
		if m["component"] == "http" {
			library++
		}
	}
	// 40 bad connections within the read timeout (10s): at most 11 periods
	// of 10 lines.
	if library == 0 || library > 110 {
		t.Errorf("%d lines from the HTTP library for 40 bad connections, want 1..110", library)
	}
}

// sendGarbage opens n connections to addr at once and sends on each what
// is not a request the server can read, waiting for it to close them.
func sendGarbage(t *testing.T, addr string, n int) {
	t.Helper()
	hello := "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + strings.Repeat("\x00", 160)
	big := "POST /ids HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n"
	payloads := []string{"GARBAGE\r\n\r\n", hello, big}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := io.WriteString(c, payloads[i%len(payloads)]); err == nil {
				_, _ = io.Copy(io.Discard, c)
			}
		})
	}
	wg.Wait()
}
