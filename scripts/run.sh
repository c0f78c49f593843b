#!/usr/bin/env bash
# `make run`: a local cluster on loopback. It starts a standalone ZooKeeper on
# a free 127.0.0.1 port (data in .run/zk), creates the cluster "default"
# (snowflakectl cluster create) and starts three snowflaked nodes in
# ZooKeeper mode on 127.0.0.1:8081-8083 (RUN_BASE_PORT; cache files in
# .run/node-N), prints sample IDs from each node with their decoded worker
# IDs and `snowflakectl status`, then keeps running until Ctrl-C and stops
# everything (nodes first, with SIGTERM, then ZooKeeper). It prints each
# node's pid and command line, so one can be killed (kill -9) and restarted
# by hand: a node that exits is reported (which one, its exit status) and the
# others keep serving; the script stops only when every node it started has
# exited, or on Ctrl-C.
# Without a terminal on stdin (CI, scripts) it stops after the demo, unless
# RUN_KEEP=1. ZooKeeper's data stays in .run/zk, so the next `make run` gives
# every node its old worker ID back; `make clean` removes it.
#
# RUN_TLS=1: the same cluster over TLS, as docs/security.md walks through.
# The certificates are those of $RUN_DIR/certs (.run/certs), made there with
# `snowflakectl cert` when missing (a CA, node.crt for 127.0.0.1 and
# localhost, the clients ops and prometheus, ZooKeeper's key store); the
# API is HTTPS with mutual TLS (--tls-cert, --tls-key, --tls-client-ca),
# peers are checked over HTTPS, ZooKeeper takes TLS clients (mutual TLS) on
# a second port that the nodes and snowflakectl use (--zk-tls-*), and
# $RUN_DIR/prometheus.yml is deploy/prometheus/scrape-https.yml for these
# nodes. It prints the curl and snowflakectl lines that reach them.
# RUN_NODE_FLAGS="--flag value ...": extra flags of every node (split on
# spaces), also in the printed command lines.
#
# ZooKeeper's pid and the line that restarts it are printed. On exit the
# script stops the nodes it started, then ZooKeeper, unless a node started
# by hand on one of its cache files still runs: then ZooKeeper is left
# running for it, and the script says so and how to stop it.
#
# A second `make run` while one runs never touches the first: the first
# holds a lock on its directory (.run/lock, kept by every process it
# starts), so the second takes .run-2 (then .run-3, …) and, unless
# RUN_BASE_PORT is given, the next free ports (8091-8093, …). Given ports
# that are in use, or RUN_DIR naming a directory in use, it refuses before
# it writes anything, and says what to run instead.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

nodes=3
zk_jars=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar
tls=""
[ "${RUN_TLS:-}" = 1 ] && tls=1
# Extra flags of every node, split on spaces.
read -r -a node_flags <<<"${RUN_NODE_FLAGS:-}"

die() {
	echo "run: $*" >&2
	exit 1
}

# --- ZooKeeper installed? ------------------------------------------------------
have_zk() { command -v java >/dev/null 2>&1 && [ -f /usr/share/java/zookeeper.jar ] && [ -f /usr/share/java/slf4j-simple.jar ]; }
if ! have_zk; then
	if [ "$(id -u)" -eq 0 ]; then
		echo "run: ZooKeeper is missing: installing it (scripts/install-deps.sh)" >&2
		scripts/install-deps.sh
	fi
	have_zk || die "ZooKeeper (Debian package 'zookeeper', with Java) is needed: sudo apt-get update && sudo apt-get install -y zookeeper"
fi

# --- small helpers over bash's /dev/tcp (no curl or nc needed) -----------------
# port_busy PORT: something accepts connections on 127.0.0.1:PORT.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# http_get PORT PATH: prints the body of a 200 answer; fails otherwise.
# Under RUN_TLS, curl over HTTPS with the client certificate ops.
http_get() {
	local port=$1 path=$2 resp
	if [ -n "$tls" ]; then
		curl -sf --max-time 5 "${curl_tls[@]}" "https://127.0.0.1:$port$path"
		return
	fi
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3
	resp=$(timeout 5 cat <&3) || true
	exec 3<&-
	case "${resp%%$'\r'*}" in
	*" 200 "*) printf '%s\n' "${resp#*$'\r\n\r\n'}" ;;
	*) return 1 ;;
	esac
}

# zk_mode PORT: prints ZooKeeper's "Mode: …" line (srvr), fails while it does
# not serve (ruok would answer imok too early).
zk_mode() {
	local out
	exec 4<>"/dev/tcp/127.0.0.1/$1" || return 1
	printf 'srvr' >&4
	out=$(timeout 5 cat <&4) || true
	exec 4<&-
	grep -m1 '^Mode: ' <<<"$out"
}

# --- which directory and ports: decided before anything is written -----------
# in_use DIR: another make run holds DIR's lock.
in_use() { [ -e "$1/lock" ] && ! flock -n "$1/lock" true 2>/dev/null; }
# holder DIR: the pid of the make run that holds DIR, as it wrote it.
holder() { cat "$1/pid" 2>/dev/null || echo "?"; }
# ports_free BASE: BASE..BASE+nodes-1 are all free on 127.0.0.1.
ports_free() {
	local i
	for i in $(seq 0 $((nodes - 1))); do
		! port_busy $(($1 + i)) || return 1
	done
}
# free_base FROM: the first base port from FROM on (in steps of 10) whose
# ports are all free.
free_base() {
	local b=$1 _
	for _ in $(seq 1 50); do
		[ "$b" -le $((65535 - nodes)) ] || return 1
		if ports_free "$b"; then
			echo "$b"
			return 0
		fi
		b=$((b + 10))
	done
	return 1
}

command -v flock >/dev/null 2>&1 || die "flock (util-linux) is needed to keep two make runs apart"

# Directories and ports are free until a run holds or listens on them: two
# runs starting at once would pick the same ones. One run at a time,
# machine-wide, chooses its directory and ports and starts on them (the
# lock is not passed to what it starts; it is released once every node
# listens).
ports_lock=${TMPDIR:-/tmp}/snowflaked-make-run-ports.lock
exec 8>>"$ports_lock"
flock -w 180 8 || die "another make run has been starting for 3 minutes ($ports_lock): try again"
if [ -n "${RUN_DIR:-}" ]; then
	run_dir=$(realpath -m "$RUN_DIR")
	! in_use "$run_dir" || die "$run_dir is in use by another make run (pid $(holder "$run_dir")): give another RUN_DIR, or leave it out to get a free one"
else
	run_dir="$root/.run"
	n=1
	while in_use "$run_dir"; do
		[ "$n" -eq 1 ] && echo "run: .run is in use by another make run (pid $(holder "$run_dir")): this one uses a directory of its own" >&2
		n=$((n + 1))
		[ "$n" -le 20 ] || die "every directory from .run to .run-20 is in use"
		run_dir="$root/.run-$n"
	done
fi
rel_dir=${run_dir#"$root"/}

if [ -n "${RUN_BASE_PORT:-}" ]; then
	base_port=$RUN_BASE_PORT
	case $base_port in '' | *[!0-9]*) die "RUN_BASE_PORT=$base_port: want a port number" ;; esac
	[ "$base_port" -ge 1024 ] && [ "$base_port" -le $((65535 - nodes)) ] || die "RUN_BASE_PORT=$base_port: want 1024 to $((65535 - nodes))"
	if ! ports_free "$base_port"; then
		alt=$(free_base $((base_port + 10))) || die "127.0.0.1:$base_port-$((base_port + nodes - 1)) is in use, and no free ports were found above it"
		die "127.0.0.1:$base_port-$((base_port + nodes - 1)) is in use (another make run?): nothing was started or written; try RUN_BASE_PORT=$alt make run"
	fi
else
	base_port=$(free_base 8081) || die "no $nodes free ports from 127.0.0.1:8081 up: give RUN_BASE_PORT"
	[ "$base_port" -eq 8081 ] || echo "run: 127.0.0.1:8081-8083 are in use: the nodes take $base_port-$((base_port + nodes - 1))" >&2
fi

# The lock: this script and everything it starts hold it (they inherit fd 9).
mkdir -p "$run_dir"
exec 9>>"$run_dir/lock"
flock -n 9 || die "$run_dir was taken by another make run just now: run again"
echo $$ >"$run_dir/pid"

# --- processes and cleanup -----------------------------------------------------
# Children run in their own session (setsid) so that Ctrl-C reaches only this
# script: its trap stops the nodes first (they write their final fence to
# ZooKeeper) and ZooKeeper last.
detach=()
if command -v setsid >/dev/null 2>&1; then detach=(setsid); fi
zk_pid=""
node_pids=()
stop_all() {
	local pid
	for pid in "${node_pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${node_pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [ -n "$zk_pid" ] && kill -0 "$zk_pid" 2>/dev/null; then
		# A node restarted by hand holds its cache file's lock: keep its
		# ZooKeeper.
		local i by_hand=()
		for i in $(seq 1 "$nodes"); do
			if [ -e "$run_dir/node-$i/cache.json.lock" ] && ! flock -n "$run_dir/node-$i/cache.json.lock" true 2>/dev/null; then
				by_hand+=("$i")
			fi
		done
		if [ "${#by_hand[@]}" -gt 0 ]; then
			echo "run: ZooKeeper (pid $zk_pid) keeps running: node ${by_hand[*]}, started by hand, still uses it; stop it with: kill $zk_pid" >&2
			return
		fi
		echo "run: stopping ZooKeeper (pid $zk_pid)" >&2
		kill -TERM "$zk_pid" 2>/dev/null || true
		for _ in $(seq 1 100); do # up to 10 s, then SIGKILL
			kill -0 "$zk_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$zk_pid" 2>/dev/null || true
		wait "$zk_pid" 2>/dev/null || true
	fi
}
trap stop_all EXIT
trap 'echo; echo "Stopping…"; exit 0' INT TERM

# --- ZooKeeper -----------------------------------------------------------------
zk_port=""
for p in $(seq 21810 21899); do
	if [ "$p" -ge "$base_port" ] && [ "$p" -lt $((base_port + nodes)) ]; then
		continue # the nodes' ports
	fi
	if ! port_busy "$p"; then
		zk_port=$p
		break
	fi
done
[ -n "$zk_port" ] || die "no free port in 127.0.0.1:21810-21899 for ZooKeeper"

# --- RUN_TLS: certificates (snowflakectl cert), TLS port, TLS flags -----------
zk_tls_cfg=""
node_tls=()
node_tls_client=()
curl_tls=()
ctl_zk_tls=()
scheme=http
if [ -n "$tls" ]; then
	scheme=https
	command -v curl >/dev/null 2>&1 || die "RUN_TLS=1 needs curl (Debian: apt-get install -y curl)"
	zk_tls_port=""
	for p in $(seq $((zk_port + 1)) 21899); do
		if [ "$p" -ge "$base_port" ] && [ "$p" -lt $((base_port + nodes)) ]; then
			continue
		fi
		if ! port_busy "$p"; then
			zk_tls_port=$p
			break
		fi
	done
	[ -n "$zk_tls_port" ] || die "no free port in 127.0.0.1:$((zk_port + 1))-21899 for ZooKeeper's TLS port"
	certs="$rel_dir/certs"
	cert_made=""
	make_cert() { # FILE COMMAND...: runs snowflakectl COMMAND when FILE is missing
		local file=$1
		shift
		[ -e "$certs/$file" ] && return 0
		[ -n "$cert_made" ] || echo "Certificates in $certs (snowflakectl cert):"
		cert_made=1
		echo "  bin/snowflakectl $*"
		bin/snowflakectl "$@" | sed 's/^/    /' || die "bin/snowflakectl $* failed"
	}
	make_cert ca.crt cert create-ca --dir "$certs"
	make_cert node.crt cert create-node --dir "$certs" --hosts 127.0.0.1,localhost
	make_cert ops.crt cert create-client --dir "$certs" ops
	make_cert prometheus.crt cert create-client --dir "$certs" prometheus
	make_cert zookeeper-keystore.pem cert create-zk --dir "$certs" --hosts 127.0.0.1 --secure-port "$zk_tls_port"
	[ -n "$cert_made" ] || echo "Certificates: $certs (made before; delete the directory for new ones)"
	for f in ca.crt node.crt node.key ops.crt ops.key prometheus.crt prometheus.key zookeeper-keystore.pem; do
		[ -e "$certs/$f" ] || die "$certs/$f is missing: remove $certs to make every certificate again"
	done
	abs_certs="$run_dir/certs"
	# The TLS port of ZooKeeper, mutual TLS; the plain port stays on
	# 127.0.0.1 for the readiness check (srvr). Netty's codec, resolver and
	# native-unix jars are not on zookeeper.jar's classpath (docs/security.md).
	zk_tls_cfg="secureClientPort=$zk_tls_port
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=$abs_certs/zookeeper-keystore.pem
ssl.keyStore.type=PEM
ssl.trustStore.location=$abs_certs/ca.crt
ssl.trustStore.type=PEM
ssl.clientAuth=need"
	for j in netty-codec netty-resolver netty-transport-native-unix-common; do
		[ -f "/usr/share/java/$j.jar" ] || die "/usr/share/java/$j.jar is missing: ZooKeeper's TLS port needs Netty (Debian: apt-get install -y zookeeper)"
		zk_jars="$zk_jars:/usr/share/java/$j.jar"
	done
	node_tls=(--tls-cert "$certs/node.crt" --tls-key "$certs/node.key" --tls-client-ca "$certs/ca.crt"
		--zk-tls-ca "$certs/ca.crt" --zk-tls-cert "$certs/node.crt" --zk-tls-key "$certs/node.key")
	node_tls_client=(--tls-ca "$certs/ca.crt" --tls-cert "$certs/ops.crt" --tls-key "$certs/ops.key")
	curl_tls=(--cacert "$certs/ca.crt" --cert "$certs/ops.crt" --key "$certs/ops.key")
	ctl_zk_tls=(--zk-tls-ca "$certs/ca.crt" --zk-tls-cert "$certs/ops.crt" --zk-tls-key "$certs/ops.key")
fi

zk_dir="$run_dir/zk"
mkdir -p "$zk_dir/data"
cat >"$zk_dir/zoo.cfg" <<EOF
tickTime=1000
dataDir=$zk_dir/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,conf
${zk_tls_cfg}
EOF
(cd "$zk_dir" && exec "${detach[@]}" java -Xmx256m -cp "$zk_jars" org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg) \
	>"$zk_dir/zookeeper.log" 2>&1 8>&- &
zk_pid=$!
mode=""
for _ in $(seq 1 300); do # up to 30 s
	if mode=$(zk_mode "$zk_port" 2>/dev/null); then break; fi
	kill -0 "$zk_pid" 2>/dev/null || { tail -n 30 "$zk_dir/zookeeper.log" >&2; die "ZooKeeper exited; its log: $zk_dir/zookeeper.log"; }
	sleep 0.1
done
[ -n "$mode" ] || { tail -n 30 "$zk_dir/zookeeper.log" >&2; die "ZooKeeper not serving after 30 s; its log: $zk_dir/zookeeper.log"; }
zk="127.0.0.1:$zk_port"
zk_restart="(cd $(printf '%q' "$zk_dir") && java -Xmx256m -cp $zk_jars org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg) >>$(printf '%q' "$zk_dir/zookeeper.log") 2>&1 &"
if [ -n "$tls" ]; then
	echo "ZooKeeper ($mode) serves TLS clients (mutual TLS) on 127.0.0.1:$zk_tls_port, plain on $zk (readiness, local tools)  (data and log: $rel_dir/zk)"
	zk="127.0.0.1:$zk_tls_port"
else
	echo "ZooKeeper ($mode) serves on $zk  (data and log: $rel_dir/zk)"
fi
echo "  pid $zk_pid; to restart it by hand: $zk_restart"

# --- the cluster, created on purpose -------------------------------------------
# Nodes never create a cluster by themselves (a mistyped --cluster would
# start a new one): the cluster is created here, once; on the next make run
# (same .run/zk) the command finds it with the same settings and says so.
bin/snowflakectl cluster create default --zk "$zk" "${ctl_zk_tls[@]}" | sed 's/^/  /' || die "snowflakectl cluster create default failed"

# --- three snowflaked nodes ----------------------------------------------------
# node_cmd N: sets cmd to node N's command line (run from $root).
# node_line N: prints it, quoted for a shell, to restart the node by hand.
node_cmd() { cmd=(bin/snowflaked --zk "$zk" --listen "127.0.0.1:$((base_port + $1 - 1))" --cache-file "$rel_dir/node-$1/cache.json" "${node_tls[@]}" "${node_flags[@]}"); }
node_line() {
	node_cmd "$1"
	printf '%q ' "${cmd[@]}"
	printf '2>>%q\n' "$rel_dir/node-$1.log"
}
for i in $(seq 1 "$nodes"); do
	mkdir -p "$run_dir/node-$i"
	node_cmd "$i"
	"${detach[@]}" "${cmd[@]}" 2>"$run_dir/node-$i.log" 8>&- &
	node_pids+=($!)
done
# A node whose previous run was killed removes that run's lease at once (same
# cache file) and serves once the clock passes the file's fence (--fence-ahead).
for i in $(seq 1 "$nodes"); do
	port=$((base_port + i - 1))
	pid=${node_pids[$((i - 1))]}
	ready=""
	for _ in $(seq 1 600); do # up to 60 s
		kill -0 "$pid" 2>/dev/null || { cat "$run_dir/node-$i.log" >&2; die "node $i exited; its log: $rel_dir/node-$i.log"; }
		if http_get "$port" /readyz >/dev/null 2>&1; then
			ready=1
			break
		fi
		sleep 0.1
	done
	[ -n "$ready" ] || { tail -n 30 "$run_dir/node-$i.log" >&2; die "node $i not in service after 60 s; its log: $rel_dir/node-$i.log"; }
done

# Everything listens: the next make run sees these ports busy.
flock -u 8
exec 8>&-

echo
for i in $(seq 1 "$nodes"); do
	port=$((base_port + i - 1))
	echo "node $i serves on $scheme://127.0.0.1:$port  (log: $rel_dir/node-$i.log, cache: $rel_dir/node-$i/cache.json)"
	echo "  pid ${node_pids[$((i - 1))]}: $(node_line "$i")"
done
echo "(each node's command line, run from $root: it restarts that node by hand)"
if [ -n "$tls" ]; then
	# deploy/prometheus/scrape-https.yml for these nodes and certificates.
	shipped=deploy/prometheus/scrape-https.yml
	if [ -f "$shipped" ]; then
		targets=""
		for i in $(seq 1 "$nodes"); do targets="$targets${targets:+, }\"127.0.0.1:$((base_port + i - 1))\""; done
		{
			echo "# $shipped for make run's nodes ($rel_dir/certs); a scrape every 2 s for practice"
			printf 'global:\n  scrape_interval: 2s\n'
			sed -e "s|/etc/prometheus/snowflaked/|$abs_certs/|" -e "s|targets: \[.*\]|targets: [$targets]|" "$shipped"
		} >"$run_dir/prometheus.yml"
		echo "Prometheus over HTTPS: $rel_dir/prometheus.yml ($shipped with these nodes and $certs/prometheus.crt)"
	fi
fi
echo
for i in $(seq 1 "$nodes"); do
	port=$((base_port + i - 1))
	ids=$(http_get "$port" '/ids?count=3') || die "GET /ids from node $i failed"
	echo "GET $scheme://127.0.0.1:$port/ids?count=3"
	for id in $ids; do
		# snowflakectl decode --json: {"id":…,"timestamp_ms":…,"time":"…","worker_id":N,"sequence":N}
		d=$(bin/snowflakectl decode --json "$id")
		worker=$(sed -n 's/.*"worker_id":\([0-9]*\).*/\1/p' <<<"$d")
		seq=$(sed -n 's/.*"sequence":\([0-9]*\).*/\1/p' <<<"$d")
		time=$(sed -n 's/.*"time":"\([^"]*\)".*/\1/p' <<<"$d")
		printf '  %s  worker %s  sequence %s  %s\n' "$id" "$worker" "$seq" "$time"
	done
done
echo
ctl_q=$(printf ' %q' "${ctl_zk_tls[@]}" "${node_tls_client[@]}")
curl_q=$(printf ' %q' "${curl_tls[@]}")
[ -n "$tls" ] || ctl_q=""
echo "bin/snowflakectl status --zk $zk$ctl_q"
bin/snowflakectl status --zk "$zk" "${ctl_zk_tls[@]}" "${node_tls_client[@]}" | sed 's/^/  /'
echo

# --- segment mode: short dense IDs of a tag ---------------------------------------
# The tag stays in ZooKeeper's data: the next run finds it (exit 1 "tag exists" is fine).
bin/snowflakectl segment create demo --zk "$zk" "${ctl_zk_tls[@]}" --start 1000 --step 100 --description "make run demo" 2>/dev/null |
	sed 's/^/  /' || echo "  tag \"demo\" exists already (kept in $rel_dir/zk)"
for i in $(seq 1 "$nodes"); do
	port=$((base_port + i - 1))
	for _ in $(seq 1 100); do # segment mode opens its own ZooKeeper session
		http_get "$port" /readyz/segment >/dev/null 2>&1 && break
		sleep 0.1
	done
	ids=$(http_get "$port" '/segment/demo?count=3') || die "GET /segment/demo from node $i failed"
	echo "GET $scheme://127.0.0.1:$port/segment/demo?count=3 -> $(echo $ids)"
done
echo "bin/snowflakectl segment status demo --zk $zk${ctl_q% --tls-ca*}"
bin/snowflakectl segment status demo --zk "$zk" "${ctl_zk_tls[@]}" | sed 's/^/  /'
echo

if [ -t 0 ] || [ "${RUN_KEEP:-}" = 1 ]; then
	echo "Running until Ctrl-C. Try:"
	if [ -n "$tls" ]; then
		echo "  curl${curl_q} 'https://127.0.0.1:$base_port/ids?count=3'"
		echo "  curl${curl_q} https://127.0.0.1:$base_port/clock"
		echo "  curl${curl_q} https://127.0.0.1:$base_port/segment/demo"
		echo "  bin/snowflakectl status --zk $zk$ctl_q"
		echo "  bin/snowflakectl get --servers 127.0.0.1:$base_port$(printf ' %q' "${node_tls_client[@]}")"
		echo "  prometheus --config.file=$rel_dir/prometheus.yml --storage.tsdb.path=$rel_dir/prometheus --web.listen-address=127.0.0.1:9090"
	else
		echo "  curl 'http://127.0.0.1:$base_port/ids?count=3'"
		echo "  curl http://127.0.0.1:$base_port/clock"
		echo "  curl http://127.0.0.1:$base_port/segment/demo"
		echo "  bin/snowflakectl status --zk $zk"
	fi
	echo "  kill -9 ${node_pids[0]}    # node 1 dies: reported here, nodes 2 and 3 keep serving; restart it with its command line above"
	# A node that exits is reported; the others keep serving. Once every
	# node it started has exited, ZooKeeper stays until Ctrl-C (the trap).
	alive=("${node_pids[@]}")
	while [ "${#alive[@]}" -gt 0 ]; do
		# Once a second: each node that has exited since is reported
		# (several may die together), with the status its wait gives.
		sleep 1 &
		wait $! || true
		next=() left=${#alive[@]}
		for dead in "${alive[@]}"; do
			if kill -0 "$dead" 2>/dev/null; then
				next+=("$dead")
				continue
			fi
			st=0 left=$((left - 1))
			wait "$dead" 2>/dev/null || st=$?
			for i in $(seq 1 "$nodes"); do
				[ "${node_pids[$((i - 1))]}" = "$dead" ] && break
			done
			how="exit status $st"
			[ "$st" -gt 128 ] && how="$how (killed by SIG$(kill -l $((st - 128)) 2>/dev/null || echo $((st - 128))))"
			echo "run: node $i (pid $dead, $scheme://127.0.0.1:$((base_port + i - 1))) exited: $how; its log: $rel_dir/node-$i.log; $left of $nodes nodes still run" >&2
			echo "run: to restart it by hand (from $root): $(node_line "$i")" >&2
		done
		alive=("${next[@]}")
	done
	# ZooKeeper stays for nodes restarted by hand (their command lines are
	# above) until Ctrl-C; make run ends by itself only when it ends.
	echo "run: every node it started has exited (see $rel_dir/node-*.log); ZooKeeper (pid $zk_pid) keeps running for nodes you restart by hand: Ctrl-C stops it" >&2
	while kill -0 "$zk_pid" 2>/dev/null; do
		sleep 1 &
		wait $! || true
	done
	echo "run: ZooKeeper (pid $zk_pid) exited; its log: $zk_dir/zookeeper.log" >&2
	exit 1
else
	echo "No terminal: stopping."
fi
