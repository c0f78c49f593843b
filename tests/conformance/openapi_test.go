package conformance

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// loadSpec loads docs/openapi.yaml, the contract every client follows.
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(testsupport.ModuleRoot(t), "docs", "openapi.yaml"))
	if err != nil {
		t.Fatalf("load docs/openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	return doc
}

// checkDescribed checks what a client says it does against the document:
// every route it can request is a GET operation of the document, and every
// error code it branches on is one the document gives for a route it
// requests.
func checkDescribed(t reporter, doc *openapi3.T, routes, codes []string) {
	t.Helper()
	if len(routes) == 0 || len(codes) == 0 {
		t.Fatalf("the client describes routes %v and codes %v: want both", routes, codes)
	}
	documented := map[string]bool{}
	for _, r := range routes {
		item := doc.Paths.Value(r)
		if item == nil || item.Get == nil {
			t.Errorf("the client requests GET %s, which docs/openapi.yaml does not have", r)
			continue
		}
		for code := range operationCodes(item.Get) {
			documented[code] = true
		}
	}
	for _, c := range codes {
		if !documented[c] {
			t.Errorf("the client maps error code %q, which docs/openapi.yaml gives for none of its routes %v", c, routes)
		}
	}
}

// operationCodes are the error codes an operation's answers can carry (the
// enums of every "code" property of its response schemas).
func operationCodes(op *openapi3.Operation) map[string]bool {
	out := map[string]bool{}
	seen := map[*openapi3.Schema]bool{}
	var walk func(s *openapi3.SchemaRef, isCode bool)
	walk = func(s *openapi3.SchemaRef, isCode bool) {
		// The shared ErrorCode schema lists every code of the API: what an
		// answer narrows it to (allOf) is what the operation answers.
		if s == nil || s.Value == nil || seen[s.Value] && !isCode || strings.HasSuffix(s.Ref, "/schemas/ErrorCode") {
			return
		}
		seen[s.Value] = true
		v := s.Value
		if isCode {
			for _, e := range v.Enum {
				if str, ok := e.(string); ok {
					out[str] = true
				}
			}
		}
		for _, sub := range slices.Concat(v.AllOf, v.OneOf, v.AnyOf) {
			walk(sub, isCode)
		}
		for name, p := range v.Properties {
			walk(p, name == "code")
		}
	}
	for _, resp := range op.Responses.Map() {
		if resp.Value == nil {
			continue
		}
		for _, mt := range resp.Value.Content {
			walk(mt.Schema, false)
		}
	}
	return out
}

// checkRecorded checks each request a client made through the proxies:
// an operation of the document, valid for it (path, query parameters,
// headers), on a route the client described.
func checkRecorded(t reporter, doc *openapi3.T, routes []string, reqs []recorded) {
	t.Helper()
	if len(reqs) == 0 {
		t.Fatalf("no request was recorded")
	}
	spec := *doc
	spec.Servers = nil // match any host: the proxies listen on free ports
	router, err := legacy.NewRouter(&spec)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	bad := 0
	for _, r := range reqs {
		req, err := http.NewRequest(r.method, "http://127.0.0.1"+r.path+"?"+r.rawQuery, nil)
		if err != nil {
			t.Fatalf("%v", err)
		}
		req.Header = r.header
		route, params, err := router.FindRoute(req)
		if err == nil && !slices.Contains(routes, route.Path) {
			t.Errorf("%s %s?%s: route %s is not one the client described (%v)", r.method, r.path, r.rawQuery, route.Path, routes)
		}
		if err == nil {
			err = undeclaredParams(route.PathItem, route.Operation, req)
		}
		if err == nil {
			err = openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
				Request: req, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}})
		}
		if err != nil {
			if bad++; bad <= 5 {
				t.Errorf("%s %s?%s does not follow docs/openapi.yaml: %v", r.method, r.path, r.rawQuery, err)
			}
		}
	}
	if l, ok := t.(interface{ Logf(string, ...any) }); ok {
		l.Logf("%d requests checked against docs/openapi.yaml, %d did not follow it", len(reqs), bad)
	}
}

// undeclaredParams reports a query parameter the operation does not declare
// (a node refuses it: 400 invalid_parameter), or one given twice.
func undeclaredParams(item *openapi3.PathItem, op *openapi3.Operation, req *http.Request) error {
	declared := map[string]bool{}
	for _, p := range slices.Concat(item.Parameters, op.Parameters) {
		if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
			declared[p.Value.Name] = true
		}
	}
	for name, vals := range req.URL.Query() {
		switch {
		case !declared[name]:
			return fmt.Errorf("query parameter %q is not declared for this operation", name)
		case len(vals) > 1:
			return fmt.Errorf("query parameter %q given %d times", name, len(vals))
		}
	}
	return nil
}
