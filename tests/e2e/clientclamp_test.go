package e2e

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	sfclient "codeberg.org/snowflaked/snowflaked/client"
)

// A client whose MaxBatch is above the node's --max-batch learns the
// node's limit from its invalid_count answer ("max") and asks for at most
// that, instead of failing the callers with ErrRejected: NextN, NextUUIDN
// and prefetch against a real node run with --max-batch 100.
func TestIntegration_ClientClampsMaxBatchToTheNode(t *testing.T) {
	p := startNode(t, binSnowflaked, nodeArgs(t.TempDir(), 3, "--max-batch", "100"))
	p.waitReadyz(http.StatusOK, readyTimeout)
	tests := []struct {
		name string
		cfg  sfclient.Config
		call func(ctx context.Context, c *sfclient.Client) (int, error)
	}{
		{"NextN", sfclient.Config{MaxBatch: 1000}, func(ctx context.Context, c *sfclient.Client) (int, error) {
			ids, err := c.NextN(ctx, 750)
			if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
				t.Errorf("NextN(750): not increasing")
			}
			return len(ids), err
		}},
		{"NextUUIDN", sfclient.Config{MaxBatch: 1000}, func(ctx context.Context, c *sfclient.Client) (int, error) {
			us, err := c.NextUUIDN(ctx, 750)
			return len(us), err
		}},
		{"prefetch", sfclient.Config{MaxBatch: 1000, Prefetch: 4000}, func(ctx context.Context, c *sfclient.Client) (int, error) {
			for i := range 750 {
				if _, err := c.Next(ctx); err != nil {
					return i, err
				}
			}
			return 750, nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var refused atomic.Int64
			cfg := tc.cfg
			cfg.Servers = []string{p.addr}
			cfg.Hooks.Request = func(e sfclient.RequestEvent) {
				if e.Status == http.StatusBadRequest {
					refused.Add(1)
				}
			}
			c, err := sfclient.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			for i := range 3 {
				got, err := tc.call(context.Background(), c)
				if err != nil || got != 750 {
					t.Fatalf("call %d: %d values, %v; want 750", i, got, err)
				}
			}
			if tc.name != "prefetch" && refused.Load() != 1 {
				t.Errorf("%d requests refused, want 1: the one that taught the client the limit", refused.Load())
			}
		})
	}
}
