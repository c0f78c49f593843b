// Package docs holds tests that keep the documentation true to the code:
// the docs' flag table, metric families, endpoints, error codes and
// out-of-service reasons are checked against what the packages register,
// expose and declare, and every exported identifier of the module must have
// a doc comment. The wire contract the docs describe is written once, in
// client/wire: its values are checked not to be written again on either
// side of the wire. It has no code of its own; see its _test.go files.
package docs
