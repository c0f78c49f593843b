package testsupport

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	Poll(t, time.Second, time.Millisecond, "third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

// A condition that never holds fails the test after the timeout.
func TestPollFailsAfterTimeout(t *testing.T) {
	ft := &fakeTB{TB: t}
	start := time.Now()
	Poll(ft, 30*time.Millisecond, time.Millisecond, "never", func() bool { return false })
	if !ft.failed || ft.msg != "not within 30ms: never" {
		t.Fatalf("failed %v with %q", ft.failed, ft.msg)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", took)
	}
}

type fakeTB struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
}

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
			}
		})
	}
	wg.Wait()
	if n := len(b.String()); n != 800 {
		t.Fatalf("%d bytes, want 800", n)
	}
}

func TestClosedAddrRefuses(t *testing.T) {
	addr := ClosedAddr(t)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s accepted a connection", addr)
	}
}

func TestSyncBufferLines(t *testing.T) {
	var b SyncBuffer
	_, _ = b.Write([]byte(`{"level":"info","message":"a","n":1}` + "\n" + `{"message":"b"}` + "\n" + `{"message":"a","n":2}` + "\n"))
	got := b.Lines(t, "a")
	if len(got) != 2 || got[0]["n"] != 1.0 || got[1]["n"] != 2.0 {
		t.Fatalf("Lines(a) = %v", got)
	}
}

// A tool that is not installed skips the test (outside CI).
func TestNeedToolMissingSkips(t *testing.T) {
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Skip("with CI set a missing tool fails the test instead; not testable here")
	}
	var sub *testing.T
	t.Run("missing", func(t *testing.T) {
		sub = t
		NeedTool(t, "none", "no-such-tool-snowflaked", "/nonexistent/no-such-tool")
		t.Error("NeedTool returned for a missing tool")
	})
	if !sub.Skipped() {
		t.Fatal("NeedTool did not skip the test for a missing tool")
	}
}

// promtool passes a clean exposition and names the problems of others.
func TestPromtoolProblems(t *testing.T) {
	promtool := NeedTool(t, "prometheus", "promtool")
	for _, tc := range []struct{ text, want string }{
		{"# HELP a_total A counter.\n# TYPE a_total counter\na_total 1\n", ""},
		{"a_total 1\n", "no help text"},
		{"# HELP a A counter.\n# TYPE a counter\na 1\n", "_total"},
	} {
		got := promtoolProblems(promtool, tc.text)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("promtool on %q: %q, want %q", tc.text, got, tc.want)
		}
	}
}
