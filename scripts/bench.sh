#!/usr/bin/env bash
# make bench: in-process generator benchmarks and HTTP load with wrk, all in
# one run, printed as small tables. Ratios matter, not absolute numbers: the
# machine is shared and noisy, so compare only figures from the same run.
#   BENCH_DURATION (wrk, default 10s)  BENCH_ROUNDS (default 2)  BENCH_TIME (go, default 2s)
#   BENCH_CLIENTS (clients measured by tests/bench/clientsbench, default go,java,python,typescript)
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${BENCH_DURATION:-10s}
ROUNDS=${BENCH_ROUNDS:-2}
BT=${BENCH_TIME:-2s}
CONNS=${BENCH_CONNECTIONS:-64}

command -v wrk >/dev/null || { echo "bench: wrk not found (apt-get install -y wrk, or make deps)" >&2; exit 1; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

echo "== generator (go test -run '^\$' -bench . -benchtime $BT -cpu 2 ./snowflake/)"
go test -run '^$' -bench . -benchtime "$BT" -cpu 2 ./snowflake/ | tee "$tmp/go.txt" | grep -E '^(Benchmark|ok|PASS|FAIL)' || true
echo
awk '/^Benchmark/ { name=$1; sub(/-[0-9]+$/, "", name); ns=""; ids="";
       for (i=2;i<=NF;i++) { if ($(i)=="ns/op") ns=$(i-1); if ($(i)=="ids/s") ids=$(i-1) }
       printf "%-48s %12s ns/op %16s ids/s\n", name, ns, ids }' "$tmp/go.txt"
echo

echo "== HTTP: wrk -t1 -c$CONNS -d$DUR --latency, $ROUNDS rounds, bare fasthttp vs snowflaked, plain and HTTPS (same run)"
go build -o "$tmp/snowflaked" ./cmd/snowflaked
go build -o "$tmp/barehttp" ./tests/bench/barehttp
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
P1=$(freeport); P2=$(freeport); P3=$(freeport)
"$tmp/snowflaked" --worker-id 1 --listen "127.0.0.1:$P1" --cache-file "$tmp/cache.json" --log-level warn >"$tmp/sf.log" 2>&1 &
pids+=($!)
# The same node over HTTPS (--tls-cert: a throwaway self-signed ECDSA P-256
# certificate; wrk does not verify it, and keeps its connections alive).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/tls.key" -out "$tmp/tls.crt" >/dev/null 2>&1
"$tmp/snowflaked" --worker-id 2 --listen "127.0.0.1:$P3" --cache-file "$tmp/cache-tls.json" --log-level warn \
  --tls-cert "$tmp/tls.crt" --tls-key "$tmp/tls.key" >"$tmp/sf-tls.log" 2>&1 &
pids+=($!)
"$tmp/barehttp" --listen "127.0.0.1:$P2" >"$tmp/bare.log" 2>&1 &
pids+=($!)
for i in $(seq 1 100); do
  curl -fs "http://127.0.0.1:$P1/readyz" >/dev/null 2>&1 && curl -fs "http://127.0.0.1:$P2/" >/dev/null 2>&1 &&
    curl -fsk "https://127.0.0.1:$P3/readyz" >/dev/null 2>&1 && break
  [ "$i" = 100 ] && { echo "bench: servers did not become ready" >&2; cat "$tmp/sf.log" "$tmp/sf-tls.log" >&2; exit 1; }
  sleep 0.1
done

# run_wrk NAME URL: appends "NAME rps p50 p99" to results.
run_wrk() {
  local out
  out=$(wrk -t1 -c"$CONNS" -d"$DUR" --latency "$2")
  local rps p50 p99 errs
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  errs=$(awk '/Non-2xx or 3xx responses:/ {print $NF}' <<<"$out")
  echo "$1 $rps $p50 $p99 ${errs:-0}" >>"$tmp/http.txt"
}
for r in $(seq 1 "$ROUNDS"); do
  run_wrk bare "http://127.0.0.1:$P2/"
  run_wrk id "http://127.0.0.1:$P1/id"
  run_wrk idtls "https://127.0.0.1:$P3/id"
  run_wrk ids1000 "http://127.0.0.1:$P1/ids?count=1000"
done
awk '
  { n[$1]++; rps[$1]+=$2; if (n[$1]==1 || $2>best[$1]) { best[$1]=$2; p50[$1]=$3; p99[$1]=$4 }; err[$1]+=$5 }
  END {
    printf "%-22s %12s %10s %10s %8s\n", "endpoint", "req/s(mean)", "p50", "p99", "non-2xx"
    printf "%-22s %12.0f %10s %10s %8d\n", "bare fasthttp", rps["bare"]/n["bare"], p50["bare"], p99["bare"], err["bare"]
    printf "%-22s %12.0f %10s %10s %8d\n", "GET /id", rps["id"]/n["id"], p50["id"], p99["id"], err["id"]
    printf "%-22s %12.0f %10s %10s %8d\n", "GET /id over HTTPS", rps["idtls"]/n["idtls"], p50["idtls"], p99["idtls"], err["idtls"]
    printf "%-22s %12.0f %10s %10s %8d\n", "GET /ids?count=1000", rps["ids1000"]/n["ids1000"], p50["ids1000"], p99["ids1000"], err["ids1000"]
    printf "\n/id vs bare fasthttp: %.1f%% of its req/s\n", 100*rps["id"]/rps["bare"]
    printf "/id over HTTPS (keep-alive) vs plain /id: %.1f%% of its req/s\n", 100*rps["idtls"]/rps["id"]
    printf "/ids?count=1000: %.0f IDs/s\n", 1000*rps["ids1000"]/n["ids1000"]
  }' "$tmp/http.txt"

echo
echo "== client (module ./client) against the same node, in another process: tests/bench/clientbench, then its buffer benchmark"
go build -o "$tmp/clientbench" ./tests/bench/clientbench
"$tmp/clientbench" --addr "127.0.0.1:$P1" --duration "$DUR" --callers "$CONNS" | tee "$tmp/cb.txt"
(cd client && go test -run '^$' -bench 'NextFromBuffer|WakeCallers' -benchtime "$BT" -cpu 2 .) | tee "$tmp/buf.txt" | grep -E '^(Benchmark|ok|PASS|FAIL)' || true
ids1000=$(awk '$1=="ids1000" { s+=$2; n++ } END { if (n) printf "%.0f", 1000*s/n }' "$tmp/http.txt")
awk -v cap="$ids1000" '
  FNR==NR { v[$1]=$2; next }
  /^BenchmarkNextFromBuffer\/callers=1-/ { buf1=$3 } /^BenchmarkNextFromBuffer\/callers=64-/ { buf64=$3 }
  /^BenchmarkWakeCallers-/ { wake=$3 }
  END {
    printf "\n%-44s %14s %14s %10s\n", "client figure (one run)", "client", "baseline", "ratio"
    printf "%-44s %11.1f us %11.1f us %+8.1f us\n", "one caller, p50 per ID (Next vs GET /id)", v["latency_next_p50_us"], v["latency_plain_p50_us"], v["latency_added_us"]
    printf "%-44s %14.0f %14.0f %9.1fx\n", "'"$CONNS"' callers, IDs/s (Next vs GET /id)", v["throughput_next_ids_per_s"], v["throughput_plain_ids_per_s"], v["throughput_ratio"]
    printf "%-44s %14.0f %14.0f %9.0f%%\n", "prefetch " v["prefetch_size"] ", IDs/s (vs /ids?count=1000, wrk)", v["prefetch_next_ids_per_s"], cap, 100*v["prefetch_next_ids_per_s"]/cap
    printf "%-44s %11s ns %11s ns\n", "Next from a warm buffer (1 / 64 callers)", buf1, buf64
    printf "%-44s %11s ns\n", "floor: waking a parked caller, no network", wake
  }' "$tmp/cb.txt" "$tmp/buf.txt"

echo
echo "== segment mode: in-process take and GET /segment/{tag} vs GET /id through the router (same run)"
go test -run '^$' -bench 'Take' -benchtime "$BT" ./segment/ | tee "$tmp/seg.txt" | grep -E '^(Benchmark|ok|PASS|FAIL)' || true
go test -run '^$' -bench 'HandlerID$|HandlerSegment' -benchtime "$BT" ./server/ | tee -a "$tmp/seg.txt" | grep -E '^(Benchmark|ok|PASS|FAIL)' || true
awk '/^Benchmark/ { name=$1; sub(/-[0-9]+$/, "", name);
       for (i=2;i<=NF;i++) { if ($(i)=="ns/op") ns[name]=$(i-1); if ($(i)=="ns/ID") per[name]=$(i-1); if ($(i)=="zk-writes/M-IDs") w[name]=$(i-1) } }
     END {
       printf "\ntake from the buffer: %s ns/ID one at a time, %s ns/ID in batches of 100; ZooKeeper writes per million IDs: %s\n", per["BenchmarkTake/count=1"], per["BenchmarkTake/count=100"], w["BenchmarkTake/count=1"]
       printf "handler: GET /segment/{tag} %s ns/op, GET /id %s ns/op (layout 41/3/19), %s ns/op (41/10/12)\n", ns["BenchmarkHandlerSegment"], ns["BenchmarkHandlerID/layout=41/3/19"], ns["BenchmarkHandlerID/layout=41/10/12"]
     }' "$tmp/seg.txt"

echo
echo "== GET /id end to end in-process (fasthttp's in-memory listener): the node's server vs a bare fasthttp server, same run"
go test -run '^$' -bench 'ServeID' -benchtime "$BT" -cpu 1 ./server/ | tee "$tmp/serve.txt" | grep -E '^(Benchmark|ok|PASS|FAIL)' || true
awk '/^BenchmarkServeID\/server=bare/ { bare=$3 } /^BenchmarkServeID\/server=node\/layout=41\/3\/19/ { node=$3 }
     END { if (bare && node) printf "\nGET /id in-process: node %s ns/req, bare %s ns/req: %.1f%% of bare fasthttp'"'"'s req/s\n", node, bare, 100*bare/node }' "$tmp/serve.txt"

echo
echo "== the clients of clients/ and the Go client, each against one node, beside $CONNS callers (and one) doing plain GET /id on the language's own HTTP client: tests/bench/clientsbench"
go build -o "$tmp/godriver" ./tests/conformance/godriver
go run ./tests/bench/clientsbench --snowflaked "$tmp/snowflaked" --godriver "$tmp/godriver" --callers "$CONNS" \
  --clients "${BENCH_CLIENTS:-go,java,python,typescript}"
