#!/usr/bin/env bash
# `make scale`: what a cluster costs per node, measured with real processes.
# For each cluster size N in SCALE_NODES (default "32 64 96") it starts N
# snowflaked processes on 127.0.0.1 against one real standalone ZooKeeper,
# waits until all are in service, measures a steady window (SCALE_WINDOW,
# default 60s, after SCALE_SETTLE, default 10s): ZooKeeper requests per node
# per second (mntr), peer /time requests served per node per second
# (/metrics), CPU and RSS per node (/proc); then stops R = min(SCALE_RECYCLE,
# default 48, N) nodes, retires their keys and starts R new keys that must
# take their worker IDs over, and reports ZooKeeper requests per new key and
# the time until they serve. Extra flags for every node: SCALE_NODE_FLAGS.
#
# The table: bin/scale-report.md; the raw numbers: bin/scale-report.json;
# the nodes' logs: bin/scale-run/ (SCALE_OUT names another folder than bin).
# Not part of make test (the driver is TestScale in tests/scale, behind the
# build tag scale). Every process it starts is killed when it ends, Ctrl-C
# included.
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
	echo "scale: $*" >&2
	exit 1
}

for b in snowflaked snowflakectl; do
	[ -x "bin/$b" ] || die "bin/$b is missing: run make build first"
done

if [ -z "${ZK_CLASSPATH:-}" ] && [ -z "${ZOOKEEPER_HOME:-}" ] &&
	{ ! command -v java >/dev/null 2>&1 || [ ! -f /usr/share/java/zookeeper.jar ]; }; then
	if [ "$(id -u)" -eq 0 ]; then
		echo "scale: ZooKeeper is missing: apt-get install -y zookeeper" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends zookeeper
	else
		die "ZooKeeper (Debian package 'zookeeper', with Java) is needed: sudo apt-get update && sudo apt-get install -y zookeeper"
	fi
fi

# -count=1: always a fresh run. The test binary bounds each phase itself;
# -timeout is the last resort (it then dumps goroutines and exits, and the
# kernel kills every process it started).
out=${SCALE_OUT:-bin}
status=0
go test -tags scale -count=1 -run '^TestScale$' -timeout "${SCALE_TIMEOUT:-90m}" -v ./tests/scale/ || status=$?
if [ -f "$out/scale-report.md" ]; then
	echo
	cat "$out/scale-report.md"
	echo
	echo "scale: $out/scale-report.md, $out/scale-report.json; nodes' logs in $out/scale-run/"
fi
exit "$status"
