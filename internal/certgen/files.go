package certgen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File is one file to write.
type File struct {
	Path string
	Data []byte
	// Secret files (private keys, key stores) are written 0600, the others
	// 0644.
	Secret bool
}

// ErrExists is what WriteFiles returns when a file is there already and
// overwrite is false.
var ErrExists = errors.New("exists")

// WriteFiles writes files, each to a temporary file in its directory
// (created 0700 when missing) that is synced and then moved into place, so
// that no reader ever sees half a file. Without overwrite it first checks
// that none of them exists, and writes none if one does (an error wrapping
// ErrExists that names it); a file that appears meanwhile is not replaced
// either (hard link, not rename).
func WriteFiles(files []File, overwrite bool) error {
	if !overwrite {
		for _, f := range files {
			if _, err := os.Lstat(f.Path); err == nil {
				return fmt.Errorf("%s: %w", f.Path, ErrExists)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	for _, f := range files {
		if err := writeFile(f, overwrite); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(f File, overwrite bool) (err error) {
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	mode := fs.FileMode(0o644)
	if f.Secret {
		mode = 0o600
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if _, err := tmp.Write(f.Data); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if overwrite {
		err = os.Rename(tmp.Name(), f.Path)
	} else if err = os.Link(tmp.Name(), f.Path); errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w", f.Path, ErrExists)
	}
	if err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
