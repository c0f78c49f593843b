// Package disk is the seam under the files a node keeps beside its cache
// file: production code uses the operating system (OS); simulations use an
// in-memory disk (Mem) whose processes can be killed between two writes
// and whose writes can hang.
package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// Disk reads whole files and replaces them atomically: a reader sees the
// old content or the new, never a mix, and a write that returned nil
// survives a crash.
type Disk interface {
	ReadFile(name string) ([]byte, error)
	WriteFileAtomic(name string, data []byte, perm fs.FileMode) error
}

// OS is the operating system's disk (temp file, fsync, rename, fsync of
// the directory).
type OS struct{}

// ReadFile is os.ReadFile.
func (OS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// WriteFileAtomic is the package's WriteFileAtomic.
func (OS) WriteFileAtomic(name string, data []byte, perm fs.FileMode) error {
	return WriteFileAtomic(name, data, perm)
}

// WriteFileAtomic writes data to path through a temp file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	return WriteFileAtomicIf(path, data, perm, nil)
}

// WriteFileAtomicIf is WriteFileAtomic that asks cond, when not nil, right
// before the rename (after the fsync, which may take long): an error from
// it leaves path untouched and is returned.
func WriteFileAtomicIf(path string, data []byte, perm fs.FileMode, cond func() error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: fsync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if cond != nil {
		if err := cond(); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: open dir for fsync: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write %s: fsync dir: %w", path, err)
	}
	return nil
}

// errKilled is what a killed process's disk calls return.
var errKilled = errors.New("disk: the process was killed")

// Mem is an in-memory disk shared by the processes that run on it one
// after another (a machine's disk across restarts).
type Mem struct {
	mu    sync.Mutex
	files map[string][]byte
	sched clock.Schedule // the timers of hung writes (nil: they wait as asked)
}

// NewMem returns an empty disk.
func NewMem() *Mem { return &Mem{files: map[string][]byte{}} }

// Process returns a new process's view of the disk.
func (m *Mem) Process() *Proc { return &Proc{m: m, killed: make(chan struct{})} }

// SetSchedule arms the timers of hung writes through s from now on.
func (m *Mem) SetSchedule(s clock.Schedule) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sched = s
}

// File returns a file's content, for checkers.
func (m *Mem) File(name string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[name]
	return slices.Clone(b), ok
}

// Wipe loses every file (the disk replaced).
func (m *Mem) Wipe() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files = map[string][]byte{}
}

// Proc is one process's view of a Mem (a Disk). After Kill nothing it
// writes lands: a write in flight either landed before or never does.
type Proc struct {
	m       *Mem
	writing atomic.Int64
	lastBad atomic.Bool // the last write failed
	mu      sync.Mutex
	hang    time.Duration
	failErr error
	killed  chan struct{}
	dead    bool
}

// Hang makes each later write take d first (0: no wait).
func (p *Proc) Hang(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hang = d
}

// Fail makes each later write fail with err, writing nothing (a full or
// read-only disk); nil ends it.
func (p *Proc) Fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failErr = err
}

// LastFailed reports whether the last write failed (what it wrote is not
// on the disk until a later write succeeds).
func (p *Proc) LastFailed() bool { return p.lastBad.Load() }

// Failing reports whether writes are made to fail.
func (p *Proc) Failing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failErr != nil
}

// Hung reports whether writes are made to hang.
func (p *Proc) Hung() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hang > 0
}

// Kill is kill -9: every later call fails with errKilled.
func (p *Proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dead {
		p.dead = true
		close(p.killed)
	}
}

func (p *Proc) alive() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hang, !p.dead
}

// ReadFile reads a file.
func (p *Proc) ReadFile(name string) ([]byte, error) {
	if _, ok := p.alive(); !ok {
		return nil, errKilled
	}
	b, ok := p.m.File(name)
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return b, nil
}

// Writing reports whether a write is in progress (held by a hang).
func (p *Proc) Writing() bool { return p.writing.Load() > 0 }

// WriteFileAtomic replaces a file, after the hang if one is set.
func (p *Proc) WriteFileAtomic(name string, data []byte, _ fs.FileMode) error {
	p.writing.Add(1)
	defer p.writing.Add(-1)
	hang, ok := p.alive()
	if !ok {
		return errKilled
	}
	if hang > 0 {
		p.m.mu.Lock()
		sched := p.m.sched
		p.m.mu.Unlock()
		t := clock.NewTimer(clock.WithSchedule(context.Background(), sched), hang)
		select {
		case <-t.C:
		case <-p.killed:
			t.Stop()
			return errKilled
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return errKilled
	}
	if p.failErr != nil {
		p.lastBad.Store(true)
		return &fs.PathError{Op: "write", Path: name, Err: p.failErr}
	}
	p.lastBad.Store(false)
	p.m.mu.Lock()
	p.m.files[name] = slices.Clone(data)
	p.m.mu.Unlock()
	return nil
}
