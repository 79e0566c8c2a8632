#!/usr/bin/env bash
# Redis's whole cost per decision, counted not timed: instructions executed
# by the redis-server process (valgrind --tool=callgrind, everything: reading
# and parsing the commands, the Lua, the replies), one decision per FCALL
# against 16 decisions per FCALL of floodgate's `many`, same keys, the
# client's `now`, `redis-benchmark -c 4 -P 16`. Per decision = the
# difference of a run of 9 600 and one of 3 200 decisions, divided by 6 400
# (start-up and the library load cancel out). Deterministic, unlike time on
# a shared machine.
#
#   benches/many_cost.sh              # token bucket, fixed window, GCRA, sliding window, and
#                                     # the lesson's token-bucket script (~2.5 min)
#   benches/many_cost.sh tb           # one algorithm (tb, fw, gcra, sw)
#   KEYS_RANGE=200 benches/many_cost.sh   # keys that exist already (default 10 000: mostly new)
#
# Needs redis-server, redis-benchmark, redis-cli and valgrind. Starts its own
# server on a free loopback port. The library is rebuilt from lua/ in the
# order of lua/files.txt, as build.rs joins it.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RANGE=${KEYS_RANGE:-10000}
{
  printf '#!lua name=floodgate_cost\n'
  grep -v '^#' lua/files.txt | grep . | while read -r f; do cat "lua/$f"; done
  printf "redis.register_function('cost_one', floodgate)\n"
  printf "redis.register_function('cost_many', many)\n"
} >"$WORK/library.lua"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# Instructions of a server that decides `$3` times, `$2` (one|many) per call, algorithm `$1`.
run() {
  local alg=$1 mode=$2 n=$3
  valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
    >/dev/null 2>"$WORK/valgrind.log" &
  local pid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  redis-cli -p "$port" function load "$(cat "$WORK/library.lua")" >/dev/null
  local key='fg:{__rand_int__}'
  # Limit 1000 a second: a window of 1000 ms, or one unit every 1 ms.
  local p2=1000
  [ "$alg" = tb ] && p2=1
  local args=(1790000000000 check 1 "$alg" 1000 "$p2")
  if [ "$mode" = lesson ]; then
    local sha
    sha=$(redis-cli -p "$port" script load "$(cat tests/baseline/textbook_token_bucket.lua)")
    redis-benchmark -p "$port" -c 4 -P 16 -n "$n" -r "$RANGE" --csv \
      EVALSHA "$sha" 1 'lesson:{__rand_int__}' 1000 1000 1790000000000 1 >/dev/null 2>&1
  elif [ "$mode" = one ]; then
    redis-benchmark -p "$port" -c 4 -P 16 -n "$n" -r "$RANGE" --csv \
      FCALL cost_one 1 "$key" "${args[@]}" >/dev/null 2>&1
  else
    local m=(16)
    for _ in $(seq 16); do m+=("$key"); done
    # 16 requests of one limiter: one ARGV of 6 for all.
    m+=(16 1 6 "${args[@]}")
    redis-benchmark -p "$port" -c 4 -P 16 -n $((n / 16)) -r "$RANGE" --csv \
      FCALL cost_many "${m[@]}" >/dev/null 2>&1
  fi
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
  grep -o 'Collected : [0-9]*' "$WORK/valgrind.log" | grep -o '[0-9]*$'
}

per_decision() {
  local a b
  a=$(run "$1" "$2" 3200)
  b=$(run "$1" "$2" 9600)
  echo $(((b - a) / 6400))
}

echo "redis-server $(redis-server --version | grep -o 'v=[0-9.]*'), keys drawn from $RANGE"
echo "| algorithm | instructions per decision, one per call | 16 per call | ratio |"
echo "|---|---|---|---|"
for alg in ${1:-tb fw gcra sw}; do
  one=$(per_decision "$alg" one)
  many=$(per_decision "$alg" many)
  echo "| $alg | $one | $many | $(python3 -c "print(f'{$many / $one:.3f}')") |"
done
# The baseline of the throughput row: what Redis spends on one call of the
# reference lesson's one-key token-bucket script (tests/baseline/), as
# `cargo bench --bench loadgen` runs it under redis-benchmark -P16.
lesson=$(per_decision tb lesson)
echo
echo "the lesson's token-bucket script: $lesson instructions a call"
