//go:build !unix

package node

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("lock held")

// tryLock is a no-op where advisory file locks are not available.
func tryLock(*os.File) error { return nil }
