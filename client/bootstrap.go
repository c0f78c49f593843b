package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// Defaults and bounds of BootstrapConfig.
const (
	DefaultBootstrapInterval = 10 * time.Second
	MinBootstrapInterval     = 10 * time.Millisecond
	MaxBootstrapInterval     = time.Hour
	DefaultBootstrapTimeout  = 2 * time.Second
)

// bootstrapMaxAsk bounds the nodes one poll asks, and bootstrapMaxBody an
// answer's size.
const (
	bootstrapMaxAsk  = 16
	bootstrapMaxBody = 1 << 20
)

// BootstrapConfig configures a Bootstrap.
type BootstrapConfig struct {
	// Seeds are nodes to ask first, "host:port" each (required): any one
	// that answers gives the whole cluster.
	Seeds []string
	// Interval is the pause between polls (default 10s, 10ms..1h), made
	// 20% shorter or longer at random so that clients started together do
	// not poll together.
	Interval time.Duration
	// Timeout bounds one request (default 2s).
	Timeout time.Duration
	// Log receives a line per change of the list (Info) and per poll that
	// no node answered (Warn); nil discards everything.
	Log *slog.Logger
	// TLS, for nodes that serve HTTPS (--tls-cert), makes the requests
	// HTTPS with it (RootCAs, and Certificates under mutual TLS), as
	// Config.TLS does the client's; nil asks over plain HTTP.
	TLS *tls.Config
}

// Bootstrap is a Discovery that asks the nodes themselves: GET
// /cluster/nodes (wire.PathClusterNodes) on a seed gives the cluster's nodes
// in service, and a poll every Interval keeps the list current, asking the
// nodes it knows, then the seeds, until one answers. When none answers, the
// last list stays in force. Close it after the client that uses it.
type Bootstrap struct {
	cfg    BootstrapConfig
	http   *http.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	nodes   []string
	changed chan struct{}
	polls   int // rotates the first node asked; starts at random

	closeOnce sync.Once
}

// NewBootstrap asks the seeds, in order, for the cluster's nodes, and
// starts polling. ctx bounds the first answer. A bad config is an error
// wrapping ErrInvalidConfig; no seed answering is a *NoNodeError naming
// each seed's failure (errors.Is(err, ErrNoNode)).
func NewBootstrap(ctx context.Context, cfg BootstrapConfig) (*Bootstrap, error) {
	bad := func(format string, a ...any) (*Bootstrap, error) {
		return nil, fmt.Errorf("new bootstrap: %w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	if len(cfg.Seeds) == 0 {
		return bad("give Seeds")
	}
	for _, s := range cfg.Seeds {
		if wire.CheckHostPort(s) != nil {
			return bad("seed %q is not host:port", s)
		}
	}
	switch {
	case cfg.Interval == 0:
		cfg.Interval = DefaultBootstrapInterval
	case cfg.Interval < MinBootstrapInterval || cfg.Interval > MaxBootstrapInterval:
		return bad("Interval %v: want %v..%v", cfg.Interval, MinBootstrapInterval, MaxBootstrapInterval)
	}
	switch {
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultBootstrapTimeout
	case cfg.Timeout < 0:
		return bad("Timeout %v is negative", cfg.Timeout)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Seeds = slices.Clone(cfg.Seeds)
	b := &Bootstrap{
		cfg: cfg, done: make(chan struct{}), changed: make(chan struct{}),
		// The first node asked, at random: clients started together do
		// not all ask the same node first.
		polls: rand.IntN(1 << 30),
		// The proxies of the environment, as the client takes them.
		http: &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: 1, IdleConnTimeout: 2 * cfg.Interval, TLSClientConfig: cfg.TLS}},
	}
	nodes, err := b.ask(ctx, cfg.Seeds)
	if err != nil {
		b.http.CloseIdleConnections()
		return nil, fmt.Errorf("new bootstrap: %w", err)
	}
	b.nodes = nodes
	rctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go b.poll(rctx)
	return b, nil
}

var _ Discovery = (*Bootstrap)(nil)

// Nodes returns the latest list and a channel closed at the next change
// (see Discovery).
func (b *Bootstrap) Nodes() ([]string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.nodes), b.changed
}

// Close stops polling. The last list stays what Nodes returns. It always
// returns nil.
func (b *Bootstrap) Close() error {
	b.closeOnce.Do(func() {
		b.cancel()
		<-b.done
		b.http.CloseIdleConnections()
	})
	return nil
}

// poll refreshes the list every Interval, jittered, until ctx ends.
func (b *Bootstrap) poll(ctx context.Context) {
	defer close(b.done)
	t := time.NewTimer(b.jittered())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		nodes, err := b.ask(ctx, b.candidates())
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			b.cfg.Log.Warn("snowflaked client: no node answered the cluster's node list; keeping the last list", "error", err)
		default:
			b.set(nodes)
		}
		t.Reset(b.jittered())
	}
}

// jittered is Interval made up to 20% shorter or longer at random.
func (b *Bootstrap) jittered() time.Duration {
	spread := int64(b.cfg.Interval) / 5
	return b.cfg.Interval + time.Duration(rand.Int64N(2*spread+1)-spread)
}

// candidates are the nodes a poll asks, in order: the nodes known (from a
// different one each poll, the first at random), then the seeds that are not among them; at
// most bootstrapMaxAsk.
func (b *Bootstrap) candidates() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.nodes)+len(b.cfg.Seeds))
	if n := len(b.nodes); n > 0 {
		k := b.polls % n
		out = append(append(out, b.nodes[k:]...), b.nodes[:k]...)
	}
	b.polls++
	for _, s := range b.cfg.Seeds {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out[:min(len(out), bootstrapMaxAsk)]
}

// set records a new list, waking whoever waits for a change.
func (b *Bootstrap) set(nodes []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if slices.Equal(nodes, b.nodes) {
		return
	}
	b.cfg.Log.Info("snowflaked client: the cluster's nodes changed", "nodes", nodes, "before", b.nodes)
	b.nodes = nodes
	close(b.changed)
	b.changed = make(chan struct{})
}

// ask asks addrs in turn for the node list until one answers; with none,
// a *NoNodeError naming each one's failure (or ctx's error when it
// ended).
func (b *Bootstrap) ask(ctx context.Context, addrs []string) ([]string, error) {
	var causes []error
	for _, addr := range addrs {
		nodes, err := b.fetch(ctx, addr)
		if err == nil {
			return nodes, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ask %s for the cluster's nodes: %w", addr, ctx.Err())
		}
		causes = append(causes, err)
	}
	return nil, &NoNodeError{What: "the cluster's node list", Causes: causes}
}

// fetch asks one node for the node list: GET /cluster/nodes, a 200 with a
// ClusterNodesBody of at least one node, every address host:port.
func (b *Bootstrap) fetch(ctx context.Context, addr string) ([]string, error) {
	scheme := "http://"
	if b.cfg.TLS != nil {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+addr+wire.PathClusterNodes, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, bootstrapMaxBody+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: reading the node list: %w", addr, err)
	case len(body) > bootstrapMaxBody:
		return nil, fmt.Errorf("%s: a node list over %d bytes", addr, bootstrapMaxBody)
	case resp.StatusCode != http.StatusOK:
		_, text := errorText(body)
		return nil, fmt.Errorf("%s: %s %d %s", addr, wire.PathClusterNodes, resp.StatusCode, text)
	}
	var nb wire.ClusterNodesBody
	if err := json.Unmarshal(body, &nb); err != nil {
		return nil, fmt.Errorf("%s: the node list is not JSON: %w", addr, err)
	}
	if len(nb.Nodes) == 0 {
		return nil, fmt.Errorf("%s: %w", addr, errNoMembers)
	}
	out := make([]string, 0, len(nb.Nodes))
	for _, n := range nb.Nodes {
		if wire.CheckHostPort(n.Addr) != nil {
			return nil, fmt.Errorf("%s: node list entry %q is not host:port", addr, n.Addr)
		}
		if !slices.Contains(out, n.Addr) {
			out = append(out, n.Addr)
		}
	}
	return out, nil
}

// errNoMembers: a node answered an empty list (none in service): not a list
// to call, so the next node is asked and the last list stays.
var errNoMembers = errors.New("answered no node in service")
