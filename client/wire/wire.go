// Package wire is the contract between snowflaked's nodes and the programs
// that call them, written once: the znodes a client reads to find the
// nodes, the HTTP paths and query parameters it requests, the error codes
// and body of an error answer, and the text form of a UUID. The client and
// the server both build on it, so the two cannot drift apart; changing a
// value here changes what is on the wire.
//
// It imports nothing outside the standard library.
package wire
