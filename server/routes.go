package server

import (
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// route is one path of a built-in endpoint. Every built-in endpoint answers
// GET and HEAD (HEAD like GET without the body) and 405 to other methods,
// always with Cache-Control: no-store.
type route struct {
	// path is the route's path, and the path 405 names.
	path string
	// sub: the route answers path + "/" + rest (rest may be empty), not
	// path itself, and serve gets rest.
	sub bool
	// ep is what the request is reported as.
	ep endpoint.Endpoint
	// serve answers a GET or HEAD; rest is nil unless sub.
	serve func(s *Server, ctx *fasthttp.RequestCtx, rest []byte)
}

// routes are the built-in endpoints' paths: what the server answers itself
// (Config.Routes may not shadow them), and how. Dispatch tries them in
// order, so the hot ones come first; no path matches two of them
// (TestRoutes).
var routes = [...]route{
	{path: wire.PathID, ep: endpoint.ID, serve: func(s *Server, ctx *fasthttp.RequestCtx, _ []byte) { s.serveID(ctx) }},
	{path: wire.PathIDs, ep: endpoint.IDs, serve: func(s *Server, ctx *fasthttp.RequestCtx, _ []byte) { s.serveIDs(ctx) }},
	{path: wire.PathLeaf, sub: true, ep: endpoint.Leaf, serve: (*Server).serveLeaf},
	{path: wire.PathLeaf, ep: endpoint.Leaf, serve: (*Server).serveLeaf},
	{path: wire.PathSegment, sub: true, ep: endpoint.Segment, serve: func(s *Server, ctx *fasthttp.RequestCtx, tag []byte) { s.serveSegment(ctx, tag, false) }},
	{path: wire.PathSegment, ep: endpoint.Segment, serve: (*Server).serveTagRequired},
	{path: wire.PathLeafSegment, sub: true, ep: endpoint.Segment, serve: func(s *Server, ctx *fasthttp.RequestCtx, tag []byte) { s.serveSegment(ctx, tag, true) }},
	{path: wire.PathLeafSegment, ep: endpoint.Segment, serve: (*Server).serveTagRequired},
	{path: wire.PathUUID, ep: endpoint.UUID, serve: func(s *Server, ctx *fasthttp.RequestCtx, _ []byte) { s.serveUUID(ctx) }},
	{path: wire.PathUUIDs, ep: endpoint.UUID, serve: func(s *Server, ctx *fasthttp.RequestCtx, _ []byte) { s.serveUUIDs(ctx) }},
	{path: wire.PathDecode, sub: true, ep: endpoint.Decode, serve: (*Server).serveDecode},
	{path: wire.PathDecode, ep: endpoint.Decode, serve: (*Server).serveDecode},
	{path: wire.PathBounds, ep: endpoint.Bounds, serve: func(s *Server, ctx *fasthttp.RequestCtx, _ []byte) { s.serveBounds(ctx) }},
	{path: wire.PathHealthz, ep: endpoint.Healthz, serve: func(_ *Server, ctx *fasthttp.RequestCtx, _ []byte) {
		writeBody(ctx, fasthttp.StatusOK, ctJSON, bodyHealthz)
	}},
	{path: wire.PathReadyz, ep: endpoint.Readyz, serve: func(s *Server, ctx *fasthttp.RequestCtx, _ []byte) { s.serveReadyz(ctx) }},
	{path: wire.PathReadyzSegment, ep: endpoint.Readyz, serve: func(s *Server, ctx *fasthttp.RequestCtx, _ []byte) { s.serveReadyzSegment(ctx) }},
	{path: wire.PathTime, ep: endpoint.Time, serve: func(s *Server, ctx *fasthttp.RequestCtx, _ []byte) { s.serveTime(ctx) }},
	{path: wire.PathClock, ep: endpoint.Clock, serve: func(s *Server, ctx *fasthttp.RequestCtx, _ []byte) { s.serveClock(ctx) }},
	{path: wire.PathClusterNodes, ep: endpoint.Nodes, serve: func(s *Server, ctx *fasthttp.RequestCtx, _ []byte) { s.serveClusterNodes(ctx) }},
}

// Route is one path of the route table: Path itself, or with Sub the
// paths below it (Path + "/" + a parameter, e.g. /decode/{id}).
type Route struct {
	Path string
	Sub  bool
}

// BuiltinRoutes returns the route table's paths, in the order they are
// matched (Config.Routes, a node's own handlers, are not in it): what the
// API documents and the OpenAPI document must name.
func BuiltinRoutes() []Route {
	out := make([]Route, len(routes))
	for i, r := range routes {
		out[i] = Route{Path: r.path, Sub: r.sub}
	}
	return out
}

// match returns the route of path, and for a sub route the rest of the path
// after the route's path and "/"; nil when no built-in endpoint answers
// path. It does not allocate.
func match(path []byte) (*route, []byte) {
	for i := range routes {
		r := &routes[i]
		n := len(r.path)
		switch {
		case !r.sub:
			if string(path) == r.path {
				return r, nil
			}
		case len(path) > n && path[n] == '/' && string(path[:n]) == r.path:
			return r, path[n+1:]
		}
	}
	return nil, nil
}

// isBuiltin reports whether the server answers path itself, so that
// Config.Routes may not shadow it.
func isBuiltin(path string) bool {
	r, _ := match([]byte(path))
	return r != nil
}

// handle routes a request. It is the fasthttp.RequestHandler of the server.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	ep := endpoint.Other
	defer s.finish(ctx, &ep)

	path := ctx.Path()
	if s.cfg.Authorize != nil && !authorized(ctx, s.cfg.Authorize) {
		if r, _ := match(path); r != nil {
			ep = r.ep
		}
		return
	}
	if r, rest := match(path); r != nil {
		ep = r.ep
		if s.allowed(ctx, r.path) && s.apiTokenOK(ctx, r.ep) {
			r.serve(s, ctx, rest)
		}
		return
	}
	if h := s.cfg.Routes[string(path)]; h != nil {
		h(ctx)
		return
	}
	s.writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "no endpoint at "+quote(path))
}
