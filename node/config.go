package node

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/client/zktls"
	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/internal/envflag"
	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/server"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// ErrInvalidConfig is wrapped by every error about flag values or about a
// conflict between the flags and the node's saved state (the cache file).
// The command exits with status 2 for it.
var ErrInvalidConfig = errors.New("invalid configuration")

// Log formats accepted by --log-format.
const (
	logFormatJSON    = "json"
	LogFormatConsole = "console"
)

// borrow reports whether --rollback-policy is borrow.
func (c Config) borrow() bool { return c.RollbackPolicy == rollbackBorrow }

// Rollback policies accepted by --rollback-policy.
const (
	// rollbackLeave takes a node out of service for a rollback beyond
	// --rollback-tolerance until the clock catches up (the default).
	rollbackLeave = "leave"
	// rollbackBorrow keeps serving through a rollback, from the last issued
	// time forward, inside the persisted fences.
	rollbackBorrow = "borrow"
)

// Limits on flag values that Validate enforces (--max-batch is bounded by
// server.MaxBatchLimit, the limit of the server it configures).
const (
	// minFenceAhead is the smallest --fence-ahead: the fence keeper runs
	// every fence-ahead/3, which must be at least a millisecond.
	minFenceAhead = 3 * time.Millisecond
	// maxRollbackTolerance bounds --rollback-tolerance: the generator waits
	// this long inside a request.
	maxRollbackTolerance = time.Second
)

// Config is every flag of snowflaked. defaultConfig holds their defaults
// (the flag table of docs/operations.md); RegisterFlags binds the fields to
// flags.
type Config struct {
	Listen           string        // --listen: HTTP listen address
	Advertise        string        // --advertise: host:port peers and clients use ("" = derived from --listen)
	Cluster          string        // --cluster: cluster name under /snowflaked
	NodeKey          string        // --node-key: stable identity of the node ("" = the advertised address)
	ZK               string        // --zk: ZooKeeper connection string; "" = standalone mode
	ZKAuth           string        // --zk-auth: user:password for digest ACLs
	ZKTLSCA          string        // --zk-tls-ca: PEM CA file; set = ZooKeeper over TLS
	ZKTLSCert        string        // --zk-tls-cert: PEM client certificate (with --zk-tls-key: mutual TLS)
	ZKTLSKey         string        // --zk-tls-key: PEM key of --zk-tls-cert
	APITokensFile    string        // --api-tokens-file: tokens the snowflake endpoints require ("" = none)
	ZKSessionTimeout time.Duration // --zk-session-timeout
	WorkerID         int64         // --worker-id: -1 = unset (required in standalone mode)
	CacheFile        string        // --cache-file: local identity and fence
	Layout           string        // --layout: T/W/S bits, or js53
	GeneBits         uint          // --gene-bits: low bits of the sequence field given to a caller's gene
	WorkerIDRange    string        // --worker-id-range: LO-HI, the worker IDs this cluster claims ("" = all)
	Epoch            string        // --epoch: RFC 3339
	TimeUnit         string        // --time-unit: Go duration
	MaxBatch         int           // --max-batch: largest /ids count

	RollbackTolerance time.Duration // --rollback-tolerance
	RollbackPolicy    string        // --rollback-policy: rollbackLeave or rollbackBorrow
	FenceAhead        time.Duration // --fence-ahead
	ReportInterval    time.Duration // --report-interval (ZooKeeper mode)
	MaxStartWait      time.Duration // --max-start-wait
	ZKFenceAhead      time.Duration // --zk-fence-ahead (ZooKeeper mode): G, the ZooKeeper fence's lead
	RecycleAfter      time.Duration // --recycle-after (ZooKeeper mode): 0 = unset, the cluster's recorded value
	TokenStaleLimit   time.Duration // --token-stale-limit (ZooKeeper mode): how long token hashes not read again are honoured
	// AcceptNewIncarnation (--accept-new-incarnation): start although the
	// cache file belongs to another incarnation of the cluster.
	AcceptNewIncarnation bool
	// CreateCluster (--create-cluster): create the cluster in ZooKeeper
	// when it does not exist; without it a missing cluster is refused.
	CreateCluster bool

	NTP           string        // --ntp: comma-separated servers; "" disables the check
	NTPInterval   time.Duration // --ntp-interval
	NTPMaxOffset  time.Duration // --ntp-max-offset
	NTPRequired   bool          // --ntp-required
	PeerInterval  time.Duration // --peer-interval
	PeerMaxOffset time.Duration // --peer-max-offset
	PeerSample    int           // --peer-sample: peers asked per round

	LogLevel        string        // --log-level: zerolog level name
	LogFormat       string        // --log-format: json or console
	ShutdownTimeout time.Duration // --shutdown-timeout: bound on finishing in-flight requests

	TLSCert        string // --tls-cert: serve the API over HTTPS with this certificate (PEM; "" = plain HTTP)
	TLSKey         string // --tls-key: the certificate's private key (PEM)
	TLSClientCA    string // --tls-client-ca: require client certificates these CAs signed (mutual TLS)
	TLSCA          string // --tls-ca: CAs that sign the peers' certificates ("" = --tls-client-ca, else the system's)
	TLSClientAllow string // --tls-client-allow: client names allowed on the API ("" = any verified client)
	TLSAdminAllow  string // --tls-admin-allow: client names allowed on /status, /metrics, /clock ("" = --tls-client-allow)

	// Version is the build's version, shown on /status; not a flag (the
	// main sets it). Its first word is the version the binary was built as
	// (-X main.version); what follows (the Go version, build notes) is
	// for people.
	Version string

	// seams, set by tests and simulations only: nil is the real clock,
	// port, disk and ZooKeeper.
	seams *seams
}

// seams replace what a node talks to, and let tests watch it: the node's
// only test seam (the chaos build's faults are decorators over the same
// clock and disk). The zero value is production.
type seams struct {
	clock clock.Clock // nil: the system clock
	// schedule arms every timer the node and its parts set (nil: each
	// waits as asked); the simulations order them with one.
	schedule clock.Schedule
	listener net.Listener  // nil: listen on --listen (Run closes a given one when it stops)
	disk     disk.Disk     // under the cache file and the segment state file (nil: the OS)
	dial     zkconn.Dialer // opens ZooKeeper clients (nil: the coordinator's default)
	// beforeToken runs in each fence write after the keeper computed the
	// fence and before the write reads the coordinator's token: a
	// simulation widens the window a re-claim may land in.
	beforeToken func()
	// wrapStore wraps the store segment mode uses (simulations break rules
	// with it).
	wrapStore      func(segment.Store) segment.Store
	yearsLeftEvery time.Duration // 0: yearsLeftCheckInterval
	noMetrics      bool          // benchmarks: the server without an observer
	built          func(*node)   // called once the node is built, before it serves
}

// schedule is the seams' timer schedule (nil: none).
func (c Config) schedule() clock.Schedule {
	if c.seams == nil {
		return nil
	}
	return c.seams.schedule
}

// files is the disk under the cache file.
func (c Config) files() disk.Disk {
	if c.seams == nil || c.seams.disk == nil {
		return disk.OS{}
	}
	return c.seams.disk
}

// dialer opens ZooKeeper clients: the seam's, or go-zookeeper over TLS
// with --zk-tls-*, or nil (the coordinator's default, plain TCP). Files
// that no longer load (Validate loaded them) give a Dialer that fails with
// why.
func (c Config) dialer(log zerolog.Logger) zkconn.Dialer {
	if c.seams != nil && c.seams.dial != nil {
		return c.seams.dial
	}
	cfg, err := c.zkTLSConfig(log)
	switch {
	case err != nil:
		return func([]string, zkconn.Options) (zkconn.Conn, error) { return nil, err }
	case cfg == nil:
		return nil
	}
	return zkconn.TLSDial(cfg)
}

// zkTLSConfig is the TLS configuration of --zk-tls-* (nil without them).
// The client certificate is a tlsfiles.Pair, as the API's is: read again
// when its files change, so a session that reconnects after a rotation
// presents the new one instead of an expired one.
func (c Config) zkTLSConfig(log zerolog.Logger) (*tls.Config, error) {
	files := c.zkTLSFiles()
	if !files.Enabled() {
		return nil, nil
	}
	cfg, err := zktls.Load(files)
	if err != nil || files.Cert == "" {
		return cfg, err
	}
	pair, err := tlsfiles.NewPair(files.Cert, files.Key, log.With().Str("component", "zk-tls").Logger())
	if err != nil {
		return nil, err
	}
	cfg.Certificates, cfg.GetClientCertificate = nil, pair.GetClientCertificate
	return cfg, nil
}

// zkTLSFiles are the files of --zk-tls-ca, --zk-tls-cert and --zk-tls-key.
func (c Config) zkTLSFiles() zktls.Files {
	return zktls.Files{CA: c.ZKTLSCA, Cert: c.ZKTLSCert, Key: c.ZKTLSKey}
}

// storeWrapper wraps segment mode's store (nil: none).
func (c Config) storeWrapper() func(segment.Store) segment.Store {
	if c.seams == nil {
		return nil
	}
	return c.seams.wrapStore
}

// EnvPrefix is the prefix of the environment variables that set the
// server's flags: --max-batch is also SNOWFLAKED_MAX_BATCH (see envflag).
const EnvPrefix = "SNOWFLAKED_"

// EnvVars returns the environment variable of every flag RegisterFlags
// registers (true for each), for checking deployment files against.
func EnvVars() map[string]bool {
	fs := flag.NewFlagSet("snowflaked", flag.ContinueOnError)
	cfg := defaultConfig()
	cfg.RegisterFlags(fs)
	vars := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { vars[envflag.VarName(EnvPrefix, f.Name)] = true })
	return vars
}

// defaultConfig returns the flags' defaults.
func defaultConfig() Config {
	return Config{
		Listen:            ":8080",
		Cluster:           "default",
		ZKSessionTimeout:  coordinator.DefaultSessionTimeout,
		WorkerID:          -1,
		CacheFile:         "./data/snowflaked-cache.json",
		Layout:            snowflake.PresetDefault,
		Epoch:             snowflake.DefaultEpoch.Format(time.RFC3339),
		TimeUnit:          "1ms",
		MaxBatch:          server.DefaultMaxBatch,
		RollbackTolerance: snowflake.DefaultRollbackTolerance,
		RollbackPolicy:    rollbackLeave,
		FenceAhead:        3 * time.Second,
		ReportInterval:    coordinator.DefaultReportInterval,
		MaxStartWait:      10 * time.Second,
		ZKFenceAhead:      coordinator.DefaultZKFenceAhead,
		TokenStaleLimit:   segment.DefaultTokenStaleLimit,
		NTPInterval:       clockguard.DefaultNTPInterval,
		NTPMaxOffset:      clockguard.DefaultNTPMaxOffset,
		PeerInterval:      clockguard.DefaultPeerInterval,
		PeerMaxOffset:     clockguard.DefaultPeerMaxOffset,
		PeerSample:        clockguard.DefaultPeerSample,
		LogLevel:          "info",
		LogFormat:         logFormatJSON,
		ShutdownTimeout:   10 * time.Second,
	}
}

// RegisterFlags binds every field of c to a flag of fs. The flags' defaults
// are those of defaultConfig (whatever c held before), so after fs.Parse c
// is the defaults overridden by the command line.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := defaultConfig()
	fs.StringVar(&c.Listen, "listen", d.Listen, "HTTP listen address")
	fs.StringVar(&c.Advertise, "advertise", d.Advertise, "host:port that clients and peers reach this node at (default: derived from --listen)")
	fs.StringVar(&c.Cluster, "cluster", d.Cluster, "cluster name (ZooKeeper path /snowflaked/<cluster>)")
	fs.StringVar(&c.NodeKey, "node-key", d.NodeKey, "stable node identity that keeps its worker ID (default: the advertised address)")
	fs.StringVar(&c.ZK, "zk", d.ZK, "ZooKeeper servers host1:2181,host2:2181; empty = standalone mode (needs --worker-id)")
	fs.StringVar(&c.ZKAuth, "zk-auth", d.ZKAuth, "user:password: digest-protect every znode the cluster creates")
	fs.StringVar(&c.ZKTLSCA, "zk-tls-ca", d.ZKTLSCA, "PEM file of the CA ZooKeeper's certificate must chain to: talk to ZooKeeper over TLS (its secureClientPort)")
	fs.StringVar(&c.ZKTLSCert, "zk-tls-cert", d.ZKTLSCert, "PEM client certificate for ZooKeeper over TLS, with --zk-tls-key: mutual TLS (ssl.clientAuth=need)")
	fs.StringVar(&c.ZKTLSKey, "zk-tls-key", d.ZKTLSKey, "PEM private key of --zk-tls-cert")
	fs.DurationVar(&c.ZKSessionTimeout, "zk-session-timeout", d.ZKSessionTimeout, "ZooKeeper session timeout")
	fs.Int64Var(&c.WorkerID, "worker-id", d.WorkerID, "worker ID; required in standalone mode (-1 = unset)")
	fs.StringVar(&c.CacheFile, "cache-file", d.CacheFile, "local file holding worker ID, layout and time fence")
	fs.StringVar(&c.Layout, "layout", d.Layout, "ID bit split time/worker/sequence, or js53 (41/5/7, JavaScript-safe)")
	fs.UintVar(&c.GeneBits, "gene-bits", d.GeneBits, fmt.Sprintf("low bits of the sequence given to a gene (GET /id?gene=G: the ID ends in G's low bits), 0..%d; a tick then holds 2^(sequence bits - gene bits) IDs; cluster-wide like the layout", snowflake.MaxGeneBits))
	fs.StringVar(&c.WorkerIDRange, "worker-id-range", d.WorkerIDRange, "LO-HI: the worker IDs this cluster claims and recycles (default all of the layout's); clusters with disjoint ranges (one ZooKeeper ensemble per region) issue IDs unique across all of them; cluster-wide, kept in the cluster znode")
	fs.StringVar(&c.Epoch, "epoch", d.Epoch, "start of ID time, RFC 3339")
	fs.StringVar(&c.TimeUnit, "time-unit", d.TimeUnit, "length of one timestamp tick")
	fs.IntVar(&c.MaxBatch, "max-batch", d.MaxBatch, "largest count of GET /ids")
	fs.DurationVar(&c.RollbackTolerance, "rollback-tolerance", d.RollbackTolerance, "clock rollback waited out inside a request; larger takes the node out of service")
	fs.StringVar(&c.RollbackPolicy, "rollback-policy", d.RollbackPolicy, "leave: a rollback beyond --rollback-tolerance takes the node out of service until the clock catches up; borrow: keep serving from the last issued time forward, inside the persisted fences, out of service (borrow_exhausted) only when their headroom is used up")
	fs.DurationVar(&c.FenceAhead, "fence-ahead", d.FenceAhead, "how far ahead of now the persisted time fence is kept")
	fs.DurationVar(&c.ReportInterval, "report-interval", d.ReportInterval, "how often the node renews its ZooKeeper fence (and reports last_ts); at most --zk-fence-ahead/6")
	fs.DurationVar(&c.MaxStartWait, "max-start-wait", d.MaxStartWait, "at start, wait this long for the clock to pass the fence; longer = out of service (clock_behind_fence)")
	fs.DurationVar(&c.ZKFenceAhead, "zk-fence-ahead", d.ZKFenceAhead, "G: IDs only up to a fence ZooKeeper acknowledged, renewed to now+G; serving without ZooKeeper stops after about G (out of service at G/3 left)")
	fs.DurationVar(&c.RecycleAfter, "recycle-after", d.RecycleAfter, "a worker ID without lease and fence renewal for this long may be taken over; a cluster-wide setting: unset (0), the cluster's recorded value (24h for a cluster this node creates); set, it must equal the cluster's (snowflakectl cluster set changes that)")
	fs.DurationVar(&c.TokenStaleLimit, "token-stale-limit", d.TokenStaleLimit, fmt.Sprintf("how long a node that cannot reach ZooKeeper honours the token hashes of a tag created with --require-token that it read last, counted from the start of that read; past it, requests for the tag answer 503 %s until ZooKeeper answers, so a rotated-out token stops serving within it; %s..%s", wire.CodeTokensUnconfirmed, segment.MinTokenStaleLimit, segment.MaxTokenStaleLimit))
	fs.BoolVar(&c.AcceptNewIncarnation, "accept-new-incarnation", d.AcceptNewIncarnation, "start although the cache file belongs to another incarnation of the cluster (ZooKeeper rebuilt); claims afresh after the cache fence")
	fs.BoolVar(&c.CreateCluster, "create-cluster", d.CreateCluster, "create the cluster in ZooKeeper (with this node's layout, --worker-id-range and --recycle-after) when it does not exist; without it a node refuses a missing cluster (a mistyped --cluster never starts a new one); snowflakectl cluster create is the deliberate way")
	fs.StringVar(&c.NTP, "ntp", d.NTP, "NTP servers to check the clock against, comma-separated; empty disables the check")
	fs.DurationVar(&c.NTPInterval, "ntp-interval", d.NTPInterval, "how often to query NTP")
	fs.DurationVar(&c.NTPMaxOffset, "ntp-max-offset", d.NTPMaxOffset, "largest NTP offset tolerated in service")
	fs.BoolVar(&c.NTPRequired, "ntp-required", d.NTPRequired, "leave service when no NTP server answers")
	fs.DurationVar(&c.PeerInterval, "peer-interval", d.PeerInterval, "how often to compare clocks with live peers")
	fs.DurationVar(&c.PeerMaxOffset, "peer-max-offset", d.PeerMaxOffset, "two clocks further apart disagree; out of service only when a majority of the clocks disagrees with this one")
	fs.IntVar(&c.PeerSample, "peer-sample", d.PeerSample, "how many live peers each peer clock round asks, chosen at random (all of them in a smaller cluster); at least 3")
	fs.StringVar(&c.LogLevel, "log-level", d.LogLevel, "log level: trace, debug, info, warn, error")
	fs.StringVar(&c.LogFormat, "log-format", d.LogFormat, "log format: json or console")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "on SIGTERM, how long in-flight requests may take to finish")
	fs.StringVar(&c.TLSCert, "tls-cert", d.TLSCert, "serve the API over HTTPS on --listen with this PEM certificate (chain); with --tls-key; read again when the files change")
	fs.StringVar(&c.TLSKey, "tls-key", d.TLSKey, "PEM private key of --tls-cert")
	fs.StringVar(&c.TLSClientCA, "tls-client-ca", d.TLSClientCA, "PEM CA bundle: require every client to present a certificate it signed (mutual TLS); with --tls-cert")
	fs.StringVar(&c.TLSCA, "tls-ca", d.TLSCA, "PEM CA bundle that verifies the peers' certificates for the peer clock check and the status page (default --tls-client-ca, else the system's roots); with --tls-cert")
	fs.StringVar(&c.TLSClientAllow, "tls-client-allow", d.TLSClientAllow, "NAME,NAME: only client certificates with one of these common or DNS names may use the API (default any that --tls-client-ca verifies); list the nodes' own names too (the peer check's /time)")
	fs.StringVar(&c.TLSAdminAllow, "tls-admin-allow", d.TLSAdminAllow, "NAME,NAME: only these client names may read /status, /metrics and /clock (default --tls-client-allow); list the nodes' own names too (the status page's /clock)")
	fs.StringVar(&c.APITokensFile, "api-tokens-file", d.APITokensFile, "file of tokens (one a line, or sha256:<hex> of one) that /id, /ids, /uuid, /uuids and /api/snowflake/get then require as Authorization: Bearer; read at start")
}

// standalone reports whether the node runs without ZooKeeper.
func (c Config) standalone() bool { return c.ZK == "" }

// zkServers returns the addresses of --zk, split on commas and trimmed
// (nil in standalone mode).
func (c Config) zkServers() []string { return splitList(c.ZK) }

// ntpServers returns the servers of --ntp, split on commas and trimmed (nil
// when the check is disabled).
func (c Config) ntpServers() []string { return splitList(c.NTP) }

func splitList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// concreteHost reports whether a host:port address names a host others can
// reach: not empty and not a wildcard address (0.0.0.0, ::).
func concreteHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return false
	}
	return true
}

// advertiseAddr returns the host:port this node is reached at: --advertise,
// or else the host of --listen with the port actually listened on (so
// --listen 127.0.0.1:0 advertises the port the kernel picked). A --listen
// without a concrete host (":8080", "0.0.0.0:8080") cannot be advertised:
// in ZooKeeper mode Validate requires --advertise then, and this returns an
// error wrapping ErrInvalidConfig.
func (c Config) advertiseAddr(listening net.Addr) (string, error) {
	if c.Advertise != "" {
		return c.Advertise, nil
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil || !concreteHost(c.Listen) {
		return "", fmt.Errorf("%w: --advertise is not set and --listen %q has no concrete host to advertise", ErrInvalidConfig, c.Listen)
	}
	_, port, err := net.SplitHostPort(listening.String())
	if err != nil {
		return "", fmt.Errorf("listening address %q: %w", listening, err)
	}
	return net.JoinHostPort(host, port), nil
}

// nodeKeyFor returns --node-key, or the advertised address when it is unset.
func (c Config) nodeKeyFor(advertise string) string {
	if c.NodeKey != "" {
		return c.NodeKey
	}
	return advertise
}

// workerIDs is --worker-id-range, parsed (Validate has checked it).
func (c Config) workerIDs() coordinator.WorkerRange {
	r, _ := coordinator.ParseWorkerRange(c.WorkerIDRange)
	return r
}

// parseLayout returns the ID layout of --layout, --epoch, --time-unit and
// --gene-bits, validated against now.
func (c Config) parseLayout(now time.Time) (snowflake.Layout, error) {
	l, err := snowflake.ParseLayout(c.Layout, c.Epoch, c.TimeUnit, now)
	if err != nil {
		return snowflake.Layout{}, fmt.Errorf("%w: --layout %s --epoch %s --time-unit %s: %w", ErrInvalidConfig, c.Layout, c.Epoch, c.TimeUnit, err)
	}
	switch {
	case c.GeneBits > snowflake.MaxGeneBits:
		return snowflake.Layout{}, fmt.Errorf("%w: --gene-bits %d: want 0..%d", ErrInvalidConfig, c.GeneBits, snowflake.MaxGeneBits)
	case c.GeneBits > l.SequenceBits:
		return snowflake.Layout{}, fmt.Errorf("%w: --gene-bits %d: layout %s has only %d sequence bits", ErrInvalidConfig, c.GeneBits, l, l.SequenceBits)
	}
	l.GeneBits = c.GeneBits
	return l, nil
}

// Validate reports every problem with the configuration at once; each
// error wraps ErrInvalidConfig and names the flag.
func (c Config) Validate() error {
	v := validation{c: c}
	v.layout, v.layoutErr = c.parseLayout(time.Now())
	for _, check := range configChecks {
		check(&v)
	}
	return errors.Join(v.errs...)
}

// configChecks are Validate's checks, in the order their errors are
// reported.
var configChecks = []func(*validation){
	(*validation).addresses,
	(*validation).zooKeeper,
	(*validation).zooKeeperTLS,
	(*validation).identity,
	(*validation).idLayout,
	(*validation).workerID,
	(*validation).workerRange,
	(*validation).generator,
	(*validation).fences,
	(*validation).segments,
	(*validation).clockChecks,
	(*validation).logging,
	(*validation).tlsFlags,
	(*validation).peerCertificate,
}

// validation is one run of Validate: the configuration, its layout (parsed
// once, for the checks against it) and the problems found so far.
type validation struct {
	c         Config
	layout    snowflake.Layout
	layoutErr error
	errs      []error
}

// bad records a problem; format names the flag.
func (v *validation) bad(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
}

// positive records a problem when the duration of flag is not above 0.
func (v *validation) positive(flag string, d time.Duration) {
	if d <= 0 {
		v.bad("%s %s: must be positive", flag, d)
	}
}

// emptyEntry reports whether a comma-separated list has an empty entry.
func emptyEntry(list string) bool {
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == "" {
			return true
		}
	}
	return false
}

// addresses checks --listen and --advertise.
func (v *validation) addresses() {
	c := v.c
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		v.bad("--listen %q: want host:port or :port (%v)", c.Listen, err)
	}
	if c.Advertise == "" {
		return
	}
	if host, port, err := net.SplitHostPort(c.Advertise); err != nil || host == "" || port == "" || port == "0" {
		v.bad("--advertise %q: want host:port", c.Advertise)
	}
}

// zooKeeper checks what ZooKeeper mode needs: a server list without gaps
// and an address peers can reach.
func (v *validation) zooKeeper() {
	c := v.c
	if c.standalone() {
		return
	}
	if emptyEntry(c.ZK) {
		v.bad("--zk %q: empty server address in the list", c.ZK)
	}
	if c.Advertise == "" && !concreteHost(c.Listen) {
		v.bad("--advertise is required in ZooKeeper mode when --listen %q has no concrete host: peers and clients find the node at the advertised host:port (e.g. --advertise 10.0.0.5:8080)", c.Listen)
	}
}

// zooKeeperTLS checks --zk-tls-ca, --zk-tls-cert and --zk-tls-key: only
// with --zk, the CA required, the certificate and key together, every file
// readable PEM.
func (v *validation) zooKeeperTLS() {
	c := v.c
	files := c.zkTLSFiles()
	if !files.Enabled() {
		return
	}
	if c.standalone() {
		v.bad("--zk-tls-ca, --zk-tls-cert, --zk-tls-key: only with --zk (a standalone node talks to no ZooKeeper)")
		return
	}
	_, err := zktls.Load(files)
	switch {
	case errors.Is(err, zktls.ErrCA):
		v.bad("--zk-tls-ca %q: %v", c.ZKTLSCA, err)
	case errors.Is(err, zktls.ErrCert):
		v.bad("--zk-tls-cert %q: %v", c.ZKTLSCert, err)
	case errors.Is(err, zktls.ErrKey):
		v.bad("--zk-tls-key %q: %v", c.ZKTLSKey, err)
	case err != nil:
		v.bad("--zk-tls-ca: %v", err)
	}
}

// identity checks the names and credentials the node runs under, its
// session and its cache file.
func (v *validation) identity() {
	c := v.c
	if c.Cluster == "" || strings.ContainsAny(c.Cluster, "/ ") {
		v.bad("--cluster %q: want a non-empty name without '/' or spaces", c.Cluster)
	}
	if strings.Contains(c.NodeKey, "/") {
		v.bad("--node-key %q: must not contain '/'", c.NodeKey)
	}
	if user, _, ok := strings.Cut(c.ZKAuth, ":"); c.ZKAuth != "" && (!ok || user == "") {
		v.bad("--zk-auth: want user:password")
	}
	v.positive("--zk-session-timeout", c.ZKSessionTimeout)
	if c.CacheFile == "" {
		v.bad("--cache-file: must not be empty")
	}
}

// idLayout reports the error of --layout, --epoch, --time-unit and
// --gene-bits (parseLayout's).
func (v *validation) idLayout() {
	if v.layoutErr != nil {
		v.errs = append(v.errs, v.layoutErr)
	}
}

// workerID checks --worker-id against the mode and the layout.
func (v *validation) workerID() {
	c := v.c
	switch {
	case c.WorkerID < -1:
		v.bad("--worker-id %d: want 0 or more (or -1 for unset)", c.WorkerID)
	case c.WorkerID == -1 && c.standalone():
		v.bad("--worker-id is required without --zk (standalone mode)")
	case c.WorkerID >= 0 && !c.standalone():
		v.bad("--worker-id %d: only for standalone mode; with --zk the worker ID is claimed in ZooKeeper", c.WorkerID)
	case c.WorkerID >= 0 && v.layoutErr == nil && c.WorkerID > v.layout.MaxWorkerID():
		v.bad("--worker-id %d: layout %s holds worker IDs 0..%d", c.WorkerID, v.layout, v.layout.MaxWorkerID())
	}
}

// workerRange checks --worker-id-range and --create-cluster, the settings
// that only a ZooKeeper cluster has.
func (v *validation) workerRange() {
	c := v.c
	r, err := coordinator.ParseWorkerRange(c.WorkerIDRange)
	switch {
	case err != nil:
		v.bad("--worker-id-range: %v", err)
	case c.WorkerIDRange == "":
	case c.standalone():
		v.bad("--worker-id-range %s: only with --zk (a standalone node's worker ID is --worker-id)", c.WorkerIDRange)
	case v.layoutErr == nil && r.Hi > v.layout.MaxWorkerID():
		v.bad("--worker-id-range %s: layout %s holds worker IDs 0..%d", c.WorkerIDRange, v.layout, v.layout.MaxWorkerID())
	}
	if c.CreateCluster && c.standalone() {
		v.bad("--create-cluster: only with --zk (a standalone node has no cluster in ZooKeeper)")
	}
}

// generator checks the flags the ID generator runs with.
func (v *validation) generator() {
	c := v.c
	if c.MaxBatch < 1 || c.MaxBatch > server.MaxBatchLimit {
		v.bad("--max-batch %d: want 1..%d", c.MaxBatch, server.MaxBatchLimit)
	}
	if c.RollbackTolerance < 0 || c.RollbackTolerance > maxRollbackTolerance {
		v.bad("--rollback-tolerance %s: want 0..%s", c.RollbackTolerance, maxRollbackTolerance)
	}
	if c.RollbackPolicy != rollbackLeave && c.RollbackPolicy != rollbackBorrow {
		v.bad("--rollback-policy %q: want %s or %s", c.RollbackPolicy, rollbackLeave, rollbackBorrow)
	}
	if c.FenceAhead < minFenceAhead {
		v.bad("--fence-ahead %s: want at least %s (the fence is renewed every fence-ahead/3)", c.FenceAhead, minFenceAhead)
	}
}

// fences checks the timings of the fences, the start and worker ID reuse.
func (v *validation) fences() {
	c := v.c
	v.positive("--report-interval", c.ReportInterval)
	if c.MaxStartWait < 0 {
		v.bad("--max-start-wait %s: must not be negative", c.MaxStartWait)
	}
	switch {
	case c.RecycleAfter < 0:
		v.bad("--recycle-after %s: must not be negative (leave it unset to use the cluster's)", c.RecycleAfter)
	case c.RecycleAfter > 0 && c.RecycleAfter < time.Millisecond:
		v.bad("--recycle-after %s: want 1ms or more (or leave it unset to use the cluster's)", c.RecycleAfter)
	}
	switch {
	case c.ZKFenceAhead <= 0:
		v.positive("--zk-fence-ahead", c.ZKFenceAhead)
	case c.ReportInterval > c.ZKFenceAhead/6:
		// Several renewals must fit before the node leaves service at G/3 left.
		v.bad("--report-interval %s: must be at most a sixth of --zk-fence-ahead %s", c.ReportInterval, c.ZKFenceAhead)
	}
}

// segments checks the flags of segment mode: --token-stale-limit.
func (v *validation) segments() {
	switch d := v.c.TokenStaleLimit; {
	case d <= 0:
		v.positive("--token-stale-limit", d)
	case segment.CheckTokenStaleLimit(d) != nil:
		v.bad("--token-stale-limit %s: want %s..%s (how long a node cut off from ZooKeeper honours the token hashes it read last)", d, segment.MinTokenStaleLimit, segment.MaxTokenStaleLimit)
	}
}

// clockChecks checks the NTP and peer clock checks.
func (v *validation) clockChecks() {
	c := v.c
	if strings.TrimSpace(c.NTP) != "" && emptyEntry(c.NTP) {
		v.bad("--ntp %q: empty server name in the list", c.NTP)
	}
	v.positive("--ntp-interval", c.NTPInterval)
	v.positive("--ntp-max-offset", c.NTPMaxOffset)
	v.positive("--peer-interval", c.PeerInterval)
	v.positive("--peer-max-offset", c.PeerMaxOffset)
	if c.PeerSample < clockguard.MinPeerSample {
		v.bad("--peer-sample %d: want at least %d (one bad peer must stay one vote of several; the default is %d)",
			c.PeerSample, clockguard.MinPeerSample, clockguard.DefaultPeerSample)
	}
}

// logging checks the log flags and --shutdown-timeout.
func (v *validation) logging() {
	c := v.c
	if _, err := zerolog.ParseLevel(c.LogLevel); err != nil || c.LogLevel == "" {
		v.bad("--log-level %q: want trace, debug, info, warn or error", c.LogLevel)
	}
	if c.LogFormat != logFormatJSON && c.LogFormat != LogFormatConsole {
		v.bad("--log-format %q: want json or console", c.LogFormat)
	}
	v.positive("--shutdown-timeout", c.ShutdownTimeout)
}

// buildVersion is the version the binary was built as: Version's first
// word (Version is "v1.2.3 (go1.26.1)" from the main), "" when unset. It is
// what GET /clock, ZooKeeper's data and snowflaked_build_info carry.
func (c *Config) buildVersion() string {
	v, _, _ := strings.Cut(strings.TrimSpace(c.Version), " ")
	return v
}

// tlsFlags checks the TLS flags and loads their files once: a file that
// cannot be read or does not fit is named with its problem.
func (v *validation) tlsFlags() {
	c := v.c
	if (c.TLSCert == "") != (c.TLSKey == "") {
		v.bad("--tls-cert and --tls-key go together: give both (HTTPS) or neither (plain HTTP)")
		return
	}
	if c.TLSCert == "" {
		for _, f := range []struct{ name, value string }{
			{"--tls-client-ca", c.TLSClientCA}, {"--tls-ca", c.TLSCA},
			{"--tls-client-allow", c.TLSClientAllow}, {"--tls-admin-allow", c.TLSAdminAllow},
		} {
			if f.value != "" {
				v.bad("%s: only with --tls-cert and --tls-key (the API is plain HTTP without them)", f.name)
			}
		}
		return
	}
	if _, err := tlsfiles.LoadPair(c.TLSCert, c.TLSKey); err != nil {
		v.bad("--tls-cert %s, --tls-key %s: %v", c.TLSCert, c.TLSKey, err)
	}
	for _, f := range []struct{ name, file string }{{"--tls-client-ca", c.TLSClientCA}, {"--tls-ca", c.TLSCA}} {
		if f.file == "" {
			continue
		}
		if _, err := tlsfiles.LoadCA(f.file); err != nil {
			v.bad("%s %s: %v", f.name, f.file, err)
		}
	}
	for _, f := range []struct{ name, list string }{{"--tls-client-allow", c.TLSClientAllow}, {"--tls-admin-allow", c.TLSAdminAllow}} {
		if f.list == "" {
			continue
		}
		if c.TLSClientCA == "" {
			v.bad("%s: only with --tls-client-ca (without it clients present no certificate to name)", f.name)
		}
		if _, err := tlsfiles.ParseAllowList(f.list); err != nil {
			v.bad("%s: %v", f.name, err)
		}
	}
}
