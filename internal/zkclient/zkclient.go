// Package zkclient is snowflaked's ZooKeeper plumbing, in one place: a
// session opened and authenticated (Dial, DialCluster), every call bounded
// by a timeout and a context (Client, Call), which errors are worth a retry
// (Transient, ErrUnavailable), the name rules of clusters and servers, and
// the root every cluster lives under. The coordinator (claims, renewals) and
// the segment store build on it.
package zkclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// Root is the znode under which every cluster lives (wire.Root).
const Root = wire.Root

// ClusterPath is the znode of a cluster (wire.ClusterPath).
func ClusterPath(cluster string) string { return wire.ClusterPath(cluster) }

// defaultTimeout bounds the wait for a session and each call when a
// Config gives none.
const defaultTimeout = 10 * time.Second

// Sentinel errors callers branch on.
var (
	// ErrUnavailable: ZooKeeper could not be reached, or did not answer in
	// time (a retry may succeed).
	ErrUnavailable = errors.New("zookeeper unavailable")
	// ErrInvalidConfig: the servers, cluster name or credentials are not
	// usable as given.
	ErrInvalidConfig = errors.New("invalid ZooKeeper settings")
)

// Config says how to open a session.
type Config struct {
	Servers []string // "host:port" each
	Cluster string
	Auth    string // "user:password" for digest auth, or ""
	// Timeout bounds the wait for a session and each call (default
	// defaultTimeout); the session timeout asked for is at least 2s.
	Timeout time.Duration
	Log     zerolog.Logger
	// Dial opens the client; nil means zkconn.Dial (go-zookeeper).
	Dial zkconn.Dialer
}

// Dial checks cfg, opens a ZooKeeper session of its own (waiting up to
// Timeout) and adds the digest auth. The caller closes the Client's Conn.
func Dial(ctx context.Context, cfg Config) (Client, error) {
	servers, err := CheckServers(cfg.Servers)
	if err != nil {
		return Client{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if err := ValidateCluster(cfg.Cluster); err != nil {
		return Client{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if u, p, ok := strings.Cut(cfg.Auth, ":"); cfg.Auth != "" && (!ok || u == "" || p == "") {
		return Client{}, fmt.Errorf("%w: zk auth must be user:password", ErrInvalidConfig)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	dial := cfg.Dial
	if dial == nil {
		dial = zkconn.Dial
	}
	conn, err := dial(servers, zkconn.Options{SessionTimeout: max(timeout, 2*time.Second), Logger: Logger{Log: cfg.Log}})
	if err != nil {
		return Client{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := WaitSession(ctx, conn, timeout, servers); err != nil {
		conn.Close()
		return Client{}, err
	}
	if cfg.Auth != "" {
		if _, err := Call(ctx, timeout, func() (struct{}, error) { return struct{}{}, conn.AddAuth("digest", []byte(cfg.Auth)) }); err != nil {
			conn.Close()
			return Client{}, fmt.Errorf("auth: %w", Unavailable(err))
		}
	}
	return Client{Conn: conn, Timeout: timeout}, nil
}

// DialCluster is Dial, then a check that the cluster exists (a node
// created it). Readers beside the node use it.
func DialCluster(ctx context.Context, cfg Config) (Client, error) {
	z, err := Dial(ctx, cfg)
	if err != nil {
		return Client{}, err
	}
	if ok, _, err := z.Exists(ctx, ClusterPath(cfg.Cluster)); err != nil || !ok {
		z.Conn.Close()
		if err == nil {
			return Client{}, fmt.Errorf("cluster %q does not exist in ZooKeeper %s (create it with snowflakectl cluster create)", cfg.Cluster, strings.Join(cfg.Servers, ","))
		}
		return Client{}, Unavailable(err)
	}
	return z, nil
}

// Client is a connection plus the bound of each call; every method honours ctx.
type Client struct {
	Conn    zkconn.Conn
	Timeout time.Duration
}

// GetResult is one znode read by GetMany: its data and stat.
type GetResult struct {
	Data []byte
	Stat *zk.Stat
}

// Get reads a znode.
func (z Client) Get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	r, err := Call(ctx, z.Timeout, func() (GetResult, error) {
		b, st, err := z.Conn.Get(path)
		return GetResult{b, st}, err
	})
	return r.Data, r.Stat, err
}

// GetACL reads a znode's ACL.
func (z Client) GetACL(ctx context.Context, path string) ([]zk.ACL, error) {
	return Call(ctx, z.Timeout, func() ([]zk.ACL, error) {
		acl, _, err := z.Conn.GetACL(path)
		return acl, err
	})
}

// Exists says whether a znode exists, with its stat.
func (z Client) Exists(ctx context.Context, path string) (bool, *zk.Stat, error) {
	type res struct {
		ok bool
		st *zk.Stat
	}
	r, err := Call(ctx, z.Timeout, func() (res, error) {
		ok, st, err := z.Conn.Exists(path)
		return res{ok, st}, err
	})
	return r.ok, r.st, err
}

// existsW is Exists with a watch: ch fires on the node's next change.
func (z Client) ExistsW(ctx context.Context, path string) (bool, <-chan zk.Event, error) {
	type res struct {
		ok bool
		ch <-chan zk.Event
	}
	r, err := Call(ctx, z.Timeout, func() (res, error) {
		ok, _, ch, err := z.Conn.ExistsW(path)
		return res{ok, ch}, err
	})
	return r.ok, r.ch, err
}

// Children lists a znode's children.
func (z Client) Children(ctx context.Context, path string) ([]string, error) {
	return Call(ctx, z.Timeout, func() ([]string, error) {
		names, _, err := z.Conn.Children(path)
		return names, err
	})
}

// ChildrenW lists a znode's children and sets a watch: ch fires on the
// list's next change, and when the session ends or the connection closes.
func (z Client) ChildrenW(ctx context.Context, path string) ([]string, <-chan zk.Event, error) {
	type res struct {
		names []string
		ch    <-chan zk.Event
	}
	r, err := Call(ctx, z.Timeout, func() (res, error) {
		names, _, ch, err := z.Conn.ChildrenW(path)
		return res{names, ch}, err
	})
	return r.names, r.ch, err
}

// Create creates a znode.
func (z Client) Create(ctx context.Context, path string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	return Call(ctx, z.Timeout, func() (string, error) { return z.Conn.Create(path, data, flags, acl) })
}

// Set writes a znode's data at version (-1: any).
func (z Client) Set(ctx context.Context, path string, data []byte, version int32) (*zk.Stat, error) {
	return Call(ctx, z.Timeout, func() (*zk.Stat, error) { return z.Conn.Set(path, data, version) })
}

// sync makes the server this session talks to catch up with the leader
// before the next read.
func (z Client) Sync(ctx context.Context, path string) error {
	_, err := Call(ctx, z.Timeout, func() (string, error) { return z.Conn.Sync(path) })
	return err
}

// Delete deletes a znode at version (-1: any).
func (z Client) Delete(ctx context.Context, path string, version int32) error {
	_, err := Call(ctx, z.Timeout, func() (struct{}, error) { return struct{}{}, z.Conn.Delete(path, version) })
	return err
}

// multi runs ops atomically. On failure it returns the index of the op that
// failed (-1 when unknown, e.g. the connection broke) and that op's error.
func (z Client) Multi(ctx context.Context, ops ...any) (failed int, err error) {
	resp, err := Call(ctx, z.Timeout, func() ([]zk.MultiResponse, error) { return z.Conn.Multi(ops...) })
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
func (z Client) Ensure(ctx context.Context, path string, data []byte, acl []zk.ACL) error {
	ok, _, err := z.Exists(ctx, path)
	if err != nil {
		return fmt.Errorf("look up %s: %w", path, err)
	}
	if ok {
		return nil
	}
	if _, err := z.Create(ctx, path, data, zk.FlagPersistent, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", path, AuthHint(err))
	}
	return nil
}

// GetMany reads many znodes with a few calls in flight; a node that
// vanished meanwhile gives a nil entry.
func (z Client) GetMany(ctx context.Context, paths []string) ([]*GetResult, error) {
	out := make([]*GetResult, len(paths))
	err := inFlight(paths, func(i int, p string) error {
		b, st, err := z.Get(ctx, p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return fmt.Errorf("read %s: %w", p, err)
		default:
			out[i] = &GetResult{b, st}
		}
		return nil
	})
	return out, err
}

// GetACLs reads the ACLs of many znodes with a few calls in flight; a
// node that does not exist gives a nil entry.
func (z Client) GetACLs(ctx context.Context, paths []string) ([][]zk.ACL, error) {
	out := make([][]zk.ACL, len(paths))
	err := inFlight(paths, func(i int, p string) error {
		acl, err := z.GetACL(ctx, p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
		case err != nil:
			return fmt.Errorf("read the ACL of %s: %w", p, err)
		default:
			out[i] = acl
		}
		return nil
	})
	return out, err
}

// inFlight calls do for every path with up to 8 calls in flight and
// joins their errors.
func inFlight(paths []string, do func(i int, p string) error) error {
	const most = 8
	errs := make([]error, len(paths))
	sem := make(chan struct{}, most)
	var wg sync.WaitGroup
	for i, p := range paths {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = do(i, p)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// authHint explains ErrNoAuth.
func AuthHint(err error) error {
	if errors.Is(err, zk.ErrNoAuth) {
		return fmt.Errorf("%w: the cluster's znodes are digest-protected; configure the cluster's --zk-auth user:password", err)
	}
	return err
}

// waitSession polls until conn has a session, bounded by timeout and ctx.
func WaitSession(ctx context.Context, conn zkconn.Conn, timeout time.Duration, servers []string) error {
	const every = 20 * time.Millisecond
	deadline := time.Now().Add(timeout)
	for range int(timeout/every) + 2 {
		if conn.State() == zk.StateHasSession {
			return nil
		}
		if !time.Now().Before(deadline) {
			break
		}
		if !clock.Sleep(ctx, every) {
			return fmt.Errorf("%w: waiting for a session with %s: %v%s", ErrUnavailable, strings.Join(servers, ","), ctx.Err(), lastDialError(conn))
		}
	}
	return fmt.Errorf("%w: no session with %s within %v (state %v)%s", ErrUnavailable, strings.Join(servers, ","), timeout, conn.State(), lastDialError(conn))
}

// lastDialError is ": last attempt: <why>" when conn remembers why its last
// connection attempt failed (a TLS handshake, say), else "".
func lastDialError(conn zkconn.Conn) string {
	if de, ok := conn.(zkconn.DialErrorer); ok && de.DialError() != nil {
		return ": last attempt: " + de.DialError().Error()
	}
	return ""
}

// call runs one ZooKeeper operation, giving up after timeout or when ctx
// ends (the operation may still complete in the background: callers treat
// such a failure as "outcome unknown").
func Call[T any](ctx context.Context, timeout time.Duration, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	if err := ctx.Err(); err != nil { // given up already: nothing is sent
		var zero T
		return zero, err
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	t := clock.NewTimer(ctx, timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
	case <-t.C:
	}
	select {
	case r := <-ch: // the answer came too: it wins (select picks at random)
		return r.v, r.err
	default:
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	return zero, ErrOpTimeout
}

// ErrOpTimeout: a ZooKeeper call did not answer within opTimeout.
var ErrOpTimeout = errors.New("zookeeper call timed out")

// transient reports whether err may go away by retrying (connection trouble,
// not a verdict of the server).
func Transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.Is(err, ErrOpTimeout) || errors.Is(err, ErrUnavailable)
}

// Logger sends the ZooKeeper client's lines to zerolog at debug level.
// If negotiated is set, it records the session timeout the server granted,
// which go-zookeeper reveals only in its "authenticated" line.
type Logger struct {
	Log        zerolog.Logger
	Negotiated *atomic.Int64
}

// authenticatedFormat is go-zookeeper v1.0.4's log line for a new session.
const authenticatedFormat = "authenticated: id=%d, timeout=%d"

// Printf logs one line of the ZooKeeper client at debug level.
func (l Logger) Printf(format string, args ...any) {
	if l.Negotiated != nil && format == authenticatedFormat && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			l.Negotiated.Store(int64(ms))
		}
	}
	l.Log.Debug().Str("component", "zk-client").Msgf(format, args...)
}

// unavailable marks connection trouble as ErrUnavailable.
func Unavailable(err error) error {
	if Transient(err) && !errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// checkServers trims the server list and checks each address.
func CheckServers(in []string) ([]string, error) {
	var out []string
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, fmt.Errorf("empty ZooKeeper server address in %q", in)
		}
		if strings.Contains(s, ",") {
			return nil, fmt.Errorf("ZooKeeper server %q contains a comma: split the connection string into addresses", s)
		}
		if strings.Contains(s, ":") {
			if err := wire.CheckHostPort(s); err != nil {
				return nil, fmt.Errorf("ZooKeeper server: %v", err)
			}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no ZooKeeper servers")
	}
	return out, nil
}

// validateCluster checks a cluster name: it becomes one znode name as is.
func ValidateCluster(s string) error {
	if s == "" {
		return fmt.Errorf("cluster name is empty")
	}
	if len(s) > 100 {
		return fmt.Errorf("cluster name %q is longer than 100 bytes", s)
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		ok := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.'
		if !ok {
			return fmt.Errorf("cluster name %q: character %q not allowed (use letters, digits, '-', '_', '.')", s, b)
		}
	}
	if s[0] == '.' {
		return fmt.Errorf("cluster name %q must not start with '.'", s)
	}
	return nil
}

// ACLs returns the ACL of the cluster's znodes and of the shared roots
// (/snowflaked and the tombstones'). A root grants the world create and
// delete besides read, so each cluster's own credentials create and
// delete its znode there, whoever created the root: a cluster's znodes
// always have children guarded by its ACL, so nobody else can empty one
// to delete it.
func ACLs(auth string) (acl, root []zk.ACL) {
	if auth == "" {
		open := zk.WorldACL(zk.PermAll)
		return open, open
	}
	user, pass, _ := strings.Cut(auth, ":")
	digest := zk.DigestACL(zk.PermAll, user, pass)
	acl = append(append([]zk.ACL{}, digest...), zk.WorldACL(zk.PermRead)...)
	root = append(append([]zk.ACL{}, digest...), zk.WorldACL(zk.PermRead|zk.PermCreate|zk.PermDelete)...)
	return acl, root
}

// NewToken returns a random 128-bit token in hex (instance tokens and
// cluster incarnations).
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// keySafe reports whether byte b stands for itself in an escaped node key.
func keySafe(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
		strings.IndexByte("-_.:@+=,~", b) >= 0
}

// EscapeName turns a node key into a znode-name-safe string, reversibly:
// bytes outside [A-Za-z0-9-_.:@+=,~] (and a leading '.') become %XX with
// upper-case hex. Every key has exactly one escaped form.
func EscapeName(k string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(k))
	for i := 0; i < len(k); i++ {
		c := k[i]
		if keySafe(c) && !(i == 0 && c == '.') {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
	}
	return b.String()
}

// UnescapeName reverses EscapeName. It accepts only the canonical
// escaped form of a valid node key, so two names never map to one key.
func UnescapeName(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("escaped node key %q: truncated %%-escape at byte %d", s, i)
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("escaped node key %q: bad %%-escape %q at byte %d", s, s[i:i+3], i)
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	k := b.String()
	if err := ValidateNodeKey(k); err != nil {
		return "", fmt.Errorf("escaped node key %q: %w", s, err)
	}
	if EscapeName(k) != s {
		return "", fmt.Errorf("escaped node key %q is not in canonical form (want %q)", s, EscapeName(k))
	}
	return k, nil
}

// unhex decodes an upper-case hex digit, or returns -1.
func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// ValidateNodeKey checks a node key: any printable UTF-8 text up to 255 bytes.
func ValidateNodeKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("node key is empty")
	case len(k) > maxNodeKeyLen:
		return fmt.Errorf("node key %.40q… is %d bytes, at most %d", k, len(k), maxNodeKeyLen)
	case !utf8.ValidString(k):
		return fmt.Errorf("node key %q is not valid UTF-8", k)
	}
	for _, r := range k {
		if unicode.IsControl(r) {
			return fmt.Errorf("node key %q contains control character %U", k, r)
		}
	}
	return nil
}

// maxNodeKeyLen bounds a node key in bytes (escaped, a name stays far below
// ZooKeeper's limits).
const maxNodeKeyLen = 255
