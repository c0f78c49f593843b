package ctl

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/client/zkdiscovery"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// clientFlags are the flags get and bench share: where the cluster is.
type clientFlags struct {
	servers, bootstrap, zk, cluster, auth string
	token, tokenFile                      string // --token, --token-file: the API token
	timeout                               time.Duration
	zkTLS                                 zkTLSFlags
	zkTLSConfig                           *tls.Config // of zkTLS, loaded by config
	tls                                   tlsFlags
}

// register defines the flags; timeoutHelp says what --timeout bounds.
func (f *clientFlags) register(fs *flag.FlagSet, timeoutHelp string) {
	fs.StringVar(&f.servers, "servers", "", "nodes host:port,host:port (or --bootstrap, or --zk)")
	fs.StringVar(&f.bootstrap, "bootstrap", "", "seed nodes host:port,…: ask them for the cluster's nodes in service, GET /cluster/nodes (or --servers, or --zk)")
	fs.StringVar(&f.zk, "zk", "", "ZooKeeper host:2181,…: find the nodes in service under alive/ (or --servers, or --bootstrap)")
	fs.StringVar(&f.cluster, "cluster", "default", "cluster name, with --zk")
	fs.StringVar(&f.auth, "zk-auth", "", "user:password, with --zk")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, timeoutHelp)
	fs.StringVar(&f.token, "token", "", "API token sent as Authorization: Bearer with every request for IDs, for nodes run with --api-tokens-file (it shows in ps: prefer --token-file)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the API token (its one line), as --token")
	f.zkTLS = addZKTLSFlags(fs)
	f.tls.register(fs)
}

// config turns the parsed flags into a client config; positional
// arguments (fs takes none) are an error.
func (f *clientFlags) config(fs *flag.FlagSet) (client.Config, error) {
	given := 0
	for _, v := range []string{f.servers, f.bootstrap, f.zk} {
		if v != "" {
			given++
		}
	}
	switch {
	case fs.NArg() > 0:
		return client.Config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	case given > 1:
		return client.Config{}, errors.New("give --servers, --bootstrap or --zk, only one: --servers names the nodes, --bootstrap asks them for the cluster's nodes, --zk finds them in ZooKeeper")
	case given == 0:
		return client.Config{}, errors.New("give --servers host:port,…, --bootstrap host:port,… or --zk host:2181,…")
	case f.timeout <= 0:
		return client.Config{}, fmt.Errorf("--timeout %s must be positive", f.timeout)
	}
	zkTLS, err := f.zkTLS.config()
	switch {
	case err != nil:
		return client.Config{}, err
	case zkTLS != nil && f.zk == "":
		return client.Config{}, errors.New("--zk-tls-ca, --zk-tls-cert, --zk-tls-key: only with --zk (they secure the connection to ZooKeeper)")
	}
	f.zkTLSConfig = zkTLS
	tlsCfg, err := f.tls.config()
	if err != nil {
		return client.Config{}, err
	}
	token, err := f.apiToken()
	if err != nil {
		return client.Config{}, err
	}
	if f.servers != "" {
		return client.Config{Servers: splitComma(f.servers), TLS: tlsCfg, APIToken: token}, nil
	}
	return client.Config{TLS: tlsCfg, APIToken: token}, nil // the discovery is newClient's
}

// maxTokenFile bounds what --token-file reads.
const maxTokenFile = 4096

// apiToken is the token of --token or --token-file ("" for neither).
func (f *clientFlags) apiToken() (string, error) {
	switch {
	case f.token != "" && f.tokenFile != "":
		return "", errors.New("give --token or --token-file, not both")
	case f.tokenFile != "":
		b, err := readSmallFile(f.tokenFile, maxTokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
			return "", fmt.Errorf("--token-file %s: want one token on one line", f.tokenFile)
		}
		return tok, nil
	}
	return f.token, nil
}

// readSmallFile reads path, refusing one of more than limit bytes.
func readSmallFile(path string, limit int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s: more than %d bytes", path, limit)
	}
	return b, err
}

// newClient starts a client on cfg; with --bootstrap it first asks the
// seeds for the nodes, with --zk it first connects to ZooKeeper to follow
// the nodes in service. closeAll closes the client, then the discovery.
func (f *clientFlags) newClient(ctx context.Context, cfg client.Config) (c *client.Client, closeAll func(), err error) {
	var d interface {
		client.Discovery
		Close() error
	}
	switch {
	case f.bootstrap != "":
		var b *client.Bootstrap
		if b, err = client.NewBootstrap(ctx, client.BootstrapConfig{Seeds: splitComma(f.bootstrap), TLS: cfg.TLS}); err != nil {
			return nil, nil, fmt.Errorf("--bootstrap %s: %w", f.bootstrap, err)
		}
		d, cfg.Discovery = b, b
	case f.zk != "":
		var z *zkdiscovery.Discovery
		if z, err = zkdiscovery.New(ctx, zkdiscovery.Config{Servers: splitComma(f.zk), Cluster: f.cluster, Auth: f.auth, TLS: f.zkTLSConfig}); err != nil {
			return nil, nil, err
		}
		d, cfg.Discovery = z, z
	}
	c, err = client.New(ctx, cfg)
	if err != nil {
		if d != nil {
			_ = d.Close()
		}
		return nil, nil, err
	}
	return c, func() {
		_ = c.Close()
		if d != nil {
			_ = d.Close()
		}
	}, nil
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// get is "snowflakectl get [--count N] (--servers … | --bootstrap … | --zk …)": IDs through
// the Go client (failover included), one a line.
func get(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("get", usages["get"], stderr)
	var cf clientFlags
	cf.register(fs, "bound on the whole command")
	count := fs.Int("count", 1, "how many IDs (1..1048576; with --gene up to the client's batch, 1000)")
	asUUID := fs.Bool("uuid", false, "UUIDv7s (GET /uuids) instead of snowflake IDs, one a line")
	gene := fs.String("gene", "", "IDs ending in this gene's low bits (a cluster with --gene-bits): a decimal 0..2^63-1, e.g. a user ID")
	if _, code, ok := parse(fs, args, false, stdout, stderr); !ok {
		return code
	}
	cfg, err := cf.config(fs)
	if err == nil && (*count < 1 || *count > client.MaxCount) {
		err = fmt.Errorf("--count %d: want 1..%d", *count, client.MaxCount)
	}
	var g uint64
	if err == nil && *gene != "" {
		if g, err = strconv.ParseUint(*gene, 10, 63); err != nil {
			err = fmt.Errorf("--gene %q: want a decimal 0..9223372036854775807", *gene)
		} else if *count > client.DefaultMaxBatch {
			err = fmt.Errorf("--count %d with --gene: want 1..%d", *count, client.DefaultMaxBatch)
		}
	}
	if err == nil && *asUUID && (*gene != "" || *count > client.DefaultMaxBatch) {
		err = fmt.Errorf("--uuid takes no --gene, and --count up to %d", client.DefaultMaxBatch)
	}
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl get: %v\n", err)
		return exitUsage
	}
	ctx, cancel := clock.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	c, closeAll, err := cf.newClient(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl get: %v\n", err)
		return exitFor(err)
	}
	defer closeAll()
	if *asUUID {
		us, err := c.NextUUIDN(ctx, *count)
		if err != nil {
			fmt.Fprintf(stderr, "snowflakectl get: %v\n", err)
			return exitFor(err)
		}
		var b strings.Builder
		for _, u := range us {
			b.WriteString(u.String() + "\n")
		}
		_, _ = io.WriteString(stdout, b.String())
		return exitOK
	}
	var ids []int64
	if *gene != "" {
		ids, err = c.NextGeneN(ctx, g, *count)
	} else {
		ids, err = c.NextN(ctx, *count)
	}
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl get: %v\n", err)
		return exitFor(err)
	}
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d\n", id)
	}
	_, _ = io.WriteString(stdout, b.String())
	return exitOK
}

func exitFor(err error) int {
	if errors.Is(err, client.ErrInvalidConfig) {
		return exitUsage
	}
	return exitFailure
}

// bench is "snowflakectl bench (--servers … | --bootstrap … | --zk …) [--duration 10s]
// [--concurrency 64] [--count 1]": goroutines calling the client for a
// bounded time, then IDs/s, latency percentiles, failovers and errors. Only
// loopback nodes (127.0.0.0/8, ::1) are benchmarked: load is never sent
// anywhere else by accident.
func bench(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench", usages["bench"], stderr)
	var cf clientFlags
	cf.register(fs, "bound on the command beyond --duration: finding the nodes, then the calls still running when --duration ends (the whole command takes at most --duration plus --timeout)")
	duration := fs.Duration("duration", 10*time.Second, "how long (at most 10m)")
	conc := fs.Int("concurrency", 64, "goroutines calling the client (1..4096)")
	count := fs.Int("count", 1, "IDs per call: 1 is Next, more is NextN")
	if _, code, ok := parse(fs, args, false, stdout, stderr); !ok {
		return code
	}
	cfg, err := cf.config(fs)
	switch {
	case err != nil:
	case *duration <= 0 || *duration > 10*time.Minute:
		err = fmt.Errorf("--duration %s: want up to 10m", *duration)
	case *conc < 1 || *conc > 4096:
		err = fmt.Errorf("--concurrency %d: want 1..4096", *conc)
	case *count < 1 || *count > client.MaxCount:
		err = fmt.Errorf("--count %d: want 1..%d", *count, client.MaxCount)
	}
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl bench: %v\n", err)
		return exitUsage
	}
	ctx, cancel := clock.WithTimeout(context.Background(), cf.timeout+*duration)
	defer cancel()
	c, closeAll, err := cf.newClient(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "snowflakectl bench: %v\n", err)
		return exitFor(err)
	}
	defer closeAll()
	for _, addr := range c.Nodes() {
		if !loopback(addr) {
			fmt.Fprintf(stderr, "snowflakectl bench: %s is not a loopback address: bench only loads nodes on this machine\n", addr)
			return exitUsage
		}
	}
	r := runBench(ctx, c, *duration, *conc, *count)
	fmt.Fprintf(stdout, "%d goroutines for %s, %d IDs per call: %.0f IDs/s, %.0f calls/s; latency p50 %s p99 %s max %s; %d requests, %d failovers, %d errors\n",
		*conc, r.elapsed.Round(time.Millisecond), *count, float64(r.ids)/r.elapsed.Seconds(), float64(r.calls)/r.elapsed.Seconds(),
		r.p50, r.p99, r.max, r.stats.Requests, r.stats.Failovers, r.errors)
	if r.errors > 0 {
		fmt.Fprintf(stderr, "snowflakectl bench: %d calls failed, the first: %v\n", r.errors, r.firstErr)
		return exitFailure
	}
	return exitOK
}

// benchResult is what runBench measured.
type benchResult struct {
	elapsed       time.Duration
	calls, ids    int64
	errors        int64
	firstErr      error
	p50, p99, max time.Duration
	stats         client.Stats
}

// maxLatencySamples bounds the latencies kept per goroutine.
const maxLatencySamples = 100_000

func runBench(ctx context.Context, c *client.Client, d time.Duration, conc, count int) benchResult {
	var mu sync.Mutex
	var r benchResult
	var lat []time.Duration
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			var mine []time.Duration
			var calls, ids, errs int64
			var first error
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				got, err := c.NextN(ctx, count)
				if err != nil {
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				calls++
				ids += int64(len(got))
				if len(mine) < maxLatencySamples {
					mine = append(mine, time.Since(t0))
				}
			}
			mu.Lock()
			r.calls, r.ids, r.errors = r.calls+calls, r.ids+ids, r.errors+errs
			if r.firstErr == nil {
				r.firstErr = first
			}
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		r.p50, r.p99, r.max = lat[n/2], lat[min(n-1, n*99/100)], lat[n-1]
	}
	r.stats = c.Stats()
	return r
}

// loopback reports whether host:port names a loopback address (a host
// name must resolve to loopback addresses only).
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}
