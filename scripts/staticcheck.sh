#!/usr/bin/env bash
# staticcheck at a pinned version, installed into bin/tools by this script
# (through the Go module proxy) when missing; run on the server (both
# builds) and the client module.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v0.8.2
BIN=$PWD/bin/tools
sc=$BIN/staticcheck
if [ ! -x "$sc" ] || ! "$sc" -version 2>/dev/null | grep -q "${VERSION#v}"; then
	mkdir -p "$BIN"
	GOBIN=$BIN go install "honnef.co/go/tools/cmd/staticcheck@$VERSION"
fi
"$sc" ./...
"$sc" -tags chaos ./...
(cd client && "$sc" ./...)
