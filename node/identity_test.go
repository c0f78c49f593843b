package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestStandaloneIdentity(t *testing.T) {
	def := snowflake.DefaultLayout()
	js := snowflake.JS53Layout()
	otherEpoch := def
	otherEpoch.Epoch = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		file      *cachefile.Entry // nil: no file
		raw       string           // raw file content instead of an entry
		worker    int64
		layout    snowflake.Layout
		wantFence int64
		wantErr   []string
		mismatch  bool
	}{
		{name: "first start", worker: 5, layout: def},
		{name: "matching cache", file: &cachefile.Entry{WorkerID: 5, Layout: def, Fence: 1234}, worker: 5, layout: def, wantFence: 1234},
		{name: "other worker", file: &cachefile.Entry{WorkerID: 3, Layout: def, Fence: 1}, worker: 5, layout: def,
			wantErr: []string{"holds worker 3 with layout 41/10/12", "--worker-id is 5 with layout 41/10/12"}, mismatch: true},
		{name: "other layout", file: &cachefile.Entry{WorkerID: 5, Layout: js, Fence: 1}, worker: 5, layout: def,
			wantErr: []string{"layout 41/5/7", "layout 41/10/12"}, mismatch: true},
		{name: "other epoch", file: &cachefile.Entry{WorkerID: 5, Layout: otherEpoch, Fence: 1}, worker: 5, layout: def,
			wantErr: []string{"epoch 2023-01-01T00:00:00Z", "epoch 2024-01-01T00:00:00Z"}, mismatch: true},
		{name: "zookeeper entry", file: &cachefile.Entry{Cluster: "default", NodeKey: "h:1", WorkerID: 5, Layout: def, Fence: 1}, worker: 5, layout: def,
			wantErr: []string{`cluster "default"`, "ZooKeeper mode"}, mismatch: true},
		{name: "damaged", raw: "{not json", worker: 5, layout: def, wantErr: []string{"damaged"}},
		{name: "empty file", raw: "", worker: 5, layout: def, wantErr: []string{"damaged"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.json")
			switch {
			case tc.file != nil:
				if err := cachefile.Save(path, *tc.file); err != nil {
					t.Fatal(err)
				}
			case tc.wantErr != nil && !tc.mismatch:
				if err := os.WriteFile(path, []byte(tc.raw), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg := defaultConfig()
			cfg.WorkerID, cfg.CacheFile = tc.worker, path
			id, err := standaloneIdentity(cfg, tc.layout)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("loadIdentity: %v", err)
				}
				if id.entry.Fence != snowflake.UnixMilli(tc.wantFence) || id.entry.WorkerID != tc.worker || !id.entry.Layout.Equal(tc.layout) || id.mode != modeStandalone {
					t.Errorf("identity %+v", id)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range append(tc.wantErr, path) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if got := errors.Is(err, errCacheMismatch) && errors.Is(err, ErrInvalidConfig); got != tc.mismatch {
				t.Errorf("mismatch error = %v, want %v (%v)", got, tc.mismatch, err)
			}
		})
	}
}
