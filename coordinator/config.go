package coordinator

import (
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Defaults for the Config fields left zero (the --flag defaults).
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultRecycleAfter   = 24 * time.Hour
	DefaultReportInterval = 3 * time.Second
	DefaultZKFenceAhead   = 30 * time.Second
	defaultConnectTimeout = 10 * time.Second
)

// ErrInvalidConfig is wrapped by every Config validation error.
var ErrInvalidConfig = zkclient.ErrInvalidConfig

// Config configures a Coordinator. Zero durations take the Default* values
// (RecycleAfter's is the cluster's).
type Config struct {
	// Servers are the ZooKeeper addresses, "host:port" each (port 2181 when
	// omitted). Split a comma-separated --zk value before passing it.
	Servers []string
	// SessionTimeout is the ZooKeeper session timeout. The server clamps it
	// to 2–20 × its tickTime.
	SessionTimeout time.Duration
	// Cluster names the cluster: /snowflaked/<Cluster>.
	Cluster string
	// NodeKey identifies this node across restarts (--node-key, default the
	// advertised address). Any printable UTF-8 text up to 255 bytes.
	NodeKey string
	// Advertise is this node's HTTP address, host:port, written to the
	// forever, lease and alive znodes.
	Advertise string
	// Version is the version this node was built as, written to its
	// forever znode (informational: snowflakectl status shows it; ""
	// leaves it out).
	Version string
	// Auth is "user:password": every znode the cluster creates gets a digest
	// ACL (creator all, world read; the shared /snowflaked root also lets
	// anyone create, so other clusters can live beside this one).
	// "" gives open ACLs.
	Auth string
	// CreateCluster (--create-cluster) lets Claim create the cluster znode
	// when it does not exist. Without it a missing cluster is ErrNoCluster
	// and Claim writes nothing: a mistyped --cluster never starts a new
	// cluster beside the real one.
	CreateCluster bool
	// Layout is the ID layout; the cluster znode must hold the same.
	Layout snowflake.Layout
	// WorkerIDs is the cluster's --worker-id-range (zero: the whole worker
	// field). A cluster-wide setting recorded in the cluster znode by the
	// first node, like RecycleAfter: a node configured otherwise is
	// refused (ErrClusterMismatch). withDefaults resolves the zero value.
	WorkerIDs WorkerRange
	// RecycleAfter: a worker ID whose owner has no lease and has not
	// renewed its fence for this long may be taken over (--recycle-after).
	// A cluster-wide policy, recorded in the cluster znode (snowflakectl
	// cluster set changes it). Zero is "the cluster's": Claim uses the
	// value the cluster znode records when it claims (DefaultRecycleAfter
	// when it creates the cluster or the znode records none, and records
	// that). Set, it must equal the cluster's (ErrClusterMismatch
	// otherwise), so an operator's explicit value is never overridden. It
	// is not a safety bound: a recycler starts after the previous holder's
	// ZooKeeper fence whatever the clocks say.
	RecycleAfter time.Duration
	// ReportInterval is how often Run renews the ZooKeeper fence (and
	// reports last_ts in the same write). At most ZKFenceAhead/6, so several
	// renewals fit before the node leaves service for its fence.
	ReportInterval time.Duration
	// ZKFenceAhead is G (--zk-fence-ahead): each renewal moves this process's
	// ZooKeeper fence to now + G, and the node may issue only up to the fence
	// ZooKeeper acknowledged. It is how long a node keeps serving without
	// ZooKeeper; the zk_fence check takes it out of service once less than
	// G/3 is left.
	ZKFenceAhead time.Duration
	// ConnectTimeout bounds how long Claim (and ListWorkers) keep trying an
	// unreachable ZooKeeper before ErrZKUnavailable.
	ConnectTimeout time.Duration
	// Clock gives wall time for the znode data and monotonic time for the
	// silence check. nil means clock.NewSystem().
	Clock clock.Clock
	// Dial opens the ZooKeeper client; nil means zkconn.Dial (go-zookeeper).
	// Simulations pass an in-memory ZooKeeper's.
	Dial zkconn.Dialer
	// Log receives the coordinator's log lines; the ZooKeeper client's own
	// lines go to it at debug level. The zero Logger discards everything.
	Log zerolog.Logger
}

// withDefaults validates cfg and fills in the defaults.
func (cfg Config) withDefaults() (Config, error) {
	bad := func(format string, a ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	servers, err := zkclient.CheckServers(cfg.Servers)
	if err != nil {
		return bad("%v", err)
	}
	cfg.Servers = servers
	if err := zkclient.ValidateCluster(cfg.Cluster); err != nil {
		return bad("%v", err)
	}
	if err := zkclient.ValidateNodeKey(cfg.NodeKey); err != nil {
		return bad("%v", err)
	}
	if err := wire.CheckHostPort(cfg.Advertise); err != nil {
		return bad("advertise address: %v", err)
	}
	if cfg.Auth != "" {
		user, pass, ok := strings.Cut(cfg.Auth, ":")
		if !ok || user == "" || pass == "" {
			return bad("zk auth must be user:password with both parts non-empty")
		}
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
		min  time.Duration
	}{
		{"session timeout", &cfg.SessionTimeout, DefaultSessionTimeout, 100 * time.Millisecond},
		{"report interval", &cfg.ReportInterval, DefaultReportInterval, 10 * time.Millisecond},
		{"zk-fence-ahead", &cfg.ZKFenceAhead, DefaultZKFenceAhead, 60 * time.Millisecond},
		{"connect timeout", &cfg.ConnectTimeout, defaultConnectTimeout, 10 * time.Millisecond},
	} {
		switch {
		case *d.v < 0:
			return bad("%s %v is negative", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		case *d.v < d.min:
			return bad("%s %v is below %v", d.name, *d.v, d.min)
		}
	}
	switch {
	case cfg.RecycleAfter < 0:
		return bad("recycle-after %v is negative", cfg.RecycleAfter)
	case cfg.RecycleAfter > 0 && cfg.RecycleAfter < time.Millisecond:
		return bad("recycle-after %v is below %v", cfg.RecycleAfter, time.Millisecond)
	}
	if cfg.ReportInterval > cfg.ZKFenceAhead/6 {
		return bad("report interval %v must be at most a sixth of zk-fence-ahead %v, so several renewals fit before the node leaves service at a third of it", cfg.ReportInterval, cfg.ZKFenceAhead)
	}
	if cfg.Dial == nil {
		cfg.Dial = zkconn.Dial
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.NewSystem()
	}
	if err := cfg.Layout.Validate(clock.WallTime(cfg.Clock)); err != nil {
		return bad("%v", err)
	}
	if cfg.WorkerIDs, err = cfg.WorkerIDs.resolve(cfg.Layout); err != nil {
		return bad("%v", err)
	}
	return cfg, nil
}
