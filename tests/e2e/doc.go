// Package e2e tests the built binaries (snowflaked, snowflaked with
// -tags chaos, snowflakectl) as real processes on 127.0.0.1: serving,
// restarts after SIGTERM and kill -9, cache-file refusals, environment
// variables, exit codes and the chaos clock endpoint; and, against real
// ZooKeeper servers (tests/zkharness), clusters: distinct worker IDs,
// restarts that keep the worker ID, a second process of a node key refused,
// ZooKeeper down at start, leader loss under load, outages and session
// expiry, and the peer clock check; GET /metrics (names, counters that move
// by exactly the traffic, the state gauge and rollback counters after a
// chaos rollback), recovery from a forward clock jump past the fence, and
// the status page of a 3-node cluster in headless Chromium (tests/chromium).
// TestMain builds the binaries once; every test is named TestIntegration_*.
package e2e
