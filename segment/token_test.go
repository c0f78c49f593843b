package segment

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// A token set accepts exactly its tokens still valid, and a rotation keeps
// the old ones for the grace period only.
func TestTokenSetMatchAndRotate(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	a, b, c := NewToken(), NewToken(), NewToken()
	if len(a) != 43 || a == b {
		t.Fatalf("tokens %q %q: want 43 base64url characters, distinct", a, b)
	}
	set := TokenSet{Incarnation: 5, Hashes: []TokenHash{{SHA256: HashToken([]byte(a))}}}
	rot := set.rotated(HashToken([]byte(b)), now, time.Minute)
	dropped := set.rotated(HashToken([]byte(b)), now, 0)
	twice := rot.rotated(HashToken([]byte(c)), now.Add(10*time.Second), time.Hour)
	for _, tc := range []struct {
		name  string
		set   TokenSet
		token string
		at    time.Time
		want  bool
	}{
		{"its token", set, a, now, true},
		{"another token", set, b, now, false},
		{"empty", set, "", now, false},
		{"a prefix", set, a[:42], now, false},
		{"new after rotation", rot, b, now.Add(time.Hour), true},
		{"old within grace", rot, a, now.Add(59 * time.Second), true},
		{"old at grace's end", rot, a, now.Add(time.Minute), false},
		{"old without grace", dropped, a, now, false},
		{"new without grace", dropped, b, now, true},
		{"a second rotation keeps the first's grace", twice, a, now.Add(61 * time.Second), false},
		{"second rotation: the previous token gets the new grace", twice, b, now.Add(30 * time.Minute), true},
		{"a bad hash matches nothing", TokenSet{Hashes: []TokenHash{{SHA256: "zz"}}}, a, now, false},
	} {
		if got := tc.set.Match([]byte(tc.token), tc.at); got != tc.want {
			t.Errorf("%s: Match %v, want %v (set %+v)", tc.name, got, tc.want, tc.set)
		}
	}
	if rot.Incarnation != 5 {
		t.Errorf("rotation lost the incarnation: %+v", rot)
	}
}

// A token tag's token is kept hashed, in a znode only the cluster's
// credentials read; a rotation keeps the old token for its grace only; a
// tag deleted and created again never accepts the old tag's token.
func TestSegmentStore_Tokens(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	const auth = "ops:s3cret"
	open := func(auth string) *ZKStore {
		t.Helper()
		s, err := OpenZK(ctx, ZKConfig{Servers: srv, Cluster: "test", Auth: auth, Timeout: 3 * time.Second, Log: testsupport.Log(t, nil)})
		if err != nil {
			t.Fatalf("OpenZK: %v", err)
		}
		t.Cleanup(s.Close)
		return s
	}
	s, stranger := open(auth), open("")
	tag := Tag{Name: "tok", Start: 1, Step: 10, MaxStep: 10, MaxCount: 7}
	if err := s.Create(ctx, Tag{Name: "nope", Start: 1, Step: 10, MaxStep: 10, RequireToken: true}); err == nil {
		t.Fatal("Create with RequireToken: no error, want CreateWithToken only")
	}
	token, err := s.CreateWithToken(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Tag(ctx, "tok")
	if err != nil || !got.RequireToken || got.MaxCount != 7 {
		t.Fatalf("the tag record: %+v %v; want require_token and max_count 7", got, err)
	}
	inc := got.Incarnation

	checkTokenStoredHashed(t, srv, auth, s, stranger, token, inc)
	set, err := s.Tokens(ctx, "tok", inc)
	if err != nil || set.Incarnation != inc || !set.Match([]byte(token), time.Now()) {
		t.Fatalf("Tokens: %+v %v; want incarnation %d accepting the token", set, err, inc)
	}

	fresh := checkTokenRotation(t, s, token, inc)
	checkTokenRecreated(t, s, tag, inc, token, fresh)
}

// checkTokenStoredHashed checks that the token znode holds the token's hash
// under the cluster's digest ACL only, which stranger (no credentials)
// cannot read.
func checkTokenStoredHashed(t *testing.T, srv []string, auth string, s, stranger *ZKStore, token string, inc int64) {
	t.Helper()
	ctx := context.Background()
	raw, _, err := s.z.Get(ctx, s.tokenPath("tok"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), token) || !strings.Contains(string(raw), HashToken([]byte(token))) {
		t.Fatalf("token znode %s: want the token's hash, never the token", raw)
	}
	conn, _, err := zk.Connect(srv, 3*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := conn.AddAuth("digest", []byte(auth)); err != nil { // getACL needs a permission on the znode
		t.Fatal(err)
	}
	acl, _, err := conn.GetACL(s.tokenPath("tok"))
	if err != nil {
		t.Fatal(err)
	}
	if want := zk.DigestACL(zk.PermAll, "ops", "s3cret"); !slices.Equal(acl, want) {
		t.Fatalf("token znode ACL %+v, want the cluster's digest only %+v", acl, want)
	}
	if _, _, err := stranger.z.Get(ctx, s.tokenPath("tok")); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("reading the hashes without credentials: %v, want ErrNoAuth", err)
	}
	if _, err := stranger.Tokens(ctx, "tok", inc); err == nil || !strings.Contains(err.Error(), "--zk-auth") {
		t.Fatalf("Tokens without credentials: %v, want a refusal naming --zk-auth", err)
	}

}

// checkTokenRotation rotates tok's token with a short grace and checks that
// the old token is accepted for the grace only; it returns the new token.
func checkTokenRotation(t *testing.T, s *ZKStore, token string, inc int64) string {
	t.Helper()
	ctx := context.Background()
	const grace = 1500 * time.Millisecond
	rotatedAt := time.Now()
	fresh, err := s.RotateToken(ctx, "tok", grace)
	if err != nil || fresh == token {
		t.Fatalf("RotateToken: %q %v", fresh, err)
	}
	set, err := s.readTokens(ctx, "tok", inc)
	if err != nil {
		t.Fatal(err)
	}
	if !set.Match([]byte(fresh), time.Now()) || !set.Match([]byte(token), time.Now()) && time.Since(rotatedAt) < grace {
		t.Fatalf("right after the rotation: %+v; want the new token and the old one (within its grace)", set)
	}
	deadline := time.Now().Add(waitLong)
	for set.Match([]byte(token), time.Now()) {
		if time.Now().After(deadline) {
			t.Fatalf("the old token still valid %v after a rotation with grace %v", time.Since(rotatedAt), grace)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if time.Since(rotatedAt) < grace-100*time.Millisecond {
		t.Fatalf("the old token refused %v after the rotation, before its grace %v", time.Since(rotatedAt), grace)
	}
	if !set.Match([]byte(fresh), time.Now()) {
		t.Fatal("the new token refused after the grace")
	}
	if _, err := s.RotateToken(ctx, "tok", -time.Second); err == nil {
		t.Fatal("a negative grace: no error")
	}
	if err := s.Create(ctx, Tag{Name: "plain", Start: 1, Step: 10, MaxStep: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RotateToken(ctx, "plain", 0); !errors.Is(err, ErrNoToken) {
		t.Fatalf("rotating a plain tag's token: %v, want ErrNoToken", err)
	}

	return fresh
}

// checkTokenRecreated deletes tok and creates it again: a new incarnation
// whose token set accepts neither of the old tag's tokens.
func checkTokenRecreated(t *testing.T, s *ZKStore, tag Tag, inc int64, token, fresh string) {
	t.Helper()
	ctx := context.Background()
	if err := s.Delete(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	again, err := s.CreateWithToken(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	newInc := incOf(t, s, "tok")
	if _, err := s.Tokens(ctx, "tok", inc); !errors.Is(err, ErrTagGone) {
		t.Fatalf("Tokens of the old incarnation: %v, want ErrTagGone", err)
	}
	set, err := s.Tokens(ctx, "tok", newInc)
	if err != nil || set.Incarnation != newInc {
		t.Fatalf("Tokens of the new incarnation: %+v %v", set, err)
	}
	for _, old := range []string{token, fresh} {
		if set.Match([]byte(old), time.Now()) {
			t.Errorf("the recreated tag accepts a token of the one before (%+v)", set)
		}
	}
	if !set.Match([]byte(again), time.Now()) {
		t.Error("the recreated tag refuses its own token")
	}
}
