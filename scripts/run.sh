#!/usr/bin/env bash
# `make run`: one standalone snowflaked on 127.0.0.1 (worker 1, cache file in
# .run/), shows a few IDs and a decoded one, then keeps serving until Ctrl-C.
# Without a terminal on stdin (CI, scripts) it stops after the demo.
# RUN_PORT (default 8080) picks the port.
set -euo pipefail
cd "$(dirname "$0")/.."

port="${RUN_PORT:-8080}"
mkdir -p .run
log=.run/snowflaked.log

# GET over bash's /dev/tcp: no curl needed. Prints the body.
http_get() {
	local path=$1 resp
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3
	resp=$(cat <&3)
	exec 3<&-
	case "${resp%%$'\r'*}" in
	*" 200 "*) printf '%s\n' "${resp#*$'\r\n\r\n'}" ;;
	*) return 1 ;;
	esac
}

bin/snowflaked --worker-id 1 --listen "127.0.0.1:$port" --cache-file .run/cache.json \
	--log-format console 2>"$log" &
pid=$!
stop() {
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		wait "$pid" || true
	fi
}
trap stop EXIT
trap 'exit 0' INT TERM

for _ in $(seq 1 100); do # up to 10 s
	if http_get /readyz >/dev/null 2>&1; then break; fi
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "snowflaked exited; its log ($log):" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.1
done
if ! http_get /readyz >/dev/null; then
	echo "snowflaked not ready after 10 s; its log ($log):" >&2
	cat "$log" >&2
	exit 1
fi

echo "snowflaked (standalone, worker 1) serves on http://127.0.0.1:$port  (log: $log)"
echo
echo "GET /id:"
id=$(http_get /id)
echo "  $id"
echo "GET /ids?count=5:"
http_get '/ids?count=5' | sed 's/^/  /'
echo "GET /id?format=json:"
echo "  $(http_get '/id?format=json')"
echo
echo "bin/snowflakectl decode $id:"
bin/snowflakectl decode "$id" | sed 's/^/  /'
echo

if [ -t 0 ]; then
	echo "Serving until Ctrl-C. Try: curl 'http://127.0.0.1:$port/ids?count=3'"
	wait "$pid"
else
	echo "No terminal: stopping."
fi
