// Package openapi holds the tests of docs/openapi.yaml, the OpenAPI 3
// document of the HTTP API: it is a valid document, it names every path of
// the server's route table and the node's own routes and no other, its
// error code enum is client/wire's codes, docs/api.md's endpoint table
// names the same paths, a real node's answers (ordinary and bad
// requests, standalone and in ZooKeeper mode) conform to it, and its
// security requirements are what a node with --api-tokens-file and a
// --require-token tag refuses and serves. It has no code of its own; see
// its _test.go files. lint/run.sh (make test) runs redocly lint and
// openapi-typescript with tsc --strict on the document.
package openapi
