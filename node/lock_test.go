package node

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// The lock is checked against the lock file at its path: deleted or
// replaced under the process, it is lost.
func TestCacheLockNoticesItsFileGone(t *testing.T) {
	cases := []struct {
		name string
		do   func(t *testing.T, lockFile string)
		want string // "" = still held
	}{
		{"untouched", func(*testing.T, string) {}, ""},
		{"deleted", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, "deleted"},
		{"replaced", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "replaced"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "cache.json")
			l, err := lockCacheFile(cache)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.release)
			tc.do(t, lockPath(cache))
			err = l.held()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("held: %v", err)
			case tc.want != "" && (!errors.Is(err, errLockLost) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("held: %v, want ErrLockLost naming %q", err, tc.want)
			}
		})
	}
}

// A --cache-file symlink is resolved to its target; one whose target is
// missing is refused (never a first start).
func TestResolveCacheFile(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.json")
	if err := os.WriteFile(real, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling.json")
	if err := os.Symlink(filepath.Join(dir, "gone.json"), dangling); err != nil {
		t.Fatal(err)
	}
	linkedDir := filepath.Join(dir, "linkdir")
	if err := os.Symlink(dir, linkedDir); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, want, wantErr string
	}{
		{"regular file", real, real, ""},
		{"symlink", link, real, ""},
		{"no file yet", filepath.Join(dir, "new.json"), filepath.Join(dir, "new.json"), ""},
		{"no file yet, directory through a symlink", filepath.Join(linkedDir, "new.json"), filepath.Join(dir, "new.json"), ""},
		{"dangling symlink", dangling, "", "does not exist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveCacheFile(tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("resolve %s: %q, %v; want ErrInvalidConfig naming %q", tc.path, got, err, tc.wantErr)
				}
				return
			}
			wantResolved, _ := filepath.EvalSymlinks(filepath.Dir(tc.want))
			if err != nil || got != filepath.Join(wantResolved, filepath.Base(tc.want)) {
				t.Fatalf("resolve %s: %q, %v; want %q", tc.path, got, err, tc.want)
			}
		})
	}
}

// Temp files a killed write left beside the cache file and its segment
// state file are removed by the next lock holder; nothing else is.
func TestCacheLockRemovesStaleTemps(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache.json")
	stale := []string{".cache.json.tmp-123", ".cache.json.segments.tmp-456"}
	kept := []string{"cache.json", ".other.json.tmp-1", "cache.json.tmp-2"}
	for _, f := range append(slices.Clone(stale), kept...) {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := lockCacheFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.release)
	if n := l.removeStaleTemps(cache); n != len(stale) {
		t.Fatalf("removed %d files, want %d", n, len(stale))
	}
	for _, f := range stale {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left: %v", f, err)
		}
	}
	for _, f := range kept {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s removed: %v", f, err)
		}
	}
}

// A write through lockedDisk never lands once the lock is lost before its
// rename: a newcomer that locked a new lock file during the write (its
// fsync can take long) keeps its own fence on disk; a lock lost after the
// rename fails the write, so its fence is never used.
func TestLockedDiskNeverLandsAWriteAfterTheLockIsLost(t *testing.T) {
	cases := []struct {
		name     string
		lostAt   int   // the held() call that the newcomer comes before: 1 before the write, 2 before the rename, 3 after
		wantFile int64 // the fence on disk afterwards
	}{
		{"lost before the write", 1, 14_000},
		{"lost during the write, before the rename", 2, 14_000},
		{"lost after the rename", 3, 14_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.json")
			if err := cachefile.Save(path, cachefile.Entry{WorkerID: 3, Layout: snowflake.DefaultLayout(), Fence: 4_000}); err != nil {
				t.Fatal(err)
			}
			a, err := lockCacheFile(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(a.release)
			calls := 0
			newcomer := func() {
				// A cleanup job deletes the lock file; B locks a new one,
				// reads the file and persists its own fence.
				if err := os.Remove(lockPath(path)); err != nil {
					t.Fatal(err)
				}
				b, err := lockCacheFile(path)
				if err != nil {
					t.Fatalf("B could not lock: %v", err)
				}
				t.Cleanup(b.release)
				e, err := cachefile.Load(path)
				if err != nil {
					t.Fatal(err)
				}
				e.Fence = max(e.Fence, 4_000) + 10_000
				if err := cachefile.Save(path, e); err != nil {
					t.Fatal(err)
				}
			}
			d := lockedDisk{Disk: disk.OS{}, held: func() error {
				calls++
				if calls == tc.lostAt {
					newcomer()
				}
				return a.held()
			}}
			err = cachefile.SaveTo(d, path, cachefile.Entry{WorkerID: 3, Layout: snowflake.DefaultLayout(), Fence: 5_000})
			if !errors.Is(err, errLockLost) {
				t.Fatalf("A's write with the lock lost: %v, want ErrLockLost", err)
			}
			e, err := cachefile.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.lostAt < 3 && e.Fence != snowflake.UnixMilli(tc.wantFile) {
				t.Fatalf("cache file fence %d, want the newcomer's %d: A's write landed after it lost the lock", e.Fence, tc.wantFile)
			}
		})
	}
}
