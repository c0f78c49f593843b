// Package chaos is the fault-injection suite: real snowflaked
// processes built with -tags chaos, against a real ZooKeeper, while load
// generators call /id and /ids on every node and a Checker keeps every ID
// issued.
//
// The package's plain files hold the parts that need no process: the
// Checker (duplicates, order per sequential client and in real time per
// worker, no ID at or below one issued before a restart, documented 503
// reasons), the load generator, the seeded fault schedule and the run
// summary. The scenarios (files with the chaos build tag) build the chaos
// binary once in TestMain and are named TestIntegration_Chaos*:
//
//	go test -tags chaos -race -run Chaos ./tests/chaos/            # short: seconds per scenario
//	CHAOS_LONG=1 go test -tags chaos -race -run Chaos ./tests/chaos/ # long: minutes in all (make chaos)
//	CHAOS_SEED=42 ...                                              # replay a random schedule
package chaos
