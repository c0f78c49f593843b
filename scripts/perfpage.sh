#!/usr/bin/env bash
# scripts/perfpage.sh (make perf-page, and the end of make bench): writes
# docs/performance.md, the generator against bwmarrin/snowflake and
# sony/sonyflake v2, from alternating runs of one test binary (ours, peer,
# ours, peer, ...): the median time per ID of each, and the median and spread
# (min-max) of the rounds' ratios. With PERF_HTTP, the output of a
# scripts/bench.sh run (make bench saves it), the page also has its HTTP rows.
#   PERF_ROUNDS (default 5)  PERF_BENCHTIME (default 1s)
#   PERF_CPUS (default "1,N" on N cores)  PERF_OUT (default docs/performance.md)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${PERF_OUT:-docs/performance.md}
ROUNDS=${PERF_ROUNDS:-5}
BT=${PERF_BENCHTIME:-1s}
NPROC=$(nproc)
if [ "$NPROC" -gt 1 ]; then CPUS=${PERF_CPUS:-1,$NPROC}; else CPUS=${PERF_CPUS:-1}; fi
HTTP=${PERF_HTTP:-}
[[ $CPUS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "perfpage: PERF_CPUS must be a list like 1,2, not '$CPUS'" >&2; exit 2; }
case "$ROUNDS" in '' | *[!0-9]* | 0) echo "perfpage: PERF_ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2 ;; esac
[ -z "$HTTP" ] || [ -r "$HTTP" ] || { echo "perfpage: PERF_HTTP=$HTTP is not a readable file" >&2; exit 2; }

# The rows: peer;cpus ("1": -cpu 1 only, "all": every PERF_CPUS);ours;peer's benchmark;what the row measures.
ROWS=(
  "bwmarrin/snowflake;1;BenchmarkOurs_Loop_41_0_22;BenchmarkBwmarrin_Loop_41_0_22;plain loop on one goroutine, layout 41/0/22 (never runs out of sequence)"
  "bwmarrin/snowflake;all;BenchmarkOurs_Next_41_0_22;BenchmarkBwmarrin_Generate_41_0_22;b.RunParallel, layout 41/0/22"
  "bwmarrin/snowflake;all;BenchmarkOurs_Next_41_10_12;BenchmarkBwmarrin_Generate_41_10_12;b.RunParallel, layout 41/10/12: both capped at 4096 IDs/ms (244 ns/ID)"
  "sony/sonyflake v2;all;BenchmarkOurs_Next_41_10_12;BenchmarkSonyflakeV2_NextID_39_16_8_1ms;b.RunParallel; sonyflake v2 fixes its bits at 39/16/8: 1 ms ticks cap it at 256 IDs/ms (3.9 us/ID), ours at 4096"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$OUT.tmp"' EXIT
go test -c -o "$tmp/snowflake.test" ./snowflake/

# nsop NAME CPU: one run of a benchmark, its ns/op.
nsop() {
  local out v
  out=$("$tmp/snowflake.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime "$BT" -test.cpu "$2" 2>&1) || true
  v=$(awk '/^Benchmark/ { print $3; exit }' <<<"$out")
  [ -n "$v" ] || { printf 'perfpage: %s at -cpu %s gave no result (renamed?):\n%s\n' "$1" "$2" "$out" >&2; exit 1; }
  echo "$v"
}

echo "perfpage: $ROUNDS alternating rounds, -benchtime $BT, -cpu $CPUS" >&2
for r in $(seq 1 "$ROUNDS"); do
  for cpu in ${CPUS//,/ }; do
    for i in "${!ROWS[@]}"; do
      IFS=';' read -r _ cpus ours peer _ <<<"${ROWS[$i]}"
      [ "$cpus" = all ] || [ "$cpu" = 1 ] || continue
      o=$(nsop "$ours" "$cpu")
      p=$(nsop "$peer" "$cpu")
      echo "$i $cpu $o $p" >>"$tmp/runs.txt"
    done
  done
  echo "perfpage: round $r of $ROUNDS done" >&2
done

# stats ROW CPU: "ours-median peer-median ratio-median ratio-min ratio-max n" (ratio: peer / ours).
stats() {
  awk -v row="$1" -v cpu="$2" '
    function median(a, n,   i, j, t) {
      for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
      return (n % 2) ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
    }
    $1 == row && $2 == cpu { n++; o[n] = $3; p[n] = $4; q[n] = $4 / $3 }
    END {
      if (!n) exit 1
      mo = median(o, n); mp = median(p, n); mq = median(q, n)
      printf "%.1f %.1f %.2f %.2f %.2f %d\n", mo, mp, mq, q[1], q[n], n
    }' "$tmp/runs.txt"
}

cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
{
  cat <<EOF
# Performance

<!-- Written by scripts/perfpage.sh: do not edit by hand. -->

How fast snowflaked's generator issues IDs against the Go libraries a user would pick instead, measured
on one machine in one run. Regenerate this page with \`make perf-page\` (the generator rows) or
\`make bench\` (every benchmark, then this page with its HTTP rows); \`scripts/perfpage.sh\` writes it
(\`PERF_ROUNDS\`, \`PERF_BENCHTIME\`, \`PERF_CPUS\`; \`PERF_HTTP\` names a saved \`scripts/bench.sh\` output).

## Machine

| | |
|---|---|
| cores (\`nproc\`) | $NPROC |
| CPU (/proc/cpuinfo) | ${cpu_model:-unknown} |
| date | $(date -u +%Y-%m-%dT%H:%MZ) |
| Go | $(go env GOVERSION) |
| method | $ROUNDS alternating rounds (ours, peer, ours, peer, ...) of one test binary, \`-benchtime $BT\` |

Figures from a machine shared with other work are noisy: compare only figures of the same run, and
read the spread before the median.

## Generator

Each row runs our benchmark and the peer's alternately. ns/ID is the median over the rounds; the
ratio is the peer's time per ID divided by ours in the same round (above 1: ours is faster), its
median and, as the spread, its lowest and highest round. The command reproduces the row's figures
(run it a few times: it does not alternate).

| peer | ours | peer's benchmark | -cpu | ours ns/ID | peer ns/ID | ratio | spread | what it measures | command |
|---|---|---|---|---|---|---|---|---|---|
EOF
  for cpu in ${CPUS//,/ }; do
    for i in "${!ROWS[@]}"; do
      IFS=';' read -r peerName cpus ours peer what <<<"${ROWS[$i]}"
      [ "$cpus" = all ] || [ "$cpu" = 1 ] || continue
      read -r mo mp mq lo hi n < <(stats "$i" "$cpu") || true
      [ -n "${n:-}" ] || { echo "perfpage: no runs of row $i at -cpu $cpu" >&2; exit 1; }
      printf '| %s | `%s` | `%s` | %s | %s | %s | %s | %s–%s | %s | `go test -run '"'"'^$'"'"' -bench '"'"'^(%s\\|%s)$'"'"' -benchtime %s -cpu %s ./snowflake/` |\n' \
        "$peerName" "$ours" "$peer" "$cpu" "$mo" "$mp" "$mq" "$lo" "$hi" "$what" "$ours" "$peer" "$BT" "$cpu"
    done
  done
  echo
  if [ -n "$HTTP" ]; then
    echo "## HTTP"
    echo
    echo "From the \`scripts/bench.sh\` output in $HTTP (\`make bench\`): wrk against a node and a bare fasthttp"
    echo "server on the same machine, the means of its \`BENCH_ROUNDS\` rounds (it prints no spread). The ratio"
    echo "is ours' requests per second divided by the peer's (the peer's time per request over ours)."
    echo
    echo "That run: \`$(grep -m1 '^== HTTP' "$HTTP" | sed 's/^== HTTP: //')\`."
    echo
    echo "| peer | ours | ours req/s | peer req/s | ratio | spread | command |"
    echo "|---|---|---|---|---|---|---|"
    awk '
      /^bare fasthttp / { bare = $(NF-3) }
      /^GET \/id / && !/HTTPS|in-process/ { id = $(NF-3) }
      /^GET \/id over HTTPS / { tls = $(NF-3) }
      /^GET \/ids\?count=1000 / { ids = $(NF-3) }
      /^GET \/id in-process: / { for (i = 1; i <= NF; i++) { if ($i == "node") node = $(i+1); if ($i == "bare" && ipbare == "") ipbare = $(i+1) } }
      function row(peer, ours, o, p, cmd) {
        if (o > 0 && p > 0) printf "| %s | %s | %.0f | %.0f | %.2f | not measured (means only) | %s |\n", peer, ours, o, p, o / p, cmd
      }
      END {
        row("bare fasthttp (`tests/bench/barehttp`)", "`GET /id`", id, bare, "`make bench`")
        row("plain `GET /id` on the same node", "`GET /id` over HTTPS (keep-alive)", tls, id, "`make bench`")
        if (node > 0 && ipbare > 0)
          printf "| bare fasthttp, in-process (`BenchmarkServeID`) | `GET /id` in-process | %.0f | %.0f | %.2f | one run | `go test -run '"'"'^$'"'"' -bench ServeID -cpu 1 ./server/` |\n", 1e9 / node, 1e9 / ipbare, ipbare / node
        if (ids > 0) printf "\n`GET /ids?count=1000`: %.0f IDs/s (no peer).\n", 1000 * ids
        if (!(id > 0 && bare > 0)) print "\nThe wrk table was not found in the output given: no wrk rows."
      }' "$HTTP"
  else
    cat <<EOF
## HTTP: not measured by this page yet

This run had no \`scripts/bench.sh\` output (\`PERF_HTTP\`), so the page lacks: \`GET /id\` against a bare
fasthttp server (wrk), \`GET /id\` over HTTPS, \`GET /ids?count=1000\` in IDs/s, and the in-process
\`GET /id\` against bare fasthttp (\`BenchmarkServeID\`). \`make bench\` measures them and writes this page
with them.
EOF
  fi
  cat <<'EOF'

## Not measured by this page yet

- Other ID services over the network (HTTP peers other than a bare fasthttp server).
- The Go client (`make bench` prints it; [client.md](client.md#performance)) and the clients of
  `clients/` ([clients.md](clients.md#performance)).
EOF
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT" # atomically: a failed run leaves the old page
echo "perfpage: wrote $OUT" >&2
