#!/usr/bin/env bash
# gocyclo at a pinned version, installed into bin/tools by this script
# (through the Go module proxy) when missing: no function of either module,
# tests included, may be above cyclomatic complexity 25. A longer function
# is a table or a few named steps.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v0.6.0
LIMIT=25
BIN=$PWD/bin/tools
gc=$BIN/gocyclo
if [ ! -x "$gc" ] || [ "$(cat "$BIN/gocyclo.version" 2>/dev/null)" != "$VERSION" ]; then
	mkdir -p "$BIN"
	GOBIN=$BIN go install "github.com/fzipp/gocyclo/cmd/gocyclo@$VERSION"
	echo "$VERSION" >"$BIN/gocyclo.version"
fi
rc=0
out=$("$gc" -over "$LIMIT" $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')) || rc=$?
# gocyclo exits 1 both when it lists functions and when it could not read a
# file (it stops there, having checked nothing): only a list is a result.
if [ "$rc" -ne 0 ] && [ -z "$out" ]; then
	echo "gocyclo $VERSION failed (exit $rc): see its message above" >&2
	exit 1
fi
if [ -n "$out" ]; then
	echo "functions above cyclomatic complexity $LIMIT (gocyclo $VERSION):"
	echo "$out"
	exit 1
fi
