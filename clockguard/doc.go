// Package clockguard measures the clock: a wall/monotonic watcher, the
// clock_rollback check, NTP and peer rounds, and the readings /clock shows.
// Each measurement passes or fails a check of the node's health.Guard.
package clockguard
