// Command snowflakectl is the operator's tool for snowflaked: decode IDs
// (and, with the ZooKeeper mode, inspect a cluster). See ctl.Commands.
package main

import (
	"os"

	"snowflaked/ctl"
)

func main() { os.Exit(ctl.Main(os.Args[1:], os.Stdout, os.Stderr)) }
