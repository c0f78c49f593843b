package coordinator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// dialCluster is dialZK, then a check that the cluster exists. Readers
// beside the node (discovery, segment mode, snowflakectl segment) use it.
func dialCluster(ctx context.Context, servers []string, cluster, auth string, timeout time.Duration, log zerolog.Logger, dial zkconn.Dialer) (zkc, paths, error) {
	z, p, err := dialZK(ctx, servers, cluster, auth, timeout, log, dial)
	if err != nil {
		return zkc{}, paths{}, err
	}
	if ok, _, err := z.exists(ctx, p.cluster); err != nil || !ok {
		z.conn.Close()
		if err == nil {
			return zkc{}, paths{}, fmt.Errorf("cluster %q does not exist in ZooKeeper %s (start a node first)", cluster, strings.Join(servers, ","))
		}
		return zkc{}, paths{}, unavailable(err)
	}
	return z, p, nil
}

// dialZK checks the connection settings, opens a ZooKeeper session of its
// own (waiting up to timeout, default DefaultConnectTimeout) and adds the
// digest auth. The caller closes z.conn. A nil dial is zkconn.Dial.
func dialZK(ctx context.Context, servers []string, cluster, auth string, timeout time.Duration, log zerolog.Logger, dial zkconn.Dialer) (zkc, paths, error) {
	servers, err := checkServers(servers)
	if err != nil {
		return zkc{}, paths{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if err := validateCluster(cluster); err != nil {
		return zkc{}, paths{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if u, p, ok := strings.Cut(auth, ":"); auth != "" && (!ok || u == "" || p == "") {
		return zkc{}, paths{}, fmt.Errorf("%w: zk auth must be user:password", ErrInvalidConfig)
	}
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	if dial == nil {
		dial = zkconn.Dial
	}
	conn, err := dial(servers, zkconn.Options{SessionTimeout: max(timeout, 2*time.Second), Logger: zkLogger{log: log}})
	if err != nil {
		return zkc{}, paths{}, fmt.Errorf("%w: %v", ErrZKUnavailable, err)
	}
	if err := waitSession(ctx, conn, timeout, servers); err != nil {
		conn.Close()
		return zkc{}, paths{}, err
	}
	z := zkc{conn, timeout}
	if auth != "" {
		if _, err := call(ctx, timeout, func() (struct{}, error) { return struct{}{}, conn.AddAuth("digest", []byte(auth)) }); err != nil {
			conn.Close()
			return zkc{}, paths{}, fmt.Errorf("auth: %w", unavailable(err))
		}
	}
	return z, newPaths(cluster), nil
}
