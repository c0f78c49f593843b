//go:build linux && scale

package scale

import (
	"os"
	"path/filepath"
	"testing"
)

// TestScale is the scale driver (make scale, scripts/scale.sh): it runs
// the measurement ConfigFromEnv describes; scripts/scale.sh prints the
// report it writes.
func TestScale(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	cfg, err := ConfigFromEnv(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scale: N = %v, window %v, settle %v, R = %d, binaries in %s", cfg.Nodes, cfg.Window, cfg.Settle, cfg.Recycle, cfg.BinDir)
	Run(t, cfg)
	t.Logf("scale: report in %s and %s", filepath.Join(cfg.OutDir, "scale-report.md"),
		filepath.Join(cfg.OutDir, "scale-report.json"))
}
