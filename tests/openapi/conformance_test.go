package openapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	sfctl "codeberg.org/snowflaked/snowflaked/internal/ctl"
	testproc "codeberg.org/snowflaked/snowflaked/tests/proc"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// binSnowflaked is the production build TestMain makes.
var binSnowflaked string

// Timeouts: generous, for slow machines and race builds.
const (
	startTimeout = 30 * time.Second // process start to "snowflaked starting"
	readyTimeout = 30 * time.Second // to 200 on the readiness path
	pollEvery    = 10 * time.Millisecond
)

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "snowflaked-openapi-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binSnowflaked, err = testproc.Build(dir, "snowflaked", moduleName+"/cmd/snowflaked"); err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		return 1
	}
	// The status page is HTML: read it as text, as kin-openapi reads
	// text/plain.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	return m.Run()
}

// startNode starts the production snowflaked with args (plus loopback, a
// free port, a cache file and JSON logs), waits until readyPath answers
// 200 and returns its address.
func startNode(t *testing.T, readyPath string, args ...string) string {
	t.Helper()
	p, addr := startProc(t, "snowflaked starting", args...)
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := httpClient.Get("http://" + addr + readyPath)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not 200 after %s (last: %v); output:\n%s", readyPath, readyTimeout, err, p.Output())
		}
		time.Sleep(pollEvery)
	}
}

// startProc starts the production snowflaked with args (plus loopback, a
// free port, a cache file and JSON logs), waits for the log line msg,
// which names the address it listens on, and returns the process and the
// address.
func startProc(t *testing.T, msg string, args ...string) (*testproc.Proc, string) {
	t.Helper()
	args = append([]string{"--listen", "127.0.0.1:0", "--cache-file", filepath.Join(t.TempDir(), "cache.json"), "--log-format", "json"}, args...)
	p := testproc.Start(t, "snowflaked", binSnowflaked, args, testproc.Env())
	m, err := p.WaitLog(msg, startTimeout)
	if err != nil {
		t.Fatalf("%v; output:\n%s", err, p.Output())
	}
	addr, _ := m["listen"].(string)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("log line %q has listen %q: %v", msg, addr, m)
	}
	return p, addr
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// exchange is a request and the node's answer.
type exchange struct {
	req    *http.Request
	status int
	header http.Header
	body   []byte
}

// send sends method path to the node at addr.
func send(t *testing.T, addr, method, path string) exchange {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

// do sends req and reads the answer.
func do(t *testing.T, req *http.Request) exchange {
	t.Helper()
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.RequestURI(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL.RequestURI(), err)
	}
	return exchange{req: req, status: resp.StatusCode, header: resp.Header, body: body}
}

// errorCode returns the code of a JSON error body ("" for none).
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// call is one request of a conformance table and what the node must
// answer: the status and, for an error, its code. reqValid says whether
// the document's parameters accept the request (false: the document
// itself rules the request out, as the server does).
type call struct {
	method, path string
	status       int
	code         string
	reqValid     bool
}

// validateResponse checks an answer against the operation route
// documents: its status must be one the operation lists, with the content
// type, headers and body schema listed for it.
func validateResponse(route *routers.Route, params map[string]string, x exchange) error {
	in := &openapi3filter.RequestValidationInput{Request: x.req, PathParams: params, Route: route}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 x.status,
		Header:                 x.header,
		Body:                   io.NopCloser(bytes.NewReader(x.body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
}

// checkCalls sends each call to the node at addr and checks the answer
// against the document (found with its router) and the call's status and
// code.
func checkCalls(t *testing.T, doc *openapi3.T, addr string, calls []call) {
	t.Helper()
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	for _, c := range calls {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			x := send(t, addr, c.method, c.path)
			if x.status != c.status || errorCode(x.body) != c.code {
				t.Errorf("answer %d %q, want %d %q: %s", x.status, errorCode(x.body), c.status, c.code, x.body)
			}
			if got := x.header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", got)
			}
			route, params, err := router.FindRoute(x.req)
			if err != nil {
				t.Fatalf("the document has no operation for it: %v", err)
			}
			err = openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
				Request: x.req, PathParams: params, Route: route,
				Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: authenticate},
			})
			if (err == nil) != c.reqValid {
				t.Errorf("the document's parameters accept it: %v, want %v (%v)", err == nil, c.reqValid, err)
			}
			if c.method == http.MethodHead {
				// kin-openapi skips HEAD: check the status is the GET's, documented.
				if route.Operation.Responses.Status(x.status) == nil {
					t.Errorf("status %d is not documented for HEAD %s", x.status, route.Path)
				}
				if len(x.body) != 0 {
					t.Errorf("HEAD answered a body: %q", x.body)
				}
				return
			}
			if err := validateResponse(route, params, x); err != nil {
				t.Errorf("answer %d %s %s does not conform: %v", x.status, x.header.Get("Content-Type"), x.body, err)
			}
		})
	}
}

// authenticate is the requests' openapi3filter.AuthenticationFunc: a
// bearer scheme is met by an Authorization: Bearer header, an apiKey
// scheme in the query by its parameter. The document's empty alternative
// ({}) needs none, so a request without a token is valid where it lists
// one.
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s, r := in.SecurityScheme, in.RequestValidationInput.Request
	switch {
	case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"):
		if h := r.Header.Get("Authorization"); len(h) > len("Bearer ") && strings.EqualFold(h[:len("Bearer ")], "Bearer ") {
			return nil
		}
		return errors.New("no Authorization: Bearer")
	case s.Type == "apiKey" && s.In == "query":
		if r.URL.Query().Has(s.Name) {
			return nil
		}
		return fmt.Errorf("no ?%s=", s.Name)
	}
	return fmt.Errorf("security scheme %s %s: not one these tests know", s.Type, s.Scheme)
}

// checkComponent checks an answer that no operation gives (a method
// other than GET and HEAD, a path no endpoint answers, a request that
// cannot be read) against the document's component response name.
func checkComponent(t *testing.T, doc *openapi3.T, name string, x exchange) {
	t.Helper()
	ref := doc.Components.Responses[name]
	if ref == nil {
		t.Fatalf("%s has no component response %s", docPath, name)
	}
	op := &openapi3.Operation{Responses: openapi3.NewResponses(openapi3.WithStatus(x.status, ref))}
	route := &routers.Route{Spec: doc, Path: x.req.URL.Path, Method: http.MethodGet, Operation: op}
	get := x
	get.req = x.req.Clone(context.Background())
	get.req.Method = http.MethodGet // kin-openapi validates no other method's answer
	if err := validateResponse(route, nil, get); err != nil {
		t.Errorf("%s %s: answer %d %s %s does not conform to %s: %v", x.req.Method, x.req.URL.Path, x.status, x.header.Get("Content-Type"), x.body, name, err)
	}
}

// firstLine returns the body of GET path up to its first newline.
func firstLine(t *testing.T, addr, path string) string {
	t.Helper()
	x := send(t, addr, http.MethodGet, path)
	if x.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, x.status, x.body)
	}
	line, _, _ := strings.Cut(string(x.body), "\n")
	return line
}

// A standalone node (gene bits 4, default --max-batch 10000) answers
// ordinary and bad requests on every path as the document says; methods
// other than GET and HEAD, unknown paths (the chaos build's endpoints
// among them) and a request that is no HTTP get the document's component
// answers.
func TestIntegration_OpenAPIStandaloneConforms(t *testing.T) {
	doc := loadDoc(t)
	addr := startNode(t, "/readyz", "--worker-id", "5", "--gene-bits", "4")
	id := firstLine(t, addr, "/id")
	uuid := firstLine(t, addr, "/uuid")
	const v4 = "0d0f5b8e-8c4b-4d3a-9f1e-2b7c6a5d4e3f" // a version 4 UUID: no UUID of the cluster
	checkCalls(t, doc, addr, []call{
		{"GET", "/id", 200, "", true},
		{"GET", "/id?format=json", 200, "", true},
		{"GET", "/id?format=text&gene=7", 200, "", true},
		{"GET", "/id?format=xml", 400, "invalid_format", false},
		{"GET", "/id?gene=-1", 400, "invalid_gene", false},
		{"GET", "/id?gene=abc", 400, "invalid_gene", false},
		{"GET", "/id?cout=5", 400, "invalid_parameter", true},
		{"GET", "/id?format=json&format=json", 400, "invalid_parameter", true},
		{"HEAD", "/id", 200, "", true},
		{"GET", "/ids?count=3", 200, "", true},
		{"GET", "/ids?count=3&format=json&gene=3", 200, "", true},
		{"GET", "/ids", 400, "invalid_count", false},
		{"GET", "/ids?count=0", 400, "invalid_count", false},
		{"GET", "/ids?count=abc", 400, "invalid_count", false},
		{"GET", "/ids?count=10001", 400, "invalid_count", true}, // above --max-batch, within MaxBatchLimit
		{"GET", "/ids?count=1000001", 400, "invalid_count", false},
		{"GET", "/ids?count=2&format=yaml", 400, "invalid_format", false},
		{"HEAD", "/ids?count=2", 200, "", true},
		{"GET", "/uuid", 200, "", true},
		{"GET", "/uuid?format=json", 200, "", true},
		{"GET", "/uuid?count=2", 400, "invalid_parameter", true},
		{"GET", "/uuids?count=3", 200, "", true},
		{"GET", "/uuids?count=3&format=json", 200, "", true},
		{"GET", "/uuids?count=0", 400, "invalid_count", false},
		{"GET", "/decode/" + id, 200, "", true},
		{"GET", "/decode/" + uuid, 200, "", true},
		{"GET", "/decode/" + strings.ToUpper(uuid), 200, "", true},
		{"GET", "/decode/abc", 400, "invalid_id", true}, // letters: the form of an encoded ID (format=base62), so the pattern allows it
		{"GET", "/decode/-5", 400, "invalid_id", false},
		{"GET", "/decode/99999999999999999999", 400, "invalid_id", true},
		{"GET", "/decode/" + v4, 400, "invalid_uuid", true},
		{"GET", "/decode/zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", 400, "invalid_uuid", false},
		{"GET", "/decode", 400, "invalid_id", true},
		{"GET", "/id?format=base62", 200, "", true},
		{"GET", "/id?format=base64", 400, "invalid_format", false},
		{"GET", "/ids?count=3&format=base32", 200, "", true},
		{"GET", "/uuid?format=base58", 200, "", true},
		{"GET", "/uuids?count=2&format=base36", 200, "", true},
		{"GET", "/decode/0VlSo2yOQ3K?format=base62", 200, "", true},
		{"GET", "/decode/" + id + "?format=json", 200, "", true},
		{"GET", "/decode/0VlSo2yOQ3_?format=base62", 400, "invalid_id", false},
		{"GET", "/decode/0VlSo2yOQ3K?format=base64", 400, "invalid_format", false},
		{"GET", "/bounds?from=2026-12-01T00:00:00Z&to=2026-12-02T00:00:00Z", 200, "", true},
		{"GET", "/bounds?from=1796083200000&to=1796083200001", 200, "", true},
		{"HEAD", "/bounds?from=1796083200000&to=1796083200001", 200, "", true},
		{"GET", "/bounds?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", 400, "invalid_range", true},
		{"GET", "/bounds?from=2026-12-02T00:00:00Z", 400, "invalid_range", false},
		{"GET", "/bounds?from=1&to=2&x=3", 400, "invalid_parameter", true},
		{"GET", "/api/snowflake/get/order?format=base62", 200, "", true},
		{"GET", "/api/snowflake/get/order", 200, "", true},
		{"GET", "/api/snowflake/get/order?anything=1", 200, "", true},
		{"GET", "/api/snowflake/get", 400, "invalid_key", true},
		{"GET", "/segment/orders", 404, "segments_off", true},
		{"GET", "/segment", 400, "invalid_tag", true},
		{"GET", "/api/segment/get/orders", 404, "segments_off", true},
		{"GET", "/api/segment/get", 400, "invalid_tag", true},
		{"GET", "/readyz/segment", 404, "segments_off", true},
		{"GET", "/healthz", 200, "", true},
		{"HEAD", "/healthz", 200, "", true},
		{"GET", "/readyz", 200, "", true},
		{"GET", "/time", 200, "", true},
		{"GET", "/cluster/nodes", 200, "", true},
		{"HEAD", "/cluster/nodes", 200, "", true},
		{"GET", "/clock", 200, "", true},
		{"GET", "/metrics", 200, "", true},
		{"GET", "/status", 200, "", true},
		{"GET", "/status?refresh=5", 200, "", true},
		{"GET", "/status?refresh=3601", 400, "invalid_refresh", false},
		{"GET", "/status?refresh=x", 400, "invalid_refresh", false},
		{"GET", "/status?other=1", 400, "invalid_refresh", true},
		{"GET", "/status?limit=5", 200, "", true},
		{"GET", "/status?limit=0", 400, "invalid_parameter", false},
		{"GET", "/status?limit=5&limit=6", 400, "invalid_parameter", true},
	})

	tests := []struct {
		method, path, component string
		status                  int
	}{
		{"POST", "/id", "MethodNotAllowed", 405},
		{"DELETE", "/ids?count=1", "MethodNotAllowed", 405},
		{"PUT", "/decode/1", "MethodNotAllowed", 405},
		{"POST", "/metrics", "MethodNotAllowed", 405},
		{"POST", "/status", "MethodNotAllowed", 405},
		{"GET", "/nothing", "NotFound", 404},
		{"GET", "/idx", "NotFound", 404},
		{"POST", "/debug/chaos/clock?offset=-5s", "NotFound", 404},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			x := send(t, addr, tt.method, tt.path)
			if x.status != tt.status {
				t.Errorf("status %d, want %d: %s", x.status, tt.status, x.body)
			}
			checkComponent(t, doc, tt.component, x)
		})
	}
	t.Run("unreadable request", func(t *testing.T) {
		checkComponent(t, doc, "ParseError", garbage(t, addr))
	})
}

// garbage sends a request line that is no HTTP and reads the answer.
func garbage(t *testing.T, addr string) exchange {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GARBAGE\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || errorCode(body) != "bad_request" {
		t.Errorf("GARBAGE: %d %s, want 400 bad_request", resp.StatusCode, body)
	}
	return exchange{req: req, status: resp.StatusCode, header: resp.Header, body: body}
}

// A ZooKeeper-mode node with a segment tag answers the segment endpoints
// (and a gene on a cluster without gene bits) as the document says.
func TestIntegration_OpenAPISegmentsConform(t *testing.T) {
	doc := loadDoc(t)
	zk := zkharness.StartStandalone(t)
	const cluster = "openapi"
	addr := startNode(t, "/readyz",
		"--zk", zk.ConnectString(), "--cluster", cluster, "--node-key", "node-0", "--create-cluster",
		"--zk-session-timeout", "2s", "--report-interval", "500ms", "--fence-ahead", "1s")
	var out, errOut bytes.Buffer
	if code := sfctl.Segment([]string{"create", "orders", "--zk", zk.ConnectString(), "--cluster", cluster, "--start", "1", "--step", "100"}, &out, &errOut); code != 0 {
		t.Fatalf("segment create: exit %d: %s %s", code, out.String(), errOut.String())
	}
	if code := sfctl.Segment([]string{"create", "daily", "--reset", "daily", "--format", "ORD-{date:yyyy-MM-dd}-{seq:6}", "--zk", zk.ConnectString(), "--cluster", cluster}, &out, &errOut); code != 0 {
		t.Fatalf("segment create --reset: exit %d: %s %s", code, out.String(), errOut.String())
	}
	if code := sfctl.Segment([]string{"create", "secret", "--require-token", "--max-count", "5", "--zk", zk.ConnectString(), "--cluster", cluster}, &out, &errOut); code != 0 {
		t.Fatalf("segment create --require-token: exit %d: %s %s", code, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	token := lines[len(lines)-1]
	deadline := time.Now().Add(readyTimeout)
	for send(t, addr, http.MethodGet, "/readyz/segment").status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz/segment not 200 after %s", readyTimeout)
		}
		time.Sleep(pollEvery)
	}
	checkCalls(t, doc, addr, []call{
		{"GET", "/segment/orders", 200, "", true},
		{"GET", "/segment/orders?format=json", 200, "", true},
		{"GET", "/segment/orders?count=3", 200, "", true},
		{"GET", "/segment/orders?count=3&format=json", 200, "", true},
		{"HEAD", "/segment/orders", 200, "", true},
		{"GET", "/segment/orders?count=0", 400, "invalid_count", false},
		{"GET", "/segment/orders?count=10001", 400, "invalid_count", true},
		{"GET", "/segment/orders?format=csv", 400, "invalid_format", false},
		{"GET", "/segment/orders?gene=1", 400, "invalid_parameter", true},
		{"GET", "/segment/daily", 200, "", true},
		{"GET", "/segment/daily?format=json", 200, "", true},
		{"GET", "/segment/daily?count=3", 200, "", true},
		{"GET", "/segment/daily?count=3&format=json", 200, "", true},
		{"GET", "/api/segment/get/daily", 200, "", true},
		{"GET", "/segment/daily?format=base62", 400, "invalid_format", true},
		{"GET", "/segment/nosuch", 404, "unknown_tag", true},
		{"GET", "/segment/" + strings.Repeat("x", 129), 400, "invalid_tag", false},
		{"GET", "/segment/a%25b", 400, "invalid_tag", false},
		{"GET", "/api/segment/get/orders", 200, "", true},
		{"GET", "/api/segment/get/orders?count=5", 200, "", true}, // Leaf's endpoint ignores the query
		{"GET", "/api/segment/get/nosuch", 404, "unknown_tag", true},
		{"GET", "/segment/secret", 401, "token_required", true},
		{"GET", "/api/segment/get/secret", 401, "token_required", true},
		{"GET", "/api/segment/get/secret?token=wrong", 403, "token_invalid", true},
		{"GET", "/api/segment/get/secret?token=" + token, 200, "", true},
		{"GET", "/segment/secret?token=" + token, 400, "invalid_parameter", true}, // ?token= on the Leaf path only
		{"GET", "/readyz/segment", 200, "", true},
		{"GET", "/id?gene=1", 400, "gene_off", true},
		{"GET", "/ids?count=2&gene=1", 400, "gene_off", true},
		{"GET", "/clock", 200, "", true},
		{"GET", "/status", 200, "", true},
	})
	// The segment answers are the tag's dense IDs, from 1 up.
	if got, err := strconv.ParseInt(firstLine(t, addr, "/segment/orders"), 10, 64); err != nil || got < 1 {
		t.Errorf("/segment/orders: %d, %v", got, err)
	}
}

// msgListening is the log line of a node that listens before it has a
// worker ID.
const msgListening = "listening: /healthz answers while the node starts, /readyz says what it waits for"

// A node that waits for ZooKeeper (nothing listens at 127.0.0.1:1) answers
// while it starts as the document says: /healthz 200, the readiness paths
// 503, every other path 503 out_of_service with state starting.
func TestIntegration_OpenAPIStartingConforms(t *testing.T) {
	doc := loadDoc(t)
	_, addr := startProc(t, msgListening, "--zk", "127.0.0.1:1", "--cluster", "openapi", "--node-key", "node-s")
	checkCalls(t, doc, addr, []call{
		{"GET", "/healthz", 200, "", true},
		{"GET", "/readyz", 503, "", true},
		{"GET", "/readyz/segment", 503, "", true},
		{"GET", "/id", 503, "out_of_service", true},
		{"GET", "/ids?count=2", 503, "out_of_service", true},
		{"GET", "/uuid", 503, "out_of_service", true},
		{"GET", "/uuids?count=2", 503, "out_of_service", true},
		{"GET", "/decode/1", 503, "out_of_service", true},
		{"GET", "/decode", 503, "out_of_service", true},
		{"GET", "/api/snowflake/get/k", 503, "out_of_service", true},
		{"GET", "/api/snowflake/get", 503, "out_of_service", true},
		{"GET", "/segment/orders", 503, "out_of_service", true},
		{"GET", "/segment", 503, "out_of_service", true},
		{"GET", "/api/segment/get/orders", 503, "out_of_service", true},
		{"GET", "/api/segment/get", 503, "out_of_service", true},
		{"GET", "/time", 503, "out_of_service", true},
		{"GET", "/cluster/nodes", 503, "out_of_service", true},
		{"GET", "/clock", 503, "out_of_service", true},
		{"GET", "/metrics", 503, "out_of_service", true},
		{"GET", "/status", 503, "out_of_service", true},
	})
	tests := []struct {
		method, path, component string
		status                  int
	}{
		{"POST", "/id", "MethodNotAllowed", 405},
		{"GET", "/nothing", "Starting", 503},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			x := send(t, addr, tt.method, tt.path)
			if x.status != tt.status {
				t.Errorf("status %d, want %d: %s", x.status, tt.status, x.body)
			}
			checkComponent(t, doc, tt.component, x)
		})
	}
}

// A node whose layout leaves fewer than 32 random bits in a UUIDv7
// (20/21/22: 43 worker and sequence bits) answers the UUID endpoints 400
// uuid_off, as the document says.
func TestIntegration_OpenAPIUUIDOffConforms(t *testing.T) {
	doc := loadDoc(t)
	addr := startNode(t, "/readyz", "--worker-id", "1", "--layout", "20/21/22", "--time-unit", "1h")
	checkCalls(t, doc, addr, []call{
		{"GET", "/uuid", 400, "uuid_off", true},
		{"GET", "/uuids?count=2", 400, "uuid_off", true},
		{"GET", "/uuids?count=0", 400, "invalid_count", false},
		{"GET", "/decode/01a21c41-fd8c-7014-80a2-f7238c55e050", 400, "uuid_off", true},
		{"GET", "/id", 200, "", true},
		{"GET", "/decode/" + firstLine(t, addr, "/id"), 200, "", true},
	})
}
