package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// fakeClaimer answers Claim with a fixed result and records what Claim and
// ResumeFromCache were given.
type fakeClaimer struct {
	id      coordinator.Identity
	err     error
	claims  int
	prior   coordinator.Prior
	resumed bool
	resume  coordinator.Resume
}

func (f *fakeClaimer) Claim(_ context.Context, p coordinator.Prior) (coordinator.Identity, error) {
	f.claims++
	f.prior = p
	return f.id, f.err
}

func (f *fakeClaimer) ResumeFromCache(r coordinator.Resume) error {
	f.resumed, f.resume = true, r
	return nil
}

func TestZKIdentity(t *testing.T) {
	def := snowflake.DefaultLayout()
	js := snowflake.JS53Layout()
	const cluster, key = "c1", "node-a"
	unavailable := fmt.Errorf("claim worker id: %w: no session", coordinator.ErrZKUnavailable)
	mine := func(worker, fence, reported int64) *cachefile.Entry {
		return &cachefile.Entry{Cluster: cluster, NodeKey: key, WorkerID: worker, Layout: def, Fence: snowflake.UnixMilli(fence), ZKReported: snowflake.UnixMilli(reported)}
	}
	// tokened is a cache file written by a process holding token "t1" with a
	// ZooKeeper fence of 9000, in incarnation "inc".
	tokened := func(worker, fence int64) *cachefile.Entry {
		e := mine(worker, fence, 77)
		e.Token, e.ZKFence, e.Incarnation, e.ZKSession = "t1", 9000, "inc", "0xabc"
		return e
	}
	replacing := func(prevToken string, fence int64) coordinator.Identity {
		return coordinator.Identity{WorkerID: 4, PrevFence: snowflake.UnixMilli(fence), ZKFence: 40_000, Token: "t2", PrevToken: prevToken, Incarnation: "inc", Session: "0xdef"}
	}
	tests := []zkIdentityCase{
		{name: "first start", claim: coordinator.Identity{WorkerID: 4, PrevFence: 0}, wantWorker: 4, wantClaim: true},
		{name: "no cache takes the zookeeper fence", claim: coordinator.Identity{WorkerID: 4, PrevFence: 900, ZKFence: 40_000}, wantWorker: 4, wantFence: 900,
			wantZKFence: 40_000, wantClaim: true},
		{name: "cache file from before tokens, ahead of zookeeper", cache: mine(4, 2000, 77), claim: coordinator.Identity{WorkerID: 4, PrevFence: 900},
			wantWorker: 4, wantFence: 2000, wantReported: 77, wantClaim: true},
		{name: "cache file from before tokens, behind zookeeper", cache: mine(4, 500, 77), claim: coordinator.Identity{WorkerID: 4, PrevFence: 900},
			wantWorker: 4, wantFence: 900, wantReported: 77, wantClaim: true},
		{name: "the claim replaced the cache file's token: its tighter fence", cache: tokened(4, 2000), claim: replacing("t1", 8000),
			wantWorker: 4, wantFence: 2000, wantReported: 77, wantZKFence: 40_000, wantClaim: true,
			wantPrior: coordinator.Prior{Incarnation: "inc", Session: "0xabc"}},
		{name: "another token since the cache file: zookeeper's fence", cache: tokened(4, 2000), claim: replacing("t9", 8000),
			wantWorker: 4, wantFence: 8000, wantReported: 77, wantZKFence: 40_000, wantClaim: true,
			wantPrior: coordinator.Prior{Incarnation: "inc", Session: "0xabc"}},
		{name: "another token since the cache file, cache ahead", cache: tokened(4, 9500), claim: replacing("t9", 8000),
			wantWorker: 4, wantFence: 9500, wantReported: 77, wantZKFence: 40_000, wantClaim: true,
			wantPrior: coordinator.Prior{Incarnation: "inc", Session: "0xabc"}},
		{name: "accepted new incarnation: the larger fence", cache: tokened(4, 2000), accept: true,
			claim:      coordinator.Identity{WorkerID: 4, PrevFence: 0, ZKFence: 40_000, Token: "t2", PrevToken: "t1", Incarnation: "new"},
			wantWorker: 4, wantFence: 2000, wantReported: 77, wantZKFence: 40_000, wantClaim: true,
			wantPrior: coordinator.Prior{Incarnation: "inc", Session: "0xabc", AcceptIncarnation: true}},
		{name: "incarnation mismatch is a config error", cache: tokened(4, 2000),
			claimErr:  fmt.Errorf("claim worker id: %w: incarnation inc vs new", coordinator.ErrIncarnationMismatch),
			wantClaim: true, wantErr: []string{"inc vs new"}, is: []error{ErrInvalidConfig, coordinator.ErrIncarnationMismatch}},
		{name: "cluster setting mismatch is a config error",
			claimErr:  fmt.Errorf("claim worker id: %w: recycle-after", coordinator.ErrClusterMismatch),
			wantClaim: true, wantErr: []string{"recycle-after"}, is: []error{ErrInvalidConfig, coordinator.ErrClusterMismatch}},
		{name: "cache of another worker of this key", cache: mine(9, 5000, 77), claim: coordinator.Identity{WorkerID: 4, PrevFence: 900, Recycled: true},
			wantWorker: 4, wantFence: 900, wantClaim: true},
		{name: "cache of another cluster", cache: &cachefile.Entry{Cluster: "other", NodeKey: key, WorkerID: 4, Layout: def, Fence: 5000},
			claim: coordinator.Identity{WorkerID: 4, PrevFence: 900}, wantWorker: 4, wantFence: 900, wantClaim: true},
		{name: "cache of another layout refused before claiming", cache: &cachefile.Entry{Cluster: cluster, NodeKey: key, WorkerID: 4, Layout: js, Fence: 5},
			wantErr: []string{"layout 41/5/7", "layout 41/10/12"}, is: []error{ErrInvalidConfig, errCacheMismatch}},
		{name: "standalone cache refused", cache: &cachefile.Entry{WorkerID: 3, Layout: def, Fence: 5},
			wantErr: []string{"written in standalone mode", "needs its own --cache-file"}, is: []error{ErrInvalidConfig, errCacheMismatch}},
		{name: "damaged cache refused", raw: `{"worker_id":`, wantErr: []string{"damaged"}},
		{name: "layout mismatch in zookeeper is a config error", claimErr: fmt.Errorf("claim worker id: %w: cluster uses 41/5/7", coordinator.ErrLayoutMismatch),
			wantClaim: true, wantErr: []string{"41/5/7"}, is: []error{ErrInvalidConfig, coordinator.ErrLayoutMismatch}},
		{name: "missing cluster is a config error", claimErr: fmt.Errorf("claim worker id: %w: cluster \"prdo\" does not exist; did you mean prod?", coordinator.ErrNoCluster),
			wantClaim: true, wantErr: []string{"prdo", "did you mean prod?"}, is: []error{ErrInvalidConfig, coordinator.ErrNoCluster}},
		{name: "unknown required feature is a config error", claimErr: fmt.Errorf("claim worker id: %w: the cluster requires teleport", coordinator.ErrUnknownFeature),
			wantClaim: true, wantErr: []string{"teleport"}, is: []error{ErrInvalidConfig, coordinator.ErrUnknownFeature}},
		{name: "lease held by a live process", claimErr: fmt.Errorf("claim worker id: %w: leased by node key node-a", coordinator.ErrLeaseHeld),
			wantClaim: true, wantErr: []string{"leased by node key node-a"}, is: []error{coordinator.ErrLeaseHeld}},
		{name: "zookeeper down with a cache file from before tokens: no zookeeper fence", cache: mine(6, 3000, 2500), claimErr: unavailable,
			wantWorker: 6, wantFence: 3000, wantReported: 2500, wantResumed: true, wantClaim: true},
		{name: "zookeeper down with a tokened cache: its zookeeper fence", cache: tokened(6, 3000), claimErr: unavailable,
			wantWorker: 6, wantFence: 3000, wantReported: 77, wantZKFence: 9000, wantResumed: true, wantClaim: true,
			wantPrior: coordinator.Prior{Incarnation: "inc", Session: "0xabc"}},
		{name: "zookeeper down without a cache", claimErr: unavailable, wantClaim: true,
			wantErr: []string{"there is no cache file", "a first start needs ZooKeeper"}, is: []error{errNoCacheForZKDown}},
		{name: "zookeeper down with another key's cache", cache: &cachefile.Entry{Cluster: cluster, NodeKey: "node-b", WorkerID: 2, Layout: def},
			claimErr: unavailable, wantClaim: true, wantErr: []string{`node key "node-b"`, "worker ID is unknown"}, is: []error{errNoCacheForZKDown}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.json")
			tc.writeCache(t, path)
			cfg := defaultConfig()
			cfg.WorkerID, cfg.ZK, cfg.Cluster, cfg.CacheFile = -1, "127.0.0.1:2181", cluster, path
			cfg.AcceptNewIncarnation = tc.accept
			fc := &fakeClaimer{id: tc.claim, err: tc.claimErr}
			id, err := zkIdentity(context.Background(), cfg, def, key, fc, zerolog.Nop())
			if (fc.claims > 0) != tc.wantClaim {
				t.Errorf("Claim called %d times, want called = %v", fc.claims, tc.wantClaim)
			}
			if tc.wantErr != nil {
				tc.checkRefused(t, id, err, fc)
				return
			}
			if err != nil {
				t.Fatalf("zkIdentity: %v", err)
			}
			e := id.entry
			if e.Cluster != cluster || e.NodeKey != key || !e.Layout.Equal(def) || id.mode != modeZooKeeper {
				t.Errorf("entry %+v mode %s", e, id.mode)
			}
			tc.checkIdentity(t, id, fc)
		})
	}
}

// zkIdentityCase is one row of TestZKIdentity.
type zkIdentityCase struct {
	name         string
	cache        *cachefile.Entry // nil: no file
	raw          string           // raw file content (damaged)
	claim        coordinator.Identity
	claimErr     error
	wantWorker   int64
	wantFence    int64
	wantReported int64
	wantResumed  bool
	wantZKFence  int64             // the ZooKeeper fence the node starts with
	wantPrior    coordinator.Prior // what Claim was told
	accept       bool              // --accept-new-incarnation
	wantClaim    bool              // Claim was called
	wantErr      []string
	is           []error
}

// writeCache writes the row's cache file (or damaged content) at path.
func (tc zkIdentityCase) writeCache(t *testing.T, path string) {
	t.Helper()
	switch {
	case tc.cache != nil:
		if err := cachefile.Save(path, *tc.cache); err != nil {
			t.Fatal(err)
		}
	case tc.raw != "":
		if err := os.WriteFile(path, []byte(tc.raw), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRefused checks a refused start: the error names and wraps what the
// row wants, and nothing resumed.
func (tc zkIdentityCase) checkRefused(t *testing.T, id identity, err error, fc *fakeClaimer) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; identity %+v", id)
	}
	for _, s := range tc.wantErr {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
	for _, target := range tc.is {
		if !errors.Is(err, target) {
			t.Errorf("error %v is not %v", err, target)
		}
	}
	if fc.resumed {
		t.Error("ResumeFromCache called on a refused start")
	}
}

// checkIdentity checks the identity a start took: worker, fences, what
// Claim was told and what was resumed.
func (tc zkIdentityCase) checkIdentity(t *testing.T, id identity, fc *fakeClaimer) {
	t.Helper()
	e := id.entry
	if e.WorkerID != tc.wantWorker || e.Fence != snowflake.UnixMilli(tc.wantFence) || e.ZKReported != snowflake.UnixMilli(tc.wantReported) || id.resumed != tc.wantResumed {
		t.Errorf("identity worker %d fence %d reported %d resumed %v; want %d %d %d %v (from %q)",
			e.WorkerID, e.Fence, e.ZKReported, id.resumed, tc.wantWorker, tc.wantFence, tc.wantReported, tc.wantResumed, id.from)
	}
	if fc.resumed != tc.wantResumed || (fc.resumed && (fc.resume.WorkerID != tc.wantWorker || fc.resume.LastReport != snowflake.UnixMilli(tc.wantReported) ||
		fc.resume.ZKFence != tc.cache.ZKFence || fc.resume.Token != tc.cache.Token)) {
		t.Errorf("ResumeFromCache called %v with %+v", fc.resumed, fc.resume)
	}
	if e.ZKFence != snowflake.UnixMilli(tc.wantZKFence) {
		t.Errorf("ZooKeeper fence %d, want %d", e.ZKFence, tc.wantZKFence)
	}
	if fc.prior != tc.wantPrior {
		t.Errorf("Claim given %+v, want %+v", fc.prior, tc.wantPrior)
	}
	if !tc.wantResumed && tc.claim.Token != "" && (e.Token != tc.claim.Token || e.ZKSession != tc.claim.Session || e.Incarnation != tc.claim.Incarnation) {
		t.Errorf("entry %+v does not carry the claim's token, session and incarnation", e)
	}
}

func TestZKIdentityCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := defaultConfig()
	cfg.WorkerID, cfg.ZK, cfg.CacheFile = -1, "127.0.0.1:2181", filepath.Join(t.TempDir(), "c.json")
	// A cancelled Claim reports ErrZKUnavailable; it must not fall back to a cache.
	fc := &fakeClaimer{err: fmt.Errorf("%w: waiting for a session: %v", coordinator.ErrZKUnavailable, context.Canceled)}
	_, err := zkIdentity(ctx, cfg, snowflake.DefaultLayout(), "k", fc, zerolog.Nop())
	if !errors.Is(err, context.Canceled) || errors.Is(err, errNoCacheForZKDown) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
