package node

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func loopbackListener(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// seam sets one of the node's test seams (see seams).
type seam func(*seams)

// withClock makes the node read time from c.
func withClock(c clock.Clock) seam { return func(s *seams) { s.clock = c } }

// withListener makes the node serve on ln (Run closes it when it stops).
func withListener(ln net.Listener) seam { return func(s *seams) { s.listener = ln } }

// withSchedule arms the node's timers through sched.
func withSchedule(sched clock.Schedule) seam { return func(s *seams) { s.schedule = sched } }

// withSeams returns cfg with its seams set by set, on a copy of the seams
// cfg already has.
func withSeams(cfg Config, set ...seam) Config {
	var s seams
	if cfg.seams != nil {
		s = *cfg.seams
	}
	for _, f := range set {
		f(&s)
	}
	cfg.seams = &s
	return cfg
}

// startRun runs Run in the background and returns a stop func that cancels
// it and returns Run's error.
func startRun(t testing.TB, cfg Config, opts ...seam) (stop func() error) {
	t.Helper()
	return startRunOn(t, cfg, loopbackListener(t), opts...)
}

// startRunOn is startRun serving on ln.
func startRunOn(t testing.TB, cfg Config, ln net.Listener, opts ...seam) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, withSeams(cfg, append(opts, withListener(ln))...), zerolog.Nop()) }()
	stopped := false
	var result error
	stop = func() error {
		if stopped {
			return result
		}
		stopped = true
		cancel()
		select {
		case result = <-errc:
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30s of cancel")
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitCache polls the cache file until cond holds for its entry.
func waitCache(t *testing.T, path string, cond func(cachefile.Entry) bool) cachefile.Entry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e, err := cachefile.Load(path)
		if err == nil && cond(e) {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("cache file %s: condition not met within 10s (last: %+v, %v)", path, e, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testConfig(t testing.TB, worker int64) Config {
	t.Helper()
	cfg := defaultConfig()
	cfg.WorkerID = worker
	cfg.CacheFile = filepath.Join(t.TempDir(), "data", "cache.json")
	cfg.Listen = "127.0.0.1:0"
	return cfg
}

func TestRunWritesFenceAheadThenLastIssuedOnStop(t *testing.T) {
	cfg := testConfig(t, 5)
	old := time.Now().Add(-time.Hour).UnixMilli()
	if err := cachefile.Save(cfg.CacheFile, cachefile.Entry{WorkerID: 5, Layout: snowflake.DefaultLayout(), Fence: snowflake.UnixMilli(old)}); err != nil {
		t.Fatal(err)
	}
	stop := startRun(t, cfg)
	e := waitCache(t, cfg.CacheFile, func(e cachefile.Entry) bool { return e.Fence > snowflake.UnixMilliOf(time.Now()) })
	if e.WorkerID != 5 || e.Cluster != standaloneCluster || !e.Layout.Equal(snowflake.DefaultLayout()) {
		t.Errorf("running entry %+v", e)
	}
	if ahead := time.Until(e.Fence.Time()); ahead > cfg.FenceAhead {
		t.Errorf("fence %s ahead, more than --fence-ahead %s", ahead, cfg.FenceAhead)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	e, err := cachefile.Load(cfg.CacheFile)
	if err != nil {
		t.Fatal(err)
	}
	// No ID was issued: the last issued time is the old fence itself.
	if e.Fence != snowflake.UnixMilli(old) {
		t.Errorf("fence after a clean stop = %d, want the last issued time %d", e.Fence, old)
	}
}

func TestRunRefuses(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, cfg *Config)
		is      error
		want    []string
	}{
		{"invalid config", func(t *testing.T, cfg *Config) { cfg.WorkerID = -1 }, ErrInvalidConfig, []string{"--worker-id is required"}},
		{"zookeeper down without a cache file", func(t *testing.T, cfg *Config) {
			cfg.WorkerID, cfg.ZK, cfg.ZKSessionTimeout = -1, "127.0.0.1:1", 100*time.Millisecond
		}, errNoCacheForZKDown, []string{"no cache file", "a first start needs ZooKeeper"}},
		{"cache file in use", func(t *testing.T, cfg *Config) {
			lock, err := lockCacheFile(cfg.CacheFile)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(lock.release)
		}, errCacheLocked, []string{"another snowflaked runs with this --cache-file"}},
		{"cache of another worker", func(t *testing.T, cfg *Config) {
			if err := cachefile.Save(cfg.CacheFile, cachefile.Entry{WorkerID: 3, Layout: snowflake.DefaultLayout()}); err != nil {
				t.Fatal(err)
			}
		}, errCacheMismatch, []string{"holds worker 3", "--worker-id is 5"}},
		{"damaged cache", func(t *testing.T, cfg *Config) {
			if err := os.MkdirAll(filepath.Dir(cfg.CacheFile), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfg.CacheFile, []byte(`{"worker_id":`), 0o600); err != nil {
				t.Fatal(err)
			}
		}, nil, []string{"damaged"}},
		{"cache path under a regular file", func(t *testing.T, cfg *Config) {
			dir := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg.CacheFile = filepath.Join(dir, "cache.json")
		}, nil, []string{"not a directory"}},
		{"cache directory not writable", func(t *testing.T, cfg *Config) {
			// Reads as "no file" but no file can be created there, even by root.
			if runtime.GOOS != "linux" {
				t.Skip("needs /proc")
			}
			cfg.CacheFile = "/proc/self/snowflaked-cache.json"
		}, nil, []string{"lock cache file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, 5)
			tc.prepare(t, &cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := Run(ctx, withSeams(cfg, withListener(loopbackListener(t))), zerolog.Nop())
			if err == nil {
				t.Fatal("Run started")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestMergeRoutesRejectsDuplicates(t *testing.T) {
	h := func(*fasthttp.RequestCtx) {}
	if _, err := mergeRoutes(map[string]fasthttp.RequestHandler{"/a": h}, map[string]fasthttp.RequestHandler{"/a": h}); err == nil {
		t.Fatal("duplicate route accepted")
	}
	got, err := mergeRoutes(map[string]fasthttp.RequestHandler{"/a": h}, nil, map[string]fasthttp.RequestHandler{"/b": h})
	if err != nil || len(got) != 2 {
		t.Fatalf("merge = %v, %v", got, err)
	}
}
