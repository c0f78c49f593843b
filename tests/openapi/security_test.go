package openapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	sfctl "codeberg.org/snowflaked/snowflaked/internal/ctl"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// The document's security schemes (components.securitySchemes).
const (
	schemeAPI      = "apiToken"      // --api-tokens-file, Authorization: Bearer
	schemeTag      = "tagToken"      // a --require-token tag's token, Authorization: Bearer
	schemeTagQuery = "tagTokenQuery" // the same as ?token= (Leaf's segment path)
)

// opSecurity is what an operation's security requirements say: the
// schemes any of its alternatives names, and whether one alternative is
// empty ({}: no token needed where the node or tag requires none).
type opSecurity struct {
	schemes  map[string]bool
	optional bool
}

// securityOf returns what op's own security says; an operation without
// one (nil: the document's global security, which it has none of) is an
// error.
func securityOf(doc *openapi3.T, op *openapi3.Operation) (opSecurity, error) {
	if op.Security == nil {
		return opSecurity{}, fmt.Errorf("no security of its own (security: [] for a route no token guards)")
	}
	out := opSecurity{schemes: map[string]bool{}}
	for _, req := range *op.Security {
		if len(req) == 0 {
			out.optional = true
		}
		for name, scopes := range req {
			if doc.Components == nil || doc.Components.SecuritySchemes[name] == nil {
				return out, fmt.Errorf("security names %s, which components.securitySchemes does not have", name)
			}
			if len(scopes) != 0 {
				return out, fmt.Errorf("security %s has scopes %v: no scheme here has any", name, scopes)
			}
			if len(req) > 1 {
				return out, fmt.Errorf("security requires %d schemes at once: no route takes two tokens", len(req))
			}
			out.schemes[name] = true
		}
	}
	return out, nil
}

// TestOpenAPISecurityDeclarations checks the document's security against
// itself: every operation states its own, GET and HEAD alike, naming only
// declared schemes, each token optional ({}), since a node takes none
// unless --api-tokens-file or the tag asks for it; the token answers (401
// token_required) are listed where a token is and nowhere else; every
// operation lists 403 (client_not_allowed of mutual TLS's allow-lists);
// and the document declares servers.
func TestOpenAPISecurityDeclarations(t *testing.T) {
	doc := loadDoc(t)
	if len(doc.Security) != 0 {
		t.Errorf("global security %v: each operation says its own", doc.Security)
	}
	if len(doc.Servers) == 0 {
		t.Error("no servers")
	}
	for _, name := range []string{schemeAPI, schemeTag, schemeTagQuery} {
		if doc.Components.SecuritySchemes[name] == nil {
			t.Errorf("components.securitySchemes has no %s", name)
		}
	}
	used := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		get, err := securityOf(doc, item.Get)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			continue
		}
		head, err := securityOf(doc, item.Head)
		if err != nil {
			t.Errorf("HEAD %s: %v", path, err)
			continue
		}
		if !mapsEqual(get.schemes, head.schemes) || get.optional != head.optional {
			t.Errorf("%s: GET security %v, HEAD %v", path, get, head)
		}
		for name := range get.schemes {
			used[name] = true
		}
		takesToken := len(get.schemes) > 0
		if takesToken && !get.optional {
			t.Errorf("%s: security %v without the empty alternative {}: a node without tokens serves it", path, slices.Sorted(mapKeys(get.schemes)))
		}
		if get.schemes[schemeTagQuery] && !strings.HasPrefix(path, "/api/segment/get/") {
			t.Errorf("%s: %s, but ?token= is taken on Leaf's segment path only", path, schemeTagQuery)
		}
		if has := item.Get.Responses.Value("401") != nil; has != takesToken {
			t.Errorf("%s: lists 401 %v, takes a token %v", path, has, takesToken)
		}
		if item.Get.Responses.Value("403") == nil {
			t.Errorf("%s: no 403 (client_not_allowed answers it on every route)", path)
		}
	}
	for name := range doc.Components.SecuritySchemes {
		if !used[name] {
			t.Errorf("security scheme %s: no operation names it", name)
		}
	}
}

func mapsEqual(a, b map[string]bool) bool {
	return len(a) == len(b) && !slices.ContainsFunc(slices.Collect(mapKeys(a)), func(k string) bool { return !b[k] })
}

// securitySample is a request for each path of the document, its
// parameters filled; {tag} is filled by the test.
var securitySample = map[string]string{
	"/id":                      "/id",
	"/ids":                     "/ids?count=2",
	"/uuid":                    "/uuid",
	"/uuids":                   "/uuids?count=2",
	"/decode/{id}":             "/decode/1",
	"/decode":                  "/decode",
	"/bounds":                  "/bounds?from=1796083200000&to=1796083200001",
	"/api/snowflake/get/{key}": "/api/snowflake/get/k",
	"/api/snowflake/get":       "/api/snowflake/get",
	"/segment/{tag}":           "/segment/{tag}",
	"/segment":                 "/segment",
	"/api/segment/get/{tag}":   "/api/segment/get/{tag}",
	"/api/segment/get":         "/api/segment/get",
	"/healthz":                 "/healthz",
	"/readyz":                  "/readyz",
	"/readyz/segment":          "/readyz/segment",
	"/time":                    "/time",
	"/cluster/nodes":           "/cluster/nodes",
	"/clock":                   "/clock",
	"/metrics":                 "/metrics",
	"/status":                  "/status",
}

// A ZooKeeper-mode node run with --api-tokens-file, with an open tag and
// a --require-token tag, guards exactly the routes the document says: a
// route whose security names apiToken answers 401 token_required without
// a token, 403 token_invalid with a wrong one (a tag's token among them)
// and serves with one of the file's; a route whose security names
// tagToken does so for the token tag with its token (and ?token= where it
// names tagTokenQuery), refuses the API token, and serves the open tag
// without one; every other route serves a request without a token, and
// ignores one. Every answer conforms to the document.
func TestIntegration_OpenAPISecurityIsTheServer(t *testing.T) {
	doc := loadDoc(t)
	const apiToken = "openapi-api-token-0123456789"
	addr, tagToken := startSecurityNode(t, apiToken)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	p := securityProbe{addr: addr, router: router, apiToken: apiToken, tagToken: tagToken}

	for _, path := range slices.Sorted(mapKeys(doc.Paths.Map())) {
		sample, ok := securitySample[path]
		if !ok {
			t.Errorf("%s: no sample request in securitySample", path)
			continue
		}
		sec, err := securityOf(doc, doc.Paths.Value(path).Get)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		t.Run(path, func(t *testing.T) {
			if !strings.Contains(sample, "{tag}") {
				p.checkNodeRoute(t, sample, sec)
				return
			}
			p.checkTagRoute(t, sample, sec)
		})
	}
}

// startSecurityNode starts a ZooKeeper-mode node run with
// --api-tokens-file holding apiToken, creates an open tag "open" and a
// --require-token tag "secret" on it, waits for /readyz/segment, and
// returns the node's address and the secret tag's token.
func startSecurityNode(t *testing.T, apiToken string) (addr, tagToken string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "api-tokens")
	if err := os.WriteFile(file, []byte(apiToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	zk := zkharness.StartStandalone(t)
	const cluster = "openapi-security"
	addr = startNode(t, "/readyz",
		"--zk", zk.ConnectString(), "--cluster", cluster, "--node-key", "node-0", "--create-cluster",
		"--zk-session-timeout", "2s", "--report-interval", "500ms", "--fence-ahead", "1s",
		"--api-tokens-file", file)
	var out, errOut bytes.Buffer
	if code := sfctl.Segment([]string{"create", "open", "--zk", zk.ConnectString(), "--cluster", cluster}, &out, &errOut); code != 0 {
		t.Fatalf("segment create: exit %d: %s %s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := sfctl.Segment([]string{"create", "secret", "--require-token", "--zk", zk.ConnectString(), "--cluster", cluster}, &out, &errOut); code != 0 {
		t.Fatalf("segment create --require-token: exit %d: %s %s", code, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	tagToken = lines[len(lines)-1]
	deadline := time.Now().Add(readyTimeout)
	for sendAuth(t, addr, "/readyz/segment", "").status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz/segment not 200 after %s", readyTimeout)
		}
		time.Sleep(pollEvery)
	}
	return addr, tagToken
}

// securityProbe sends requests to a node started by startSecurityNode and
// checks its answers against the document's security.
type securityProbe struct {
	addr               string
	router             routers.Router
	apiToken, tagToken string
}

// bearer is an Authorization header's value for tok.
func bearer(tok string) string { return "Bearer " + tok }

// check sends GET path with Authorization auth ("" none) and checks the
// answer's status and code (code "" and status 0: served, any answer but
// 401 and 403) and that it conforms to the document.
func (p securityProbe) check(t *testing.T, path, auth string, status int, code string) {
	t.Helper()
	x := sendAuth(t, p.addr, path, auth)
	switch {
	case status == 0 && (x.status == http.StatusUnauthorized || x.status == http.StatusForbidden):
		t.Errorf("GET %s (Authorization %q): %d %s, want it served", path, auth, x.status, x.body)
	case status != 0 && (x.status != status || errorCode(x.body) != code):
		t.Errorf("GET %s (Authorization %q): %d %s, want %d %s", path, auth, x.status, x.body, status, code)
	}
	if x.status == http.StatusUnauthorized && !strings.HasPrefix(x.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("GET %s: 401 with WWW-Authenticate %q, want Bearer", path, x.header.Get("WWW-Authenticate"))
	}
	route, params, err := p.router.FindRoute(x.req)
	if err != nil {
		t.Fatalf("GET %s: the document has no operation for it: %v", path, err)
	}
	if err := openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: x.req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: authenticate},
	}); err != nil {
		t.Errorf("GET %s (Authorization %q): the document refuses the request: %v", path, auth, err)
	}
	if err := validateResponse(route, params, x); err != nil {
		t.Errorf("GET %s (Authorization %q): answer %d %s does not conform: %v", path, auth, x.status, x.body, err)
	}
}

// checkNodeRoute checks a route without a tag: guarded by the API token
// where its security names apiToken, else served with or without a token.
func (p securityProbe) checkNodeRoute(t *testing.T, sample string, sec opSecurity) {
	t.Helper()
	if sec.schemes[schemeTag] || sec.schemes[schemeTagQuery] {
		t.Errorf("security %v, but the path has no tag", slices.Sorted(mapKeys(sec.schemes)))
	}
	if sec.schemes[schemeAPI] {
		p.check(t, sample, "", 401, "token_required")
		p.check(t, sample, bearer("wrong-token-0123456789"), 403, "token_invalid")
		p.check(t, sample, bearer(p.tagToken), 403, "token_invalid")
		p.check(t, sample, bearer(p.apiToken), 0, "")
		return
	}
	p.check(t, sample, "", 0, "")
	p.check(t, sample, bearer(p.apiToken), 0, "")
	p.check(t, sample, bearer(p.tagToken), 0, "")
}

// checkTagRoute checks a route with a {tag}: the open tag is served
// without a token; where its security names tagToken, the secret tag
// wants its own token (also as ?token= where it names tagTokenQuery) and
// refuses the API token.
func (p securityProbe) checkTagRoute(t *testing.T, sample string, sec opSecurity) {
	t.Helper()
	open := strings.ReplaceAll(sample, "{tag}", "open")
	secret := strings.ReplaceAll(sample, "{tag}", "secret")
	if sec.schemes[schemeAPI] {
		t.Errorf("security names %s on a segment path", schemeAPI)
	}
	p.check(t, open, "", 0, "")
	if !sec.schemes[schemeTag] {
		p.check(t, secret, "", 0, "")
		return
	}
	p.check(t, secret, "", 401, "token_required")
	p.check(t, secret, bearer(p.apiToken), 403, "token_invalid")
	p.check(t, secret, bearer(p.tagToken), 0, "")
	withQuery := secret + "?token=" + p.tagToken
	if sec.schemes[schemeTagQuery] {
		p.check(t, withQuery, "", 0, "")
		p.check(t, secret+"?token=wrong", "", 403, "token_invalid")
		p.check(t, withQuery, bearer(p.tagToken), 400, "invalid_parameter") // not both ways
	} else {
		p.check(t, withQuery, bearer(p.tagToken), 400, "invalid_parameter") // ?token= is not a parameter here
	}
}

// sendAuth sends GET path to the node at addr with Authorization auth
// ("" for none).
func sendAuth(t *testing.T, addr, path, auth string) exchange {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return do(t, req)
}
