package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sfclient "codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
	"codeberg.org/snowflaked/snowflaked/tests/zkproxy"
)

// getWithToken is p.get with Authorization: Bearer token ("" sends none).
func (p *proc) getWithToken(path, token string) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatalf("GET %s: read body: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// lastLine is the last non-empty line of s: where snowflakectl prints a
// new token.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// A tag created with --require-token by the real snowflakectl, on a real
// node and ZooKeeper run with --zk-auth: 401 without its token, 403 with a
// wrong one, IDs with it (Bearer, or ?token= on the Leaf path), across a
// restart of the node; after a rotation with a grace the old token serves
// during the grace and is refused after, the new one serves throughout.
func TestIntegration_SegmentTokenTag(t *testing.T) {
	const auth = "ops:s3cret"
	zk := zkharness.StartStandalone(t)
	dir := t.TempDir()
	args := clusterArgs(dir, zk.ConnectString(), "tokens", "node-0", "--zk-auth", auth)
	p := startNode(t, binSnowflaked, args)
	p.waitReadyz(http.StatusOK, readyTimeout)
	zkArgs := []string{"--zk", zk.ConnectString(), "--cluster", "tokens", "--zk-auth", auth}

	token := createTokenTag(t, zk.ConnectString(), zkArgs)
	checkTokenCases(t, p, "first start", tokenTagCases(token))

	// A restart (SIGTERM; the next start resumes nothing and reads the
	// tag again) keeps every answer.
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("node exit %d", code)
	}
	p = startNode(t, binSnowflaked, args)
	p.waitReadyz(http.StatusOK, readyTimeout)
	testsupport.Poll(t, readyTimeout, pollEvery, "segment mode ready after the restart", func() bool {
		code, _ := p.get("/readyz/segment")
		return code == http.StatusOK
	})
	checkTokenCases(t, p, "after a restart", tokenTagCases(token))

	fresh := rotateTokenWithGrace(t, p, zkArgs, token)
	checkTokenCases(t, p, "after the grace", tokenTagCases(fresh))
	checkTokenClientAndSecrecy(t, p, fresh, token)
	// Rotating a plain tag's token is a usage error.
	if code, _, _ := ctl(t, append([]string{"segment", "create", "plain"}, zkArgs...)...); code != 0 {
		t.Fatalf("segment create plain: exit %d", code)
	}
	if code, _, errOut := ctl(t, append([]string{"segment", "token", "rotate", "plain"}, zkArgs...)...); code != 2 || !strings.Contains(errOut, "requires no token") {
		t.Errorf("segment token rotate of a plain tag: exit %d %s, want 2", code, errOut)
	}
}

// createTokenTag creates the tag secret with --require-token through
// snowflakectl and checks what list and status show of it; it returns the
// token printed.
func createTokenTag(t *testing.T, zkServers string, zkArgs []string) string {
	t.Helper()
	code, out, errOut := ctl(t, append([]string{"segment", "create", "secret", "--require-token", "--max-count", "50", "--step", "100"}, zkArgs...)...)
	if code != 0 || strings.Contains(errOut, "WARNING") {
		t.Fatalf("segment create --require-token: exit %d: %s %s", code, out, errOut)
	}
	token := lastLine(out)
	if len(token) != 43 {
		t.Fatalf("segment create printed %q as its last line, want a 43-character token", token)
	}
	// Nodes of a release before tokens must not join the cluster now.
	if code, out, _ := ctl(t, "cluster", "list", "--zk", zkServers); code != 0 || !strings.Contains(out, "tag_tokens") {
		t.Errorf("cluster list after segment create --require-token: exit %d: %s; want the cluster to require tag_tokens", code, out)
	}
	code, out, errOut = ctl(t, append([]string{"segment", "list"}, zkArgs...)...)
	if code != 0 || !strings.Contains(out, "TOKEN") || !strings.Contains(out, "yes") || strings.Contains(out, token) {
		t.Fatalf("segment list: exit %d: %s %s; want a TOKEN column saying yes, never the token", code, out, errOut)
	}
	code, out, _ = ctl(t, append([]string{"segment", "status", "secret", "--json"}, zkArgs...)...)
	if code != 0 || !strings.Contains(out, `"require_token": true`) || !strings.Contains(out, `"max_count": 50`) || strings.Contains(out, "sha256") {
		t.Fatalf("segment status --json: exit %d: %s; want require_token and max_count, no hash", code, out)
	}

	return token
}

// checkTokenCases asks p each case's path with its token and checks the
// answer's status and error code.
func checkTokenCases(t *testing.T, p *proc, when string, cases []tokenCase) {
	t.Helper()
	for _, tc := range cases {
		code, body := p.getWithToken(tc.path, tc.token)
		if code != tc.status || tc.code != "" && !strings.Contains(body, `"code":"`+tc.code+`"`) {
			t.Errorf("%s: GET %s (%s): %d %s, want %d %s", when, tc.path, tc.what, code, body, tc.status, tc.code)
		}
	}
}

// tokenTagCases are the requests to the tag secret and what each gets
// when token is its token.
func tokenTagCases(token string) []tokenCase {
	wrong := strings.Repeat("A", 43)
	return []tokenCase{
		{"no token", "/segment/secret", "", 401, "token_required"},
		{"no token", "/api/segment/get/secret", "", 401, "token_required"},
		{"wrong token", "/segment/secret", wrong, 403, "token_invalid"},
		{"wrong token in the query", "/api/segment/get/secret?token=" + wrong, "", 403, "token_invalid"},
		{"its token", "/segment/secret", token, 200, ""},
		{"its token, a batch", "/segment/secret?count=50", token, 200, ""},
		{"its token, above --max-count", "/segment/secret?count=51", token, 400, "invalid_count"},
		{"its token in the query", "/api/segment/get/secret?token=" + token, "", 200, ""},
	}
}

// rotateTokenWithGrace rotates secret's token with a grace and checks that
// both tokens serve during it and the old one is refused after it, within
// the node's poll; it returns the new token.
func rotateTokenWithGrace(t *testing.T, p *proc, zkArgs []string, token string) string {
	t.Helper()
	const grace = 4 * time.Second
	code, out, errOut := ctl(t, append([]string{"segment", "token", "rotate", "secret", "--grace", grace.String()}, zkArgs...)...)
	rotatedAt := time.Now()
	if code != 0 {
		t.Fatalf("segment token rotate: exit %d: %s %s", code, out, errOut)
	}
	fresh := lastLine(out)
	if len(fresh) != 43 || fresh == token {
		t.Fatalf("segment token rotate printed %q last, want a new token", fresh)
	}
	testsupport.Poll(t, 5*time.Second, pollEvery, "the new token accepted after the rotation", func() bool {
		code, _ := p.getWithToken("/segment/secret", fresh)
		return code == http.StatusOK
	})
	if code, body := p.getWithToken("/segment/secret", token); time.Since(rotatedAt) < grace-time.Second && code != http.StatusOK {
		t.Fatalf("the old token %v after the rotation, within its grace %v: %d %s", time.Since(rotatedAt), grace, code, body)
	}
	testsupport.Poll(t, grace+10*time.Second, pollEvery, "the old token refused after the grace", func() bool {
		code, _ := p.getWithToken("/segment/secret", token)
		return code == http.StatusForbidden
	})
	if d := time.Since(rotatedAt); d < grace-500*time.Millisecond {
		t.Fatalf("the old token refused %v after the rotation, before its grace %v", d, grace)
	}
	return fresh
}

// checkTokenClientAndSecrecy checks that the Go client sends a tag's
// token, that refusals are counted, and that no token shows in the
// metrics, the status page or the log.
func checkTokenClientAndSecrecy(t *testing.T, p *proc, fresh, token string) {
	t.Helper()
	// The Go client sends the tag's token from Config.Tokens.
	for _, tc := range []struct {
		token string
		ok    bool
	}{{fresh, true}, {token, false}} {
		c, err := sfclient.New(context.Background(), sfclient.Config{Servers: []string{p.addr}, Tokens: map[string]string{"secret": tc.token}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.NextSegmentN(context.Background(), "secret", 5)
		_ = c.Close()
		if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, sfclient.ErrRejected) {
			t.Errorf("client NextSegmentN with the %s token: %v", map[bool]string{true: "new", false: "expired"}[tc.ok], err)
		}
	}

	code, metrics := p.get("/metrics")
	if code != http.StatusOK || !strings.Contains(metrics, `snowflaked_tokens_refused_total{tag="secret",reason="token_invalid"}`) {
		t.Errorf("/metrics: %d, no token_invalid refusals of secret", code)
	}
	for _, path := range []string{"/metrics", "/status"} {
		if _, body := p.get(path); strings.Contains(body, token) || strings.Contains(body, fresh) {
			t.Errorf("a token shows in %s", path)
		}
	}
	if out := p.Output(); strings.Contains(out, token) || strings.Contains(out, fresh) {
		t.Error("a token shows in the node's log")
	}
}

// tokenCase is one request of TestIntegration_SegmentTokenTag.
type tokenCase struct {
	what, path, token string
	status            int
	code              string
}

// A standalone node run with --api-tokens-file serves /id, /ids and /uuid
// only with one of the file's tokens (a token, or its sha256: hash); a
// file it cannot use stops it at start with exit 2.
func TestIntegration_APITokensFile(t *testing.T) {
	dir := t.TempDir()
	tok, hashed := segment.NewToken(), segment.NewToken()
	file := filepath.Join(dir, "api-tokens")
	if err := os.WriteFile(file, []byte("# callers\n"+tok+"\nsha256:"+segment.HashToken([]byte(hashed))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startNode(t, binSnowflaked, nodeArgs(dir, 3, "--api-tokens-file", file))
	p.waitReadyz(http.StatusOK, readyTimeout)
	for _, tc := range []tokenCase{
		{"no token", "/id", "", 401, "token_required"},
		{"wrong token", "/ids?count=3", segment.NewToken(), 403, "token_invalid"},
		{"a token of the file", "/id", tok, 200, ""},
		{"a token whose hash is in the file", "/ids?count=3", hashed, 200, ""},
		{"a token of the file", "/uuid", tok, 200, ""},
		{"its hash is no token", "/id", segment.HashToken([]byte(hashed)), 403, "token_invalid"},
		{"decode needs none", "/decode/1", "", 200, ""},
	} {
		code, body := p.getWithToken(tc.path, tc.token)
		if code != tc.status || tc.code != "" && !strings.Contains(body, `"code":"`+tc.code+`"`) {
			t.Errorf("GET %s (%s): %d %s, want %d %s", tc.path, tc.what, code, body, tc.status, tc.code)
		}
	}
	if strings.Contains(p.Output(), tok) {
		t.Error("an API token shows in the node's log")
	}
	bad := filepath.Join(dir, "bad-tokens")
	if err := os.WriteFile(bad, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	q := start(t, binSnowflaked, nodeArgs(t.TempDir(), 4, "--api-tokens-file", bad))
	if code := q.exitCode(); code != 2 || !strings.Contains(q.Output(), "--api-tokens-file") {
		t.Errorf("a node with a bad --api-tokens-file: exit %d (%s), want 2 naming the flag", code, q.Output())
	}
}

// The token stale limit the node of
// TestIntegration_SegmentTokenRotatedWhileCutOff runs with (set from the
// environment, as a deployment sets it).
const cutOffStaleLimit = 4 * time.Second

// A token tag's token rotated with --grace 0 while a node is cut off from
// ZooKeeper (real processes, a real ZooKeeper, the node behind a proxy
// that cuts it off): the node, which cannot read the new hashes, honours
// the old token for at most its --token-stale-limit after its last read
// of them (which began before the cut), then answers 503
// tokens_unconfirmed to every token of the tag, never 200 again; once
// ZooKeeper answers, it serves the new token and refuses the old one by
// itself.
func TestIntegration_SegmentTokenRotatedWhileCutOff(t *testing.T) {
	const auth = "ops:s3cret"
	zk := zkharness.StartStandalone(t)
	px := zkproxy.Start(t, zk.ConnectString())
	p := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), px.Addr(), "cutoff", "node-0", "--zk-auth", auth),
		"SNOWFLAKED_TOKEN_STALE_LIMIT="+cutOffStaleLimit.String())
	p.waitReadyz(http.StatusOK, readyTimeout)
	zkArgs := []string{"--zk", zk.ConnectString(), "--cluster", "cutoff", "--zk-auth", auth}
	code, out, errOut := ctl(t, append([]string{"segment", "create", "secret", "--require-token", "--step", "10000"}, zkArgs...)...)
	if code != 0 {
		t.Fatalf("segment create --require-token: exit %d: %s %s", code, out, errOut)
	}
	old := lastLine(out)
	testsupport.Poll(t, readyTimeout, pollEvery, "the tag served with its token", func() bool {
		code, _ := p.getWithToken("/segment/secret", old)
		return code == http.StatusOK
	})

	px.Block()
	cutAt := time.Now()
	code, out, errOut = ctl(t, append([]string{"segment", "token", "rotate", "secret", "--grace", "0"}, zkArgs...)...)
	if code != 0 {
		t.Fatalf("segment token rotate --grace 0: exit %d: %s %s", code, out, errOut)
	}
	fresh := lastLine(out)
	if len(fresh) != 43 || fresh == old {
		t.Fatalf("segment token rotate printed %q last, want a new token", fresh)
	}

	// Every 200 comes within the limit of the cut (the last read of the
	// hashes began before it), plus a margin for the request path; a
	// refusal comes by then plus one read's wait for ZooKeeper (2 s).
	const margin = time.Second
	servedBy, refusedBy := cutAt.Add(cutOffStaleLimit+margin), cutAt.Add(cutOffStaleLimit+2*time.Second+margin)
	served := 0
	for {
		code, body := p.getWithToken("/segment/secret", old)
		at := time.Now()
		if code == http.StatusOK {
			if at.After(servedBy) {
				t.Fatalf("the old token served %v after the cut, past --token-stale-limit %v (+%v): the node honours hashes it cannot confirm", at.Sub(cutAt), cutOffStaleLimit, margin)
			}
			served++
		} else {
			if code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"tokens_unconfirmed"`) {
				t.Fatalf("the old token %v after the cut: %d %s, want 200 (the hashes held) then 503 tokens_unconfirmed", at.Sub(cutAt), code, body)
			}
			t.Logf("the old token served %d times, then refused %v after the cut (--token-stale-limit %v)", served, at.Sub(cutAt), cutOffStaleLimit)
			break
		}
		if at.After(refusedBy) {
			t.Fatalf("the old token still served %v after the cut, --token-stale-limit %v", at.Sub(cutAt), cutOffStaleLimit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if served == 0 {
		t.Error("the old token was refused at once: want the hashes held honoured up to the limit")
	}
	// Refused from then on, whatever the token, until ZooKeeper answers.
	for _, tok := range []string{old, fresh, old} {
		if code, body := p.getWithToken("/segment/secret", tok); code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"tokens_unconfirmed"`) {
			t.Fatalf("a token of the tag, cut off past the limit: %d %s, want 503 tokens_unconfirmed", code, body)
		}
	}
	if code, body := p.getWithToken("/api/segment/get/secret", old); code != http.StatusServiceUnavailable {
		t.Fatalf("the Leaf path, cut off past the limit: %d %s, want 503", code, body)
	}

	px.Unblock()
	testsupport.Poll(t, readyTimeout, pollEvery, "the new token served once ZooKeeper answers", func() bool {
		code, _ := p.getWithToken("/segment/secret", fresh)
		return code == http.StatusOK
	})
	if code, body := p.getWithToken("/segment/secret", old); code != http.StatusForbidden || !strings.Contains(body, `"code":"token_invalid"`) {
		t.Errorf("the old token once ZooKeeper answers: %d %s, want 403 token_invalid", code, body)
	}
}
