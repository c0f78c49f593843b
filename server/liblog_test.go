package server

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// The library's messages become JSON lines, at most libLogBurst per period;
// at the end of a period in which lines were dropped, one line counts them.
func TestLibLog_RateLimited(t *testing.T) {
	var buf testsupport.SyncBuffer
	now := time.Unix(1_700_000_000, 0)
	// As the node passes it: the component is set once, by the caller.
	l := newLibLog(zerolog.New(&buf).With().Str("component", "http").Logger(), func() time.Time { return now })
	var scheduled []time.Duration
	var flush func()
	l.after = func(d time.Duration, f func()) { scheduled, flush = append(scheduled, d), f }
	now = now.Add(100 * time.Millisecond)
	for i := range 25 {
		l.Printf("error when serving connection %q<->%q: %v", "127.0.0.1:8080", fmt.Sprintf("127.0.0.1:%d", 40000+i), "cannot parse")
	}
	if len(scheduled) != 1 || scheduled[0] != libLogPeriod {
		t.Fatalf("reports scheduled %v, want one at the end of the period (%v)", scheduled, libLogPeriod)
	}
	lines := buf.Lines(t, "")
	if len(lines) != libLogBurst {
		t.Fatalf("%d lines written, want %d:\n%s", len(lines), libLogBurst, buf.String())
	}
	flush()
	now = now.Add(libLogPeriod)
	l.Printf("Permanent error when accepting new connections: %v", "boom")
	lines = buf.Lines(t, "") // fails on a line that is not JSON
	if len(lines) != libLogBurst+2 {
		t.Fatalf("%d lines written, want %d:\n%s", len(lines), libLogBurst+2, buf.String())
	}
	for i, raw := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if n := strings.Count(raw, `"component"`); n != 1 {
			t.Errorf("line %d names the component %d times, want once: %s", i, n, raw)
		}
	}
	for i, m := range lines {
		if m["component"] != "http" {
			t.Errorf("line %d: component %v, want http", i, m["component"])
		}
		wantLevel, wantSuppressed := "info", any(nil)
		switch i {
		case libLogBurst:
			wantLevel, wantSuppressed = "warn", float64(25-libLogBurst)
		case libLogBurst + 1:
			wantLevel = "warn"
		}
		if m["level"] != wantLevel || m["suppressed"] != wantSuppressed {
			t.Errorf("line %d: level %v suppressed %v, want %s %v", i, m["level"], m["suppressed"], wantLevel, wantSuppressed)
		}
	}
	if msg, _ := lines[0]["message"].(string); !strings.Contains(msg, `127.0.0.1:40000`) {
		t.Errorf("first line lost the message: %v", lines[0])
	}
}

// Garbage on many connections (not HTTP, a body beyond the limit, a TLS
// hello) reaches the node's log as rate-limited JSON, never the library's
// plain-text logger: far more bad connections than the limit lets through
// in the time they take, and the dropped ones counted.
func TestLibLog_GarbageConnections(t *testing.T) {
	var buf testsupport.SyncBuffer
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
		c.Log = zerolog.New(&buf).With().Str("component", "http").Logger() // as the node passes it
		// An incomplete request ends soon.
		c.ReadTimeout = 100 * time.Millisecond
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(func() { _ = f.srv.Shutdown(t.Context()) })
	tlsHello := "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + strings.Repeat("\x00", 40)
	big := fmt.Sprintf("POST /ids HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", maxRequestBodySize+1)
	const conns = 400
	start := time.Now()
	for i := range conns {
		payload := "GARBAGE\r\n\r\n" // answered at once
		switch i {
		case 0:
			payload = tlsHello
		case 1:
			payload = big
		}
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, payload); err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(c) // the answer (a 400, 413 or nothing), then the close
		_ = c.Close()
	}
	elapsed := time.Since(start)
	periods := int(elapsed/libLogPeriod) + 2
	if conns <= libLogBurst*periods {
		t.Skipf("%d bad connections took %v: too slow to show the limit (%d lines allowed)", conns, elapsed, libLogBurst*periods)
	}
	testsupport.Poll(t, 5*time.Second, 10*time.Millisecond, "the count of dropped lines", func() bool {
		return strings.Contains(buf.String(), `"suppressed":`)
	})
	n := 0
	for _, m := range buf.Lines(t, "") { // fails on a line that is not JSON
		if m["component"] == "http" && m["suppressed"] == nil {
			n++
		}
	}
	if n == 0 || n > libLogBurst*periods {
		t.Errorf("%d library lines for %d bad connections in %v: want 1 to %d (%d per %v)", n, conns, elapsed, libLogBurst*periods, libLogBurst, libLogPeriod)
	}
	t.Logf("%d bad connections in %v: %d library lines", conns, elapsed, n)
}
