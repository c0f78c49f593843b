package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"codeberg.org/snowflaked/snowflaked/internal/disk"
)

// errCacheLocked means another process uses the same cache file: two
// processes issuing IDs with one cache file would share a worker ID and
// fence, so the second one refuses to start.
var errCacheLocked = errors.New("cache file in use by another process")

// lockPath is the lock file that guards a cache file. It sits beside the
// cache file and is never deleted (deleting a lock file races with a process
// that is about to take it).
func lockPath(cacheFile string) string { return cacheFile + ".lock" }

// errLockLost means the cache file's lock file was deleted or replaced
// under the running process: another process may take a new lock and run
// on the same cache file, so this one writes no fence any more.
var errLockLost = errors.New("the cache file's lock file was deleted or replaced")

// cacheLock is the lock a process holds on its cache file for its life.
type cacheLock struct {
	f    *os.File
	path string
}

// lockCacheFile takes an exclusive lock on the cache file's lock file for
// the life of the process (the kernel drops it when the process dies, even
// after kill -9). Where the platform has no advisory locks it only creates
// the file.
func lockCacheFile(cacheFile string) (*cacheLock, error) {
	path := lockPath(cacheFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock cache file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock cache file: %w", err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("%w: %s is locked (%s): another snowflaked runs with this --cache-file; give every process its own",
				errCacheLocked, cacheFile, path)
		}
		return nil, fmt.Errorf("lock cache file %s: %w", path, err)
	}
	return &cacheLock{f: f, path: path}, nil
}

// removeStaleTemps deletes the temp files a write killed mid-way left
// beside the cache file and its segment state file (".<name>*.tmp-*"):
// only a process holding the lock may, as no write of another can be in
// flight. It returns how many it removed.
func (l *cacheLock) removeStaleTemps(cacheFile string) int {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(cacheFile), "."+filepath.Base(cacheFile)+"*.tmp-*"))
	n := 0
	for _, m := range matches {
		if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() && os.Remove(m) == nil {
			n++
		}
	}
	return n
}

// release drops the lock.
func (l *cacheLock) release() { l.f.Close() }

// held checks that the lock file at the path is still the one locked: a
// lock file deleted or replaced (a cleanup job, rm -rf data/*) lets a second
// process lock a new one and run on the same cache file.
func (l *cacheLock) held() error {
	locked, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errLockLost, l.path, err)
	}
	now, err := os.Stat(l.path)
	if err != nil || !os.SameFile(locked, now) {
		what := "replaced"
		if errors.Is(err, fs.ErrNotExist) {
			what = "deleted"
		}
		return fmt.Errorf("%w: %s was %s under this process: another one may run on the same cache file; this one persists no fence any more (restart it once only one runs)",
			errLockLost, l.path, what)
	}
	return nil
}

// lockedDisk writes the cache file and the segment state file only while
// this process holds the cache file's lock. It checks before the write (no
// write to a file another process may own), right before the rename (an
// fsync can take long: a lock lost meanwhile leaves the file untouched),
// and after (a lock lost during the write fails it, so what was written is
// never used). The one window left is the rename itself.
type lockedDisk struct {
	disk.Disk
	held func() error
}

// WriteFileAtomic writes name while the lock is held.
func (d lockedDisk) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	if err := d.held(); err != nil {
		return err
	}
	var err error
	if _, ok := d.Disk.(disk.OS); ok {
		err = disk.WriteFileAtomicIf(name, data, perm, d.held)
	} else {
		err = d.Disk.WriteFileAtomic(name, data, perm)
	}
	if err != nil {
		return err
	}
	return d.held()
}

// resolveCacheFile returns the file a --cache-file path names: a symlink's
// target (the atomic rename would otherwise replace the link with a regular
// file, and a link restored later would point at the old fence), the path
// as is otherwise. A symlink whose target is missing is refused: read as a
// first start, it would throw the fence away.
func resolveCacheFile(path string) (string, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		dir, derr := filepath.EvalSymlinks(filepath.Dir(path))
		if derr != nil {
			return path, nil // created with its directory on the first write
		}
		return filepath.Join(dir, filepath.Base(path)), nil
	case err != nil:
		return "", fmt.Errorf("cache file %s: %w", path, err)
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			return "", fmt.Errorf("%w: --cache-file %s is a symlink to %s, which does not exist: refusing to start as if this were a first start (that would throw the fence away); restore the target, or point --cache-file at the real file",
				ErrInvalidConfig, path, target)
		}
		return "", fmt.Errorf("cache file %s: %w", path, err)
	}
	return resolved, nil
}
