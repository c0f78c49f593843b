// Package conformance holds one test suite that every client of the
// repository runs against real nodes and a real ZooKeeper: the Go client,
// and the Java, Python and TypeScript clients under clients/. Each client is
// driven through a small driver program in its own language that speaks the
// line protocol of README.md; every assertion is here, written once.
package conformance
