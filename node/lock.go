package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrCacheLocked means another process uses the same cache file: two
// processes issuing IDs with one cache file would share a worker ID and
// fence, so the second one refuses to start.
var ErrCacheLocked = errors.New("cache file in use by another process")

// lockPath is the lock file that guards a cache file. It sits beside the
// cache file and is never deleted (deleting a lock file races with a process
// that is about to take it).
func lockPath(cacheFile string) string { return cacheFile + ".lock" }

// lockCacheFile takes an exclusive lock on the cache file's lock file for
// the life of the process (the kernel drops it when the process dies, even
// after kill -9). The returned func releases it. Where the platform has no
// advisory locks it only creates the file.
func lockCacheFile(cacheFile string) (release func(), err error) {
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
				ErrCacheLocked, cacheFile, path)
		}
		return nil, fmt.Errorf("lock cache file %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
