#!/usr/bin/env bash
# Server cost per decision, counted not timed: instructions executed inside
# EVALSHA by redis-server (valgrind --tool=callgrind, collecting only inside
# `evalShaCommand`), floodgate's script vs the seed's script of the same
# algorithm, same keys, same number of calls. Deterministic: unlike
# `usec_per_call`, it does not move when other processes share the cores.
#
#   benches/lua_cost.sh                 # all six algorithms, admit and deny (~5 min)
#   benches/lua_cost.sh gcra admit      # one row
#   CALLS=5000 benches/lua_cost.sh      # fewer calls (faster, same per-call figure)
#
# Needs redis-server, redis-benchmark, redis-cli, valgrind (callgrind_annotate,
# callgrind_control). Starts its own servers on free loopback ports.
#
# floodgate's script is rebuilt from lua/ in the order src/algorithm/spec.rs
# includes the files, with the ARGV `Limiter::check` sends (see
# `cargo run --release --example loadgen`, which captures them with MONITOR).
# The seed gets `now` from the client, as it did; floodgate reads Redis TIME.
# `admit`: limit 1000 per second over 10 000 keys (every call admitted);
# `deny`: limit 1 per hour, every key spent by a warm-up before counting.
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS=${CALLS:-20000}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The script as the crate builds it.
sed -n '/include_str!("..\/..\/lua\/prelude.lua")/,/^ *);/p' src/algorithm/spec.rs |
  grep -o 'lua/[a-z_]*\.lua' | while read -r f; do cat "$f"; done >"$WORK/floodgate.lua"

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# ir_per_call NAME SCRIPT WARM ARGS... : instructions per EVALSHA of SCRIPT.
ir_per_call() {
  local name=$1 file=$2 warm=$3
  shift 3
  local port out pid sha
  port=$(free_port)
  out="$WORK/$name.cg"
  # Instrumentation off until the counted calls: the warm-up runs faster.
  valgrind --tool=callgrind --instr-atstart=no --toggle-collect=evalShaCommand --callgrind-out-file="$out" \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$WORK/$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
  sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$file")")
  if [ "$warm" -gt 0 ]; then
    redis-benchmark -p "$port" -c 4 -P 16 -n "$warm" -r 10000 EVALSHA "$sha" 1 "$@" >/dev/null 2>&1
  fi
  callgrind_control -i on "$pid" >/dev/null 2>&1
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  redis-benchmark -p "$port" -c 4 -P 16 -n "$CALLS" -r 10000 EVALSHA "$sha" 1 "$@" >/dev/null 2>&1
  local calls
  calls=$(redis-cli -p "$port" INFO commandstats | tr -d '\r' | grep '^cmdstat_evalsha:' |
    sed 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/')
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  local ir
  ir=$(callgrind_annotate "$out" 2>/dev/null | grep 'PROGRAM TOTALS' | awk '{gsub(",","",$1); print $1}')
  echo $((ir / calls))
}

NOW=$(($(date +%s%N) / 1000000))
row() {
  local alg=$1 traffic=$2 tag seed p1 p2 s1 s2 warm=0
  case $alg in
    fixed_window) tag=fw seed=seed_fixed_window ;;
    sliding_log) tag=sl seed=seed_sliding_log ;;
    sliding_window) tag=sw seed=seed_sliding_window ;;
    token_bucket) tag=tb seed=seed_token_bucket ;;
    leaky_bucket) tag=lb seed=seed_token_bucket ;;
    gcra) tag=gcra seed=seed_token_bucket ;;
  esac
  if [ "$traffic" = admit ]; then
    case $tag in
      tb | lb) p1=1000 p2=1000 ;;
      gcra) p1=1000 p2=1 ;;
      *) p1=1000 p2=1000 ;;
    esac
    s1=1000 s2=1000
  else
    warm=100000
    case $tag in
      tb | lb) p1=1 p2=0.0002777777777777778 ;;
      *) p1=1 p2=3600000 ;;
    esac
    s1=1
    case $seed in seed_token_bucket) s2=0.0002777777777777778 ;; *) s2=3600000 ;; esac
  fi
  local fg sd
  fg=$(ir_per_call "fg-$alg-$traffic" "$WORK/floodgate.lua" $warm \
    "floodgate:default:$tag:{__rand_int__}" '' check 1 "$tag" "$p1" "$p2")
  case $seed in
    seed_token_bucket) set -- "$s1" "$s2" "$NOW" 1 ;;
    seed_sliding_log) set -- "$s1" "$s2" "$NOW" "r:__rand_int__" ;;
    *) set -- "$s1" "$s2" "$NOW" ;;
  esac
  sd=$(ir_per_call "seed-$alg-$traffic" "tests/baseline/$seed.lua" $warm "seed:{__rand_int__}" "$@")
  printf '| %s | %s | %s | %s | %.2f |\n' "$alg" "$traffic" "$fg" "$sd" "$(echo "$fg / $sd" | bc -l)"
}

echo "redis $(redis-server --version | grep -o 'v=[0-9.]*'), $CALLS calls per row, instructions per EVALSHA (callgrind)"
echo
echo "| algorithm | traffic | floodgate Ir/call | seed Ir/call | × seed |"
echo "|---|---|---|---|---|"
if [ $# -ge 1 ]; then
  row "$1" "${2:-admit}"
else
  for alg in fixed_window sliding_log sliding_window token_bucket leaky_bucket gcra; do
    for traffic in admit deny; do row "$alg" "$traffic"; done
  done
fi
