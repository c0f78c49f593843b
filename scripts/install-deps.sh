#!/usr/bin/env bash
# Installs what `make test` needs beyond Go: ZooKeeper (and Java), chrony and
# faketime for the NTP tests, wrk for benchmarks, a C compiler for -race,
# Chromium (headless) for the status page's browser test, and Prometheus
# (promtool and the server) for deploy/'s alert and dashboard tests, and
# the toolchains of the clients in clients/: a JDK with JUnit 5 (Java),
# Python 3, Node.js with npm (TypeScript, and the OpenAPI lint).
# As root it installs the missing ones with apt-get; otherwise it says what
# is missing and how to install it, and carries on (tests that need a
# missing tool report it themselves).
set -euo pipefail

missing=()
have() { command -v "$1" >/dev/null 2>&1; }

if ! have java || [ ! -f /usr/share/java/zookeeper.jar ]; then missing+=(zookeeper); fi
have chronyd || [ -x /usr/sbin/chronyd ] || missing+=(chrony)
have faketime || missing+=(faketime)
have wrk || missing+=(wrk)
have gcc || missing+=(gcc)   # go test -race needs cgo
have git || missing+=(git)   # make lint and version stamps
[ -x /usr/bin/chromium ] || missing+=(chromium)   # headless: the status page's browser test
have promtool || missing+=(prometheus)            # deploy/: promtool rule tests and a real Prometheus
have javac || missing+=(default-jdk-headless)     # clients/java: javac and jar
[ -f /usr/share/java/junit-platform-console-standalone.jar ] || missing+=(junit5)   # clients/java's tests
have python3 || missing+=(python3)                # clients/python
have node || missing+=(nodejs)                    # clients/typescript, the OpenAPI lint
have npm || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing: ${missing[*]}" >&2
	echo "install-deps: install with: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
	exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
