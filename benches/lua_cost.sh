#!/usr/bin/env bash
# Server cost per decision, counted not timed: instructions executed by
# redis-server inside the command (valgrind --tool=callgrind, collecting only
# inside `fcallCommand` for floodgate, `evalShaCommand` for the textbook
# script), floodgate's `FCALL` vs the textbook script of the same algorithm
# (tests/baseline/textbook_*.lua: the plain scripts, e.g. INCR + PEXPIRE for
# the fixed window), same keys, same number of calls. Deterministic: unlike `usec_per_call`, it does not
# move when other processes share the cores.
#
#   benches/lua_cost.sh                 # all six algorithms, admit and deny (~8 min)
#   benches/lua_cost.sh gcra admit      # one row
#   CALLS=5000 benches/lua_cost.sh      # fewer calls (faster, same per-call figure)
#
# Needs redis-server, redis-benchmark, redis-cli, valgrind (callgrind_annotate,
# callgrind_control). Starts its own servers on free loopback ports.
#
# floodgate's library is rebuilt from lua/ as build.rs joins
# it (same files, order, name), with the ARGV `Limiter::check` sends (see
# `cargo bench --bench loadgen`, which captures them with MONITOR
# and checks the name). floodgate is measured twice: reading Redis TIME (the
# default, `now` = '') and with the client's `now`, as the textbook script
# always gets it (`Limiter` sends it with a client clock): the like-for-like
# comparison.
# `admit`: limit 1000 per second over 10 000 keys (every call admitted);
# `deny`: limit 1 per hour, every key spent by a warm-up before counting.
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS=${CALLS:-20000}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The code as the crate builds it: the EVAL form (whose SHA1 names the
# library), and the library.
grep -v '^#' lua/files.txt | grep . | while read -r f; do cat "lua/$f"; done >"$WORK/shared.lua"
{ cat "$WORK/shared.lua"; printf 'return floodgate(KEYS, ARGV)\n'; } >"$WORK/script.lua"
NAME=floodgate_$(sha1sum "$WORK/script.lua" | cut -c1-16)
{
  printf '#!lua name=%s\n' "$NAME"
  cat "$WORK/shared.lua"
  printf "redis.register_function('%s', floodgate)\n" "$NAME"
} >"$WORK/library.lua"

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# ir_per_call NAME fcall|evalsha FILE WARM KEY ARGS... : instructions per call
# of FILE's code (a library for fcall, a script for evalsha).
ir_per_call() {
  local name=$1 kind=$2 file=$3 warm=$4
  shift 4
  local port out pid fn verb stat
  port=$(free_port)
  out="$WORK/$name.cg"
  case $kind in
    fcall) fn=fcallCommand verb=FCALL stat=fcall ;;
    evalsha) fn=evalShaCommand verb=EVALSHA stat=evalsha ;;
  esac
  # Instrumentation off until the counted calls: the warm-up runs faster.
  valgrind --tool=callgrind --instr-atstart=no --toggle-collect=$fn --callgrind-out-file="$out" \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$WORK/$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
  local target
  if [ "$kind" = fcall ]; then
    target=$(redis-cli -p "$port" FUNCTION LOAD REPLACE "$(cat "$file")")
  else
    target=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$file")")
  fi
  if [ "$warm" -gt 0 ]; then
    redis-benchmark -p "$port" -c 4 -P 16 -n "$warm" -r 10000 $verb "$target" 1 "$@" >/dev/null 2>&1
  fi
  callgrind_control -i on "$pid" >/dev/null 2>&1
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  redis-benchmark -p "$port" -c 4 -P 16 -n "$CALLS" -r 10000 $verb "$target" 1 "$@" >/dev/null 2>&1
  local calls
  calls=$(redis-cli -p "$port" INFO commandstats | tr -d '\r' | grep "^cmdstat_$stat:" |
    sed 's/^cmdstat_[a-z]*:calls=\([0-9]*\),.*/\1/')
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  local ir
  ir=$(callgrind_annotate "$out" 2>/dev/null | grep 'PROGRAM TOTALS' | awk '{gsub(",","",$1); print $1}')
  echo $((ir / calls))
}

NOW=$(($(date +%s%N) / 1000000))
row() {
  local alg=$1 traffic=$2 tag textbook p1 p2 s1 s2 warm=0
  case $alg in
    fixed_window) tag=fw textbook=textbook_fixed_window ;;
    sliding_log) tag=sl textbook=textbook_sliding_log ;;
    sliding_window) tag=sw textbook=textbook_sliding_window ;;
    token_bucket) tag=tb textbook=textbook_token_bucket ;;
    leaky_bucket) tag=lb textbook=textbook_token_bucket ;;
    gcra) tag=gcra textbook=textbook_token_bucket ;;
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
    case $textbook in textbook_token_bucket) s2=0.0002777777777777778 ;; *) s2=3600000 ;; esac
  fi
  local fg fc tx
  fg=$(ir_per_call "fg-$alg-$traffic" fcall "$WORK/library.lua" $warm \
    "floodgate:default:$tag:{__rand_int__}" '' check 1 "$tag" "$p1" "$p2")
  fc=$(ir_per_call "fc-$alg-$traffic" fcall "$WORK/library.lua" $warm \
    "floodgate:default:$tag:{__rand_int__}" "$NOW" check 1 "$tag" "$p1" "$p2")
  case $textbook in
    textbook_token_bucket) set -- "$s1" "$s2" "$NOW" 1 ;;
    textbook_sliding_log) set -- "$s1" "$s2" "$NOW" "r:__rand_int__" ;;
    *) set -- "$s1" "$s2" "$NOW" ;;
  esac
  tx=$(ir_per_call "textbook-$alg-$traffic" evalsha "tests/baseline/$textbook.lua" $warm "textbook:{__rand_int__}" "$@")
  printf '| %s | %s | %s | %s | %s | %.2f | %.2f | %s |\n' "$alg" "$traffic" "$fc" "$fg" "$tx" \
    "$(echo "$fc / $tx" | bc -l)" "$(echo "$fg / $tx" | bc -l)" "$((fg - fc))"
}

echo "redis $(redis-server --version | grep -o 'v=[0-9.]*'), $CALLS calls per row, instructions per call (callgrind), library $NAME"
echo
echo "| algorithm | traffic | floodgate, client now | floodgate, TIME | textbook (client now) | × textbook, like for like | × textbook, TIME | TIME's cost |"
echo "|---|---|---|---|---|---|---|---|"
if [ $# -ge 1 ]; then
  row "$1" "${2:-admit}"
else
  for alg in fixed_window sliding_log sliding_window token_bucket leaky_bucket gcra; do
    for traffic in admit deny; do row "$alg" "$traffic"; done
  done
fi
