// Package openapi holds the tests of docs/openapi.yaml, the OpenAPI 3
// document of the HTTP API: it is a valid document, it names every path of
// the server's route table and the node's own routes and no other, its
// error code enum is client/wire's codes, docs/api.md's endpoint table
// names the same paths, and a real node's answers (ordinary and bad
// requests, standalone and in ZooKeeper mode) conform to it. It has no code
// of its own; see its _test.go files.
package openapi
