package segment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
)

// testStaleLimit is the token stale limit of the tests below.
const testStaleLimit = 5 * time.Second

// The faults that cut a store off from ZooKeeper.
var (
	// cutRefused: every request fails at once (the connection breaks, as
	// when ZooKeeper's port refuses).
	cutRefused = zkmem.Fault{Kind: zkmem.Drop, Down: 10 * time.Millisecond}
	// cutUnanswered: the connection stays down for a minute, so requests
	// wait for it until their caller gives up (a partition that drops
	// packets).
	cutUnanswered = zkmem.Fault{Kind: zkmem.Drop, Down: time.Minute}
)

// tokenCut is a store with the token tag "secret" on an in-memory
// ZooKeeper, whose requests can be cut off from ZooKeeper (cut) or have
// the read of the tag's token znode answered late (slow), while another
// store (admin) created the tag and rotates its token.
type tokenCut struct {
	srv   *zkmem.Server
	s     *ZKStore // the node's store: the one cut off
	admin *ZKStore
	inc   int64
	token string
	cut   atomic.Pointer[zkmem.Fault] // nil: ZooKeeper answers
	slow  atomic.Int64                // the token read's delay (ns)
}

// newTokenCut makes a tokenCut whose node store honours token hashes for
// limit (run it inside a synctest bubble).
func newTokenCut(t *testing.T, limit time.Duration) *tokenCut {
	t.Helper()
	c := &tokenCut{srv: memCluster(t)}
	ctx := context.Background()
	s, err := OpenZK(ctx, ZKConfig{Servers: []string{"127.0.0.1:2181"}, Cluster: "test", Timeout: 3 * time.Second,
		Log: testsupport.Log(t, nil), Dial: c.srv.Dial, TokenStaleLimit: limit})
	if err != nil {
		t.Fatalf("OpenZK: %v", err)
	}
	t.Cleanup(s.Close)
	s.conn.(*zkmem.Conn).SetLabel("node")
	c.s, c.admin = s, memZKStore(t, c.srv)
	if c.token, err = c.admin.CreateWithToken(ctx, Tag{Name: "secret", Start: 1, Step: 1000, MaxStep: 1000}); err != nil {
		t.Fatal(err)
	}
	c.inc = incOf(t, c.admin, "secret")
	c.srv.SetInjector(func(r zkmem.Request) zkmem.Fault {
		if r.Client != "node" {
			return zkmem.Fault{}
		}
		if f := c.cut.Load(); f != nil {
			return *f
		}
		if d := time.Duration(c.slow.Load()); d > 0 && r.Op == "get" && strings.HasSuffix(r.Path, "/secret/token") {
			return zkmem.Fault{Delay: d}
		}
		return zkmem.Fault{}
	})
	t.Cleanup(func() { c.srv.SetInjector(nil) })
	return c
}

// cutOff cuts the node's store off from ZooKeeper with fault, and breaks
// its connection at once (a request that meets the fault).
func (c *tokenCut) cutOff(fault zkmem.Fault) {
	c.cut.Store(&fault)
	_, _, _ = c.s.z.Exists(context.Background(), "/")
}

// heal lets the node's store reach ZooKeeper again.
func (c *tokenCut) heal() { c.cut.Store(nil) }

// tokens asks the node's store for the tag's tokens, giving up a read of
// ZooKeeper after a second (as a request's read is bounded).
func (c *tokenCut) tokens() (TokenSet, error) { return c.read(time.Second) }

// read asks the node's store for the tag's tokens, giving up a read of
// ZooKeeper after wait.
func (c *tokenCut) read(wait time.Duration) (TokenSet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return c.s.Tokens(ctx, "secret", c.inc)
}

// waitServed asks for the tokens until they come, for at most two
// minutes of virtual time, and checks that they hold token.
func (c *tokenCut) waitServed(t *testing.T, token string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		set, err := c.tokens()
		if err == nil {
			if !set.Match([]byte(token), time.Now()) {
				t.Fatalf("the tokens read again do not hold the tag's token: %+v", set)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tokens still unread 2 minutes after ZooKeeper came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A store cut off from ZooKeeper honours the token hashes it read last
// for at most its token stale limit, counted from the start of the read
// that gave them (a slow read does not stretch it, nor does a request
// that asked within the limit and whose read failed past it); past the
// limit, and with no hashes read at all, it answers ErrTokensUnconfirmed;
// once ZooKeeper answers, it serves again by itself. Virtual time
// (testing/synctest).
func TestZKStore_TokensStaleLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fill     bool          // read the tokens before the cut
		slowRead time.Duration // how late that read is answered
		fault    zkmem.Fault
		askAt    time.Duration // when the request asks, from the start of the read that filled the cache
		want     error         // nil: the cached hashes serve
	}{
		{"refused, within the limit", true, 0, cutRefused, testStaleLimit - 500*time.Millisecond, nil},
		{"refused, at the limit", true, 0, cutRefused, testStaleLimit, nil},
		{"refused, past the limit", true, 0, cutRefused, testStaleLimit + 500*time.Millisecond, ErrTokensUnconfirmed},
		{"unanswered, answered within the limit", true, 0, cutUnanswered, testStaleLimit - 2*time.Second, nil},
		{"unanswered, asked within the limit, answered past it", true, 0, cutUnanswered, testStaleLimit - 500*time.Millisecond, ErrTokensUnconfirmed},
		{"a slow read counts from its start", true, 2 * time.Second, cutRefused, testStaleLimit + 500*time.Millisecond, ErrTokensUnconfirmed},
		{"a slow read, within the limit from its start", true, 2 * time.Second, cutRefused, testStaleLimit - 500*time.Millisecond, nil},
		{"none read yet", false, 0, cutRefused, 0, ErrTokensUnconfirmed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newTokenCut(t, testStaleLimit)
				start := time.Now()
				if tc.fill {
					c.slow.Store(int64(tc.slowRead))
					if _, err := c.read(tc.slowRead + time.Second); err != nil {
						t.Fatalf("first read of the tokens: %v", err)
					}
					c.slow.Store(0)
				}
				c.cutOff(tc.fault)
				time.Sleep(time.Until(start.Add(tc.askAt)))
				set, err := c.tokens()
				switch {
				case tc.want == nil && err != nil:
					t.Fatalf("asked %v after the read that filled the cache began, cut off: %v; want the cached hashes", tc.askAt, err)
				case tc.want == nil && !set.Match([]byte(c.token), time.Now()):
					t.Fatalf("the cached hashes do not hold the tag's token: %+v", set)
				case tc.want != nil && !errors.Is(err, tc.want):
					t.Fatalf("asked %v after the read that filled the cache began, cut off: %+v, %v; want %v", tc.askAt, set, err, tc.want)
				case tc.want != nil && !zkclient.Transient(err) && !errors.Is(err, context.DeadlineExceeded):
					t.Errorf("the refusal %v does not carry ZooKeeper's error", err)
				}
				c.heal()
				c.waitServed(t, c.token)
			})
		})
	}
}

// The rotation of a tag's token with no grace while a node is cut off
// from ZooKeeper, through the service: the node serves the old token for
// at most the token stale limit after its last read of the hashes (its
// tag poll's, before the cut), then refuses every token of the tag with
// ErrTokensUnconfirmed (an ErrUnavailable) until ZooKeeper answers; then
// it serves the new token and refuses the old one (ErrTokenInvalid) by
// itself. Virtual time (testing/synctest).
func TestTakeWithToken_RotatedWhileCutOff(t *testing.T) {
	if err := rotatedWhileCutOff(t); err != nil {
		t.Fatal(err)
	}
}

// rotatedWhileCutOff runs TestTakeWithToken_RotatedWhileCutOff's scenario
// and returns what went wrong (the mutation table runs it with the bound
// broken).
func rotatedWhileCutOff(t *testing.T) (err error) {
	synctest.Test(t, func(t *testing.T) {
		err = func() error {
			c := newTokenCut(t, testStaleLimit)
			svc, err := New(Config{Store: c.s, Log: testsupport.Log(t, nil)})
			if err != nil {
				return err
			}
			t.Cleanup(func() {
				c.heal() // a test that failed cut off: the ranges go back
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, _ = svc.Close(ctx)
			})
			ctx := context.Background()
			take := func(token string) error {
				t.Helper()
				_, err := svc.TakeWithToken(ctx, "secret", []byte(token), nil, 1)
				return err
			}
			if err := take(c.token); err != nil {
				return fmt.Errorf("the tag's token before the cut: %v", err)
			}
			time.Sleep(4 * tagPoll) // the tag's poll reads the hashes

			c.cutOff(cutRefused)
			cutAt := time.Now()
			fresh, err := c.admin.RotateToken(ctx, "secret", 0)
			if err != nil {
				return err
			}
			var lastServed time.Time
			for {
				err := take(c.token)
				if err != nil {
					if !errors.Is(err, ErrTokensUnconfirmed) || !errors.Is(err, ErrUnavailable) {
						return fmt.Errorf("the old token %v after the cut: %v; want the cached hashes, then ErrTokensUnconfirmed", time.Since(cutAt), err)
					}
					break
				}
				lastServed = time.Now()
				if time.Since(cutAt) > 2*testStaleLimit {
					return fmt.Errorf("the old token still served %v after the cut, past the token stale limit %v", time.Since(cutAt), testStaleLimit)
				}
				time.Sleep(100 * time.Millisecond)
			}
			switch served := lastServed.Sub(cutAt); {
			case served > testStaleLimit:
				return fmt.Errorf("the old token served %v after the cut, past the token stale limit %v", served, testStaleLimit)
			case served < testStaleLimit-4*tagPoll:
				return fmt.Errorf("the old token served only %v after the cut; want the cached hashes honoured up to the limit %v", served, testStaleLimit)
			}
			for _, tok := range []string{c.token, fresh} {
				if err := take(tok); !errors.Is(err, ErrTokensUnconfirmed) {
					return fmt.Errorf("a token of the tag, cut off past the limit: %v; want ErrTokensUnconfirmed", err)
				}
			}

			c.heal()
			deadline := time.Now().Add(time.Minute)
			for take(fresh) != nil {
				if time.Now().After(deadline) {
					return errors.New("the new token still refused a minute after ZooKeeper came back")
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := take(c.token); !errors.Is(err, ErrTokenInvalid) {
				return fmt.Errorf("the old token once ZooKeeper answers again: %v; want ErrTokenInvalid", err)
			}
			return nil
		}()
	})
	return err
}
