package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// A cache file whose fence is ahead of the clock is what a node finds when
// the clock went back while it was down (or after kill -9 and a quick
// restart). Within --max-start-wait it waits; beyond, it stays running but
// out of service until the clock passes the fence.
func TestIntegration_StartBehindFence(t *testing.T) {
	tests := []struct {
		name       string
		ahead      time.Duration
		wantReason string // of /readyz while waiting
		passes     bool   // the clock reaches the fence within the test
	}{
		{"within max-start-wait: waits, then serves", 2 * time.Second, `"reason":"starting"`, true},
		{"beyond max-start-wait: out of service", time.Hour, `"reason":"clock_behind_fence"`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fence := time.Now().Add(tc.ahead).UnixMilli()
			entry := cachefile.Entry{WorkerID: 6, Layout: snowflake.DefaultLayout(), Fence: snowflake.UnixMilli(fence)}
			if err := cachefile.Save(filepath.Join(dir, "cache.json"), entry); err != nil {
				t.Fatal(err)
			}
			p := startNode(t, binSnowflaked, nodeArgs(dir, 6, "--max-start-wait", "10s"))
			if code, body := p.get("/healthz"); code != http.StatusOK {
				t.Errorf("/healthz while waiting for the fence: %d %s", code, body)
			}
			code, body := p.get("/readyz")
			if code != http.StatusServiceUnavailable || !strings.Contains(body, tc.wantReason) {
				t.Fatalf("/readyz while behind the fence: %d %s, want 503 %s", code, body, tc.wantReason)
			}
			if code, body := p.get("/id"); code != http.StatusServiceUnavailable {
				t.Errorf("/id while behind the fence: %d %s", code, body)
			}
			if !tc.passes {
				if !strings.Contains(body, "behind the fence") || !strings.Contains(body, "max-start-wait 10s") {
					t.Errorf("/readyz detail lacks the figures: %s", body)
				}
				p.signal(syscall.SIGTERM)
				if code := p.exitCode(); code != 0 {
					t.Fatalf("exit %d", code)
				}
				// The fence on disk was not lowered: nothing was issued,
				// and the next start still waits for it.
				e, err := cachefile.Load(filepath.Join(dir, "cache.json"))
				if err != nil {
					t.Fatal(err)
				}
				if e.Fence != snowflake.UnixMilli(fence) {
					t.Errorf("fence after stop %d, want the untouched %d", e.Fence, fence)
				}
				return
			}
			waited, _ := p.waitReadyz(http.StatusOK, readyTimeout)
			t.Logf("in service %s after the first /readyz (fence %s ahead at start)", waited, tc.ahead)
			ids := p.ids(100)
			if ms, _ := decodeMs(ids[0]); ms <= fence {
				t.Errorf("first ID at %d, not after the fence %d", ms, fence)
			}
			p.waitLog("clock passed the fence", readyTimeout)
		})
	}
}
