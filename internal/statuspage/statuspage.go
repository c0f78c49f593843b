// Package statuspage serves GET /status: a small self-contained HTML page
// for humans (inline CSS, no scripts, no external assets, works offline)
// showing this node's state, reason, worker ID and fence, and a table of
// every node of the cluster with its clock offsets, last report age and
// whether it is in service. Offsets beyond the thresholds are marked.
//
// The cluster's worker list comes from a Source (ZooKeeper, via the node);
// the page itself asks each running peer for GET /clock over HTTP (its
// state, NTP and ZooKeeper figures), concurrently, each request bounded by
// a short timeout. The peers' clock offsets are not measured here: they are
// the clock guard's last peer round (the Source's snapshot, Peers). Every value is
// escaped by html/template, so node keys and details from ZooKeeper or a
// peer cannot inject markup.
package statuspage

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
)

// Defaults of Config.
const (
	defaultFetchTimeout  = 500 * time.Millisecond
	defaultConcurrency   = 16
	defaultMaxFetch      = 64
	defaultNTPMaxOffset  = clockguard.DefaultNTPMaxOffset
	defaultPeerMaxOffset = clockguard.DefaultPeerMaxOffset
	defaultMaxReportAge  = 10 * time.Second
	defaultGoneAfter     = 10 * time.Minute
	// maxRefresh bounds ?refresh=N (seconds).
	maxRefresh = 3600
	// maxClockBody bounds a peer's /clock answer.
	maxClockBody = 1 << 20
)

// errBadConfig is wrapped by every error New returns for an invalid Config.
var errBadConfig = errors.New("statuspage: invalid configuration")

// Source feeds the page; the node implements it (see SourceFuncs).
type Source interface {
	// Self is a snapshot of this node; it must be quick and must not
	// block. The page shows its identity, state, fence, NTP offset,
	// ZooKeeper status (nil in standalone mode) and segment tags (nil: no
	// segment section); Mode nodestate.ModeStandalone leaves the cluster
	// table out.
	Self() nodestate.Snapshot
	// Workers lists the cluster's workers as ZooKeeper knows them (e.g.
	// coordinator.Admin.ListWorkers), this node included; ctx bounds the call.
	// In standalone mode it returns nil, nil.
	Workers(ctx context.Context) ([]coordinator.WorkerInfo, error)
}

// WorkerPager is a Source that lists one bounded page of the cluster's
// workers (coordinator.Coordinator.ListWorkerPage: the node's own session,
// a number of reads bounded by the page, not by the cluster). The page
// uses it, when the Source has it, instead of Workers.
type WorkerPager interface {
	// WorkerPage lists at most limit workers, this node's first picked,
	// with the cluster's total; ctx bounds the call.
	WorkerPage(ctx context.Context, limit int) (coordinator.WorkerPage, error)
}

// SourceFuncs adapts functions to Source (and WorkerPager).
type SourceFuncs struct {
	// SelfFunc takes a snapshot of this node (required).
	SelfFunc func() nodestate.Snapshot
	// WorkersFunc may be nil (standalone mode: no cluster table beyond
	// this node).
	WorkersFunc func(ctx context.Context) ([]coordinator.WorkerInfo, error)
	// WorkerPageFunc, when set, lists one page of the workers (see
	// WorkerPager); nil pages WorkersFunc's whole list.
	WorkerPageFunc func(ctx context.Context, limit int) (coordinator.WorkerPage, error)
}

// WorkerPage calls WorkerPageFunc; without one it keeps the first limit
// rows of Workers, with their count as the total.
func (s SourceFuncs) WorkerPage(ctx context.Context, limit int) (coordinator.WorkerPage, error) {
	if s.WorkerPageFunc != nil {
		return s.WorkerPageFunc(ctx, limit)
	}
	rows, err := s.Workers(ctx)
	return coordinator.WorkerPage{Workers: rows[:min(len(rows), limit)], Total: len(rows), Limit: limit}, err
}

// Self calls SelfFunc.
func (s SourceFuncs) Self() nodestate.Snapshot { return s.SelfFunc() }

// Workers calls WorkersFunc, or returns nil, nil without one.
func (s SourceFuncs) Workers(ctx context.Context) ([]coordinator.WorkerInfo, error) {
	if s.WorkersFunc == nil {
		return nil, nil
	}
	return s.WorkersFunc(ctx)
}

// Config configures New. Zero values take the defaults.
type Config struct {
	Source Source // required
	// Clock must be the node's clock (the chaos clock in a chaos build):
	// offsets to this node are measured on it.
	Clock clock.Clock // required
	// FetchTimeout bounds one GET /clock to one peer, connection included
	// (default 500ms).
	FetchTimeout time.Duration
	// ListTimeout bounds Source.Workers (default 3s).
	ListTimeout time.Duration
	// Concurrency bounds the /clock requests in flight for one page view
	// (default 16); MaxFetch bounds how many peers one view asks (default
	// 64; the others are listed without live figures). A view takes at most
	// about ListTimeout + ceil(MaxFetch/Concurrency) × FetchTimeout.
	Concurrency int
	MaxFetch    int
	// NTPMaxOffset and PeerMaxOffset are the node's --ntp-max-offset and
	// --peer-max-offset: offsets beyond them are marked (defaults 500ms, 1s).
	NTPMaxOffset  time.Duration
	PeerMaxOffset time.Duration
	// MaxReportAge marks a running node whose last report to ZooKeeper is
	// older than this (default 10s: about three report intervals).
	MaxReportAge time.Duration
	// GoneAfter: a worker that holds no lease, did not stop cleanly (its
	// last write was not the final fence) and has not reported for this
	// long is shown as gone, greyed, and not asked for /clock; until then
	// it is asked and, silent, shown as unreachable and flagged (default
	// 10m).
	GoneAfter time.Duration
	// Refresh, when positive, makes browsers reload the page that often;
	// a view's ?refresh=N (seconds, 0 for none) overrides it.
	Refresh time.Duration
	// Client makes the /clock requests; by default a net/http client
	// with keep-alive connections (a few per peer), no proxy and no
	// redirects. Bodies are bounded by maxClockBody.
	Client *http.Client
	// TLS, when not nil, makes the /clock requests HTTPS with it (the
	// peers serve --tls-cert): the default client dials with it, and a
	// given Client must carry it too.
	TLS *tls.Config
	// Log receives a line when a page cannot be built.
	Log zerolog.Logger
}

// Page serves the status page. It is safe for concurrent use.
type Page struct {
	cfg    Config
	client *http.Client
}

// New checks cfg and returns the page.
func New(cfg Config) (*Page, error) {
	if cfg.Source == nil || cfg.Clock == nil {
		return nil, fmt.Errorf("%w: Source and Clock are required", errBadConfig)
	}
	if cfg.FetchTimeout < 0 || cfg.ListTimeout < 0 || cfg.Concurrency < 0 || cfg.MaxFetch < 0 ||
		cfg.NTPMaxOffset < 0 || cfg.PeerMaxOffset < 0 || cfg.MaxReportAge < 0 || cfg.GoneAfter < 0 || cfg.Refresh < 0 {
		return nil, fmt.Errorf("%w: negative value (fetch timeout %v, list timeout %v, concurrency %d, max fetch %d, ntp max offset %v, peer max offset %v, max report age %v, gone after %v, refresh %v)",
			errBadConfig, cfg.FetchTimeout, cfg.ListTimeout, cfg.Concurrency, cfg.MaxFetch, cfg.NTPMaxOffset, cfg.PeerMaxOffset, cfg.MaxReportAge, cfg.GoneAfter, cfg.Refresh)
	}
	cfg.FetchTimeout = cmp.Or(cfg.FetchTimeout, defaultFetchTimeout)
	cfg.ListTimeout = cmp.Or(cfg.ListTimeout, coordinator.DefaultWorkerPageTimeout)
	cfg.NTPMaxOffset = cmp.Or(cfg.NTPMaxOffset, defaultNTPMaxOffset)
	cfg.PeerMaxOffset = cmp.Or(cfg.PeerMaxOffset, defaultPeerMaxOffset)
	cfg.MaxReportAge = cmp.Or(cfg.MaxReportAge, defaultMaxReportAge)
	cfg.GoneAfter = cmp.Or(cfg.GoneAfter, defaultGoneAfter)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, defaultConcurrency)
	cfg.MaxFetch = cmp.Or(cfg.MaxFetch, defaultMaxFetch)
	client := cfg.Client
	if client == nil {
		client = newClient(cfg.TLS)
	}
	return &Page{cfg: cfg, client: client}, nil
}

// newClient returns a client for short requests to the peers: keep-alive
// connections (at most 4 per peer, idle ones closed after 30s), TLS with
// tlsCfg when set, no proxy from the environment, no redirects followed.
// Each request is bounded by its context (FetchTimeout).
func newClient(tlsCfg *tls.Config) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{}).DialContext,
			TLSClientConfig:     tlsCfg,
			MaxConnsPerHost:     4,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Security headers of the page: it has no scripts and loads nothing.
const contentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler returns the handler of GET /status (HEAD too; 405 with a JSON
// error otherwise). It does not look at the path: mount it at /status with
// server.Config.Routes.
func (p *Page) Handler() fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("Cache-Control", "no-store")
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"error":{"code":"method_not_allowed","message":"use GET or HEAD on /status"}}`)
			return
		}
		q, code, err := p.params(ctx.QueryArgs())
		if err != nil {
			ctx.SetStatusCode(fasthttp.StatusBadRequest)
			ctx.SetContentType("application/json")
			body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": err.Error()}})
			ctx.SetBody(body)
			return
		}
		var buf bytes.Buffer
		// Not ctx: a RequestCtx outside a server has no Done channel. The
		// view is bounded by ListTimeout and FetchTimeout.
		if err := p.render(context.Background(), &buf, q); err != nil {
			p.cfg.Log.Error().Err(err).Msg("status page")
			ctx.SetStatusCode(fasthttp.StatusInternalServerError)
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"error":{"code":"internal","message":"the status page could not be rendered"}}`)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType("text/html; charset=utf-8")
		ctx.Response.Header.Set("Content-Security-Policy", contentSecurityPolicy)
		ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
		ctx.SetBody(buf.Bytes())
	}
}

// Render builds the page (asking the source and the peers) and writes its
// HTML to w. ctx bounds the whole view on top of the configured timeouts.
func (p *Page) Render(ctx context.Context, w io.Writer) error {
	return p.render(ctx, w, query{refresh: p.cfg.Refresh, limit: coordinator.DefaultWorkerPageLimit})
}

// query is what a view's parameters ask for.
type query struct {
	refresh time.Duration // reload period (0: none)
	limit   int           // the cluster table's page size
}

func (p *Page) render(ctx context.Context, w io.Writer, q query) error {
	v := p.build(ctx, q.limit)
	v.Refresh = int(q.refresh / time.Second)
	if err := pageTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("render status page: %w", err)
	}
	return nil
}

// params reads a view's query: ?refresh=N and ?limit=N. A bad one gives
// the error code to answer with and why.
func (p *Page) params(args *fasthttp.Args) (query, string, error) {
	q := query{refresh: p.cfg.Refresh, limit: coordinator.DefaultWorkerPageLimit}
	var err error
	if q.refresh, err = refreshParam(args, q.refresh); err != nil {
		return query{}, wire.CodeInvalidRefresh, err
	}
	if q.limit, err = limitParam(args, q.limit); err != nil {
		return query{}, wire.CodeInvalidParameter, err
	}
	return q, "", nil
}

// refreshParam reads ?refresh=N: whole seconds 0..maxRefresh (0: no
// automatic reload); without it, def. It refuses any parameter but
// refresh and limit.
func refreshParam(args *fasthttp.Args, def time.Duration) (time.Duration, error) {
	if args.Len() == 0 {
		return def, nil
	}
	for k := range args.All() {
		if string(k) != "refresh" && string(k) != "limit" {
			return 0, fmt.Errorf("unknown parameter %q: /status takes only refresh and limit", k)
		}
	}
	if !args.Has("refresh") {
		return def, nil
	}
	v := string(args.Peek("refresh"))
	n, perr := strconv.Atoi(v)
	if perr != nil || n < 0 || n > maxRefresh || len(args.PeekMulti("refresh")) > 1 {
		return 0, fmt.Errorf("refresh %q: want one whole number of seconds, 0 (no reload) to %d", v, maxRefresh)
	}
	return time.Duration(n) * time.Second, nil
}

// limitParam reads ?limit=N: how many nodes the cluster table lists,
// 1..coordinator.MaxWorkerPageLimit; without it, def.
func limitParam(args *fasthttp.Args, def int) (int, error) {
	if !args.Has("limit") {
		return def, nil
	}
	v := string(args.Peek("limit"))
	n, perr := strconv.Atoi(v)
	if perr != nil || n < 1 || n > coordinator.MaxWorkerPageLimit || len(args.PeekMulti("limit")) > 1 {
		return 0, fmt.Errorf("limit %q: want one whole number of nodes, 1 to %d", v, coordinator.MaxWorkerPageLimit)
	}
	return n, nil
}
