// Command snowflakectl is the operator's tool for snowflaked: decode IDs,
// show a cluster's workers from ZooKeeper (status) and probe an endpoint for
// health checks. See ctl.Commands.
package main

import (
	"os"

	"codeberg.org/snowflaked/snowflaked/internal/ctl"
)

// version is set at build time: -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctl.Version = version
	os.Exit(ctl.Main(os.Args[1:], os.Stdout, os.Stderr))
}
