package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// zkc is a connection plus the bound of each call; every method honours ctx.
type zkc struct {
	conn    zkconn.Conn
	timeout time.Duration
}

type getResult struct {
	data []byte
	stat *zk.Stat
}

func (z zkc) get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	r, err := call(ctx, z.timeout, func() (getResult, error) {
		b, st, err := z.conn.Get(path)
		return getResult{b, st}, err
	})
	return r.data, r.stat, err
}

func (z zkc) exists(ctx context.Context, path string) (bool, *zk.Stat, error) {
	type res struct {
		ok bool
		st *zk.Stat
	}
	r, err := call(ctx, z.timeout, func() (res, error) {
		ok, st, err := z.conn.Exists(path)
		return res{ok, st}, err
	})
	return r.ok, r.st, err
}

// existsW is Exists with a watch: ch fires on the node's next change.
func (z zkc) existsW(ctx context.Context, path string) (bool, <-chan zk.Event, error) {
	type res struct {
		ok bool
		ch <-chan zk.Event
	}
	r, err := call(ctx, z.timeout, func() (res, error) {
		ok, _, ch, err := z.conn.ExistsW(path)
		return res{ok, ch}, err
	})
	return r.ok, r.ch, err
}

func (z zkc) children(ctx context.Context, path string) ([]string, error) {
	return call(ctx, z.timeout, func() ([]string, error) {
		names, _, err := z.conn.Children(path)
		return names, err
	})
}

func (z zkc) create(ctx context.Context, path string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	return call(ctx, z.timeout, func() (string, error) { return z.conn.Create(path, data, flags, acl) })
}

func (z zkc) set(ctx context.Context, path string, data []byte, version int32) (*zk.Stat, error) {
	return call(ctx, z.timeout, func() (*zk.Stat, error) { return z.conn.Set(path, data, version) })
}

// sync makes the server this session talks to catch up with the leader
// before the next read.
func (z zkc) sync(ctx context.Context, path string) error {
	_, err := call(ctx, z.timeout, func() (string, error) { return z.conn.Sync(path) })
	return err
}

func (z zkc) delete(ctx context.Context, path string, version int32) error {
	_, err := call(ctx, z.timeout, func() (struct{}, error) { return struct{}{}, z.conn.Delete(path, version) })
	return err
}

// multi runs ops atomically. On failure it returns the index of the op that
// failed (-1 when unknown, e.g. the connection broke) and that op's error.
func (z zkc) multi(ctx context.Context, ops ...any) (failed int, err error) {
	resp, err := call(ctx, z.timeout, func() ([]zk.MultiResponse, error) { return z.conn.Multi(ops...) })
	if err == nil {
		return -1, nil
	}
	for i, r := range resp {
		if r.Error != nil {
			return i, r.Error
		}
	}
	return -1, err
}

// ensure creates a persistent znode unless it exists. It looks first: with
// ACLs, creating an existing node can fail with ErrNoAuth instead of
// ErrNodeExists.
func (z zkc) ensure(ctx context.Context, path string, data []byte, acl []zk.ACL) error {
	ok, _, err := z.exists(ctx, path)
	if err != nil {
		return fmt.Errorf("look up %s: %w", path, err)
	}
	if ok {
		return nil
	}
	if _, err := z.create(ctx, path, data, zk.FlagPersistent, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", path, authHint(err))
	}
	return nil
}

// getMany reads many znodes with a few calls in flight; a node that
// vanished meanwhile gives a nil entry.
func (z zkc) getMany(ctx context.Context, paths []string) ([]*getResult, error) {
	const inFlight = 8
	out := make([]*getResult, len(paths))
	errs := make([]error, len(paths))
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	for i, p := range paths {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			b, st, err := z.get(ctx, p)
			switch {
			case errors.Is(err, zk.ErrNoNode):
			case err != nil:
				errs[i] = fmt.Errorf("read %s: %w", p, err)
			default:
				out[i] = &getResult{b, st}
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// authHint explains ErrNoAuth.
func authHint(err error) error {
	if errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("%w: the cluster's znodes are digest-protected; configure the cluster's --zk-auth user:password", err)
	}
	return err
}
