package coordinator

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// dialZK is zkclient.Dial with the cluster's paths.
func dialZK(ctx context.Context, servers []string, cluster, auth string, timeout time.Duration, log zerolog.Logger, dial zkconn.Dialer) (zkclient.Client, paths, error) {
	z, err := zkclient.Dial(ctx, zkclient.Config{Servers: servers, Cluster: cluster, Auth: auth, Timeout: timeout, Log: log, Dial: dial})
	if err != nil {
		return zkclient.Client{}, paths{}, err
	}
	return z, newPaths(cluster), nil
}
