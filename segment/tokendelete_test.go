package segment_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// unreadableTokens is tokenMem whose token hashes cannot be read (as a
// node without the credentials of the tag's token znode meets them), and
// which knows a tag deleted when asked for its tokens.
type unreadableTokens struct {
	*tokenMem
	reads int
}

var errNotAuthenticated = errors.New("zk: not authenticated")

func (m *unreadableTokens) Tokens(_ context.Context, tag string, inc int64) (segment.TokenSet, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if err := m.goneLocked(tag, inc); err != nil {
		return segment.TokenSet{}, err
	}
	return segment.TokenSet{}, fmt.Errorf("%w: the token znode is readable only with other credentials", errNotAuthenticated)
}

// serves reports whether svc lists tag in its Status (what the metrics'
// per-tag series come from).
func serves(svc *segment.Service, tag string) bool {
	for _, ts := range svc.Status() {
		if ts.Tag == tag {
			return true
		}
	}
	return false
}

// waitDropped waits up to 3s for svc to drop tag from its Status.
func waitDropped(t *testing.T, svc *segment.Service, tag string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for serves(svc, tag) {
		if time.Now().After(deadline) {
			t.Fatalf("tag %q still in Status 3s after its delete: %+v", tag, svc.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A tag no request got past the admission of (no token sent, a count
// above its ceiling) is dropped when it is deleted, with no request after
// the delete: the node watches it from its first use, not from its first
// range load. Before, such a buffer never loaded, so never watched its tag:
// it answered 401 (or 400) and kept its metric series until a restart.
func TestDeletedTagDroppedBeforeAnyLoad(t *testing.T) {
	token := segment.NewToken()
	for _, tc := range []struct {
		name, tag, token string
		n                int
		want             error
	}{
		{"token tag, no token sent", "s", "", 1, segment.ErrTokenRequired},
		{"token tag, a wrong token", "s", segment.NewToken(), 1, segment.ErrTokenInvalid},
		{"above the ceiling", "s", token, 11, segment.ErrCountAboveMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newTokenMem(token)
			svc, err := segment.New(segment.Config{Store: st, Incarnation: "i", Wait: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = svc.Close(context.Background()) })
			ctx := context.Background()
			if _, err := svc.TakeWithToken(ctx, tc.tag, []byte(tc.token), nil, tc.n); !errors.Is(err, tc.want) {
				t.Fatalf("before the delete: %v, want %v", err, tc.want)
			}
			if !serves(svc, tc.tag) {
				t.Fatalf("tag %q not in Status after a request", tc.tag)
			}
			time.Sleep(50 * time.Millisecond) // the watch is armed (a first request's ZooKeeper reads, here none)
			st.remove(tc.tag)
			waitDropped(t, svc, tc.tag)
			for _, tok := range []string{"", token} {
				if _, err := svc.TakeWithToken(ctx, tc.tag, []byte(tok), nil, 1); !errors.Is(err, segment.ErrUnknownTag) {
					t.Errorf("after the delete, token %q: %v, want ErrUnknownTag", tok, err)
				}
			}
			if st.allocCount() != 0 {
				t.Errorf("%d range loads for a tag no request was admitted to, want 0", st.allocCount())
			}
		})
	}
}

// A tag whose token hashes this node cannot read answers 503 with the
// cause named once ("read the tokens of tag" not twice), logs the failure
// with its cause once (not per request), and once the tag is deleted its
// next request answers unknown tag at once, even with the store's watch
// unavailable: the token read that finds it gone drops the buffer.
func TestUnreadableTokensLoggedOnceAndDeletedTagDropped(t *testing.T) {
	token := segment.NewToken()
	st := &unreadableTokens{tokenMem: newTokenMem(token)}
	st.noWatch = true
	var logs testsupport.SyncBuffer
	svc, err := segment.New(segment.Config{Store: st, Incarnation: "i", Wait: 200 * time.Millisecond, Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = svc.Close(context.Background()) })
	ctx := context.Background()
	for i := range 5 {
		_, err := svc.TakeWithToken(ctx, "s", []byte(token), nil, 1)
		if !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "zk: not authenticated") {
			t.Fatalf("request %d: %v, want ErrUnavailable naming zk: not authenticated", i, err)
		}
		if n := strings.Count(err.Error(), "read the tokens of tag"); n != 1 {
			t.Errorf("request %d: %q says %q %d times, want once", i, err, "read the tokens of tag", n)
		}
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "zk: not authenticated") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"tag":"s"`) || !strings.Contains(lines[0], `"level":"warn"`) {
		t.Errorf("log lines with the cause: %q; want one warning naming tag s", lines)
	}

	st.remove("s")
	if _, err := svc.TakeWithToken(ctx, "s", []byte(token), nil, 1); !errors.Is(err, segment.ErrUnknownTag) {
		t.Errorf("after the delete, with a token: %v, want ErrUnknownTag", err)
	}
	if serves(svc, "s") {
		t.Errorf("tag s still in Status after its delete was found: %+v", svc.Status())
	}
}

// The cluster: created without credentials, a token tag created
// with --zk-auth (its token znode readable only with them), served by a
// node without credentials. Its requests answer 503 naming the cause once;
// the node logs it once; a delete drops the tag (unknown tag, out of
// Status) without any request after it.
func TestIntegration_TokenTagOfOtherCredentials(t *testing.T) {
	zkc := zkharness.StartStandalone(t)
	srv := strings.Split(zkc.ConnectString(), ",")
	ctx := context.Background()
	claimCreator(ctx, t, srv) // cluster "seg", open ACLs
	admin, err := segment.OpenZK(ctx, segment.ZKConfig{Servers: srv, Cluster: "seg", Auth: "ops:s3cret", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	token, err := admin.CreateWithToken(ctx, segment.Tag{Name: "tok", Start: 1, Step: 10, MaxStep: 10})
	if err != nil {
		t.Fatal(err)
	}
	node := openStore(t, srv)
	defer node.Close()
	var logs testsupport.SyncBuffer
	svc, err := segment.New(segment.Config{Store: node, Incarnation: "i", Wait: time.Second, Log: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = svc.Close(context.Background()) }()
	var lastErr error
	for i := range 3 {
		_, err := svc.TakeWithToken(ctx, "tok", []byte(token), nil, 1)
		lastErr = err
		if !errors.Is(err, segment.ErrUnavailable) || !strings.Contains(err.Error(), "zk: not authenticated") {
			t.Fatalf("request %d: %v, want ErrUnavailable naming zk: not authenticated", i, err)
		}
		if n := strings.Count(err.Error(), "read the tokens of tag"); n != 1 {
			t.Errorf("request %d: %q says %q %d times, want once", i, err, "read the tokens of tag", n)
		}
	}
	t.Logf("answer: %v\nlog: %s", lastErr, logs.String())
	if n := strings.Count(logs.String(), "zk: not authenticated"); n != 1 {
		t.Errorf("%d log lines name the cause, want 1:\n%s", n, logs.String())
	}
	if err := admin.Delete(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	waitDropped(t, svc, "tok")
	for _, tok := range []string{"", token} {
		if _, err := svc.TakeWithToken(ctx, "tok", []byte(tok), nil, 1); !errors.Is(err, segment.ErrUnknownTag) {
			t.Errorf("after the delete, token %q: %v, want ErrUnknownTag", tok, err)
		}
	}
}
