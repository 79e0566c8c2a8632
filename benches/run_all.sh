#!/usr/bin/env bash
# Every row of BENCHMARKS.md, on this machine, in one go, cheapest first.
#
#   benches/run_all.sh [OUT]          # OUT: where each step's full output goes
#                                     # (default /tmp/floodgate-bench)
#   QUICK=1 benches/run_all.sh        # each bench in its smoke mode (~4 min after the build)
#   SKIP_PEER=1 benches/run_all.sh    # without rate-limiter-flexible (Node)
#   python3 benches/fill_benchmarks.py OUT/figures.txt   # the figures into BENCHMARKS.md
#
# At the end it prints a block of `name=value` lines (also OUT/figures.txt):
# the names of the `{{name}}` placeholders in BENCHMARKS.md.
#
# Expected time on 2 cores with nothing else running: the runs ~16 min
# (each step says its own below; about 4 min in all with QUICK=1); the
# build, from cold, ~10-15 min (one optimized build serves every bench:
# `--features deadpool` everywhere; the outside crate builds floodgate once
# more on its own). About 30 min in all. On a machine shared with other
# builds the cold build alone took 29 min.
#
# What it needs: Rust; redis-server, redis-cli and redis-benchmark 7
# (Debian/Ubuntu `apt-get install -y redis-server redis-tools`); openssl
# (redis_transports makes its TLS certificates); wrk (http_load; installed
# here with apt-get when missing); Node.js and npm for the
# rate-limiter-flexible row (peer_load installs rate-limiter-flexible@11
# and ioredis@5 with npm into ~/.cache/floodgate/peer the first time, a few
# seconds with a network; the row is skipped when node or npm is missing,
# or with SKIP_PEER=1). Every step that needs Redis starts its own
# redis-server on free loopback ports (the cluster steps use a 3-primary
# Redis Cluster and a single node this script starts and stops); REDIS_URL
# is unset so that no step flushes a server of yours.
#
# A step that fails is reported and the others still run; the script then
# exits with status 1.
set -euo pipefail

OUT=${1:-/tmp/floodgate-bench}
QUICK=${QUICK:-0}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
unset REDIS_URL FLOODGATE_CLUSTER_NODES FLOODGATE_MAX_PER_CALL
FEATURES=(--features deadpool)
FAILED=()

q() { if [ "$QUICK" = 1 ]; then echo "$1"; else echo "$2"; fi; }
say() { printf '\n== %s  (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

# step NAME COMMAND...: runs it with its whole output in OUT/NAME.txt.
step() {
    local name=$1
    shift
    say "$name: $*"
    local t0=$SECONDS
    if "$@" >"$OUT/$name.txt" 2>&1; then
        echo "   done in $((SECONDS - t0)) s -> $OUT/$name.txt"
    else
        echo "   FAILED after $((SECONDS - t0)) s (last lines of $OUT/$name.txt):"
        tail -n 15 "$OUT/$name.txt" | sed 's/^/   | /'
        FAILED+=("$name")
    fi
}

# ---------------------------------------------------------------- tools
need() { command -v "$1" >/dev/null || { echo "missing: $1 ($2)" >&2; exit 1; }; }
need cargo "install Rust: https://rustup.rs"
need redis-server "apt-get install -y redis-server"
need redis-cli "apt-get install -y redis-tools"
need redis-benchmark "apt-get install -y redis-tools"
need openssl "apt-get install -y openssl"
if ! command -v wrk >/dev/null; then
    say "installing wrk (http_load's load tool)"
    if [ "$(id -u)" = 0 ]; then SUDO=(); else SUDO=(sudo); fi
    "${SUDO[@]}" apt-get install -y wrk >/dev/null 2>&1 ||
        { "${SUDO[@]}" apt-get update >/dev/null && "${SUDO[@]}" apt-get install -y wrk >/dev/null; }
fi
need wrk "apt-get install -y wrk"
PEER=1
if [ "${SKIP_PEER:-0}" = 1 ] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    PEER=0
fi

# ---------------------------------------------------------------- machine
{
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "cores=$(nproc)"
    echo "memory_gib=$(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)"
    echo "redis=$(redis-server --version | sed 's/.* v=\([^ ]*\).*/\1/')"
    echo "rustc=$(rustc --version | cut -d' ' -f2)"
    echo "kernel=$(uname -r)"
    echo "date=$(date -u +%Y-%m-%d)"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"

# ---------------------------------------------------------------- build (~8-12 min cold)
say "build"
cargo bench --no-run "${FEATURES[@]}" --benches 2>&1 | tail -n 3
cargo test --profile bench "${FEATURES[@]}" --no-run --test memory_bound --test redis_memory 2>&1 | tail -n 3
if [ -d benches/outside ]; then
    (cd benches/outside && cargo build --release 2>&1 | tail -n 3)
else
    echo "benches/outside is missing: the in-memory row against governor is not measured"
fi

# ---------------------------------------------------------------- a Redis Cluster and a single node
# Three primaries, no replicas, and one plain server: for cluster_throughput
# and hot_key (both start no server of their own for the cluster).
CLUSTER_DIR=$(mktemp -d)
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 30000))
        ss -Hltn "sport = :$p" | grep -q . || ss -Hltn "sport = :$((p + 10000))" | grep -q . || { echo "$p"; return; }
    done
}
PORTS=()
stop_servers() {
    local f
    for f in "$CLUSTER_DIR"/*.pid; do
        [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
    for f in "$CLUSTER_DIR"/*.pid; do # each writes its files as it stops
        for _ in $(seq 50); do [ -e "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null || break; sleep 0.1; done
    done
    rm -rf "$CLUSTER_DIR" 2>/dev/null || true
}
trap stop_servers EXIT
start_redis() { # port [extra args]
    local p=$1
    shift
    redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$CLUSTER_DIR" \
        --daemonize yes --pidfile "$CLUSTER_DIR/$p.pid" --logfile "$CLUSTER_DIR/$p.log" "$@"
    for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && return; sleep 0.1; done
    echo "redis-server on $p did not start" >&2
    return 1
}
start_cluster() {
    local p
    for _ in 1 2 3; do
        p=$(free_port)
        PORTS+=("$p")
        start_redis "$p" --cluster-enabled yes --cluster-config-file "nodes-$p.conf" --cluster-node-timeout 2000
    done
    SINGLE=$(free_port)
    start_redis "$SINGLE"
    redis-cli --cluster create "${PORTS[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >"$OUT/cluster_create.txt" 2>&1
    for _ in $(seq 100); do
        redis-cli -p "${PORTS[0]}" cluster info | grep -q 'cluster_state:ok' && break
        sleep 0.1
    done
    NODES=$(printf 'redis://127.0.0.1:%s,' "${PORTS[@]}")
    NODES=${NODES%,}
    echo "cluster $NODES, single node redis://127.0.0.1:$SINGLE"
}
say "starting a Redis Cluster (3 primaries) and a single node"
start_cluster

bench() { cargo bench -q "${FEATURES[@]}" --bench "$@"; }

# ---------------------------------------------------------------- the runs, cheapest first
# ~10 s: Redis bytes per key, floodgate's and the textbook scripts', one run.
step redis_memory cargo test --profile bench "${FEATURES[@]}" --test redis_memory -- --nocapture
# ~30 s: jittered windows on Redis (each decision checked against the
# in-memory twin), under a manual clock: the spread of 1 000 keys' resets
# and the herd of 1 000 denied clients at reset, without and with jitter.
step jitter cargo test --profile bench "${FEATURES[@]}" --test jitter -- --nocapture \
    reset_instants_spread_over_the_window jitter_cures_the_herd_at_reset
# ~20 s: in-process bytes per key, 1 000 000 keys per algorithm.
step memory_bound env FLOODGATE_SPRAY_KEYS="$(q 100000 1000000)" \
    cargo test --profile bench "${FEATURES[@]}" --test memory_bound -- --nocapture --test-threads 1 memory_per_key
# ~15 s: denied clients hammering, deny cache off and on (3 rounds of 2 s each).
step abuse_load bench abuse_load -- --rounds "$(q 1 3)"
# ~20 s: the in-memory decision from a crate outside the package, against governor.
if [ -d benches/outside ]; then
    step outside bash -c 'cd benches/outside && cargo run -q --release'
else
    echo "outside: benches/outside missing" >"$OUT/outside.txt"
    FAILED+=(outside)
fi
# ~30 s: the six algorithms and the axum layer in process (9 interleaved rounds).
step inproc env FLOODGATE_BENCH_ROUNDS="$(q 1 9)" \
    FLOODGATE_BENCH_TABLE=fixed_window,sliding_log,sliding_window,token_bucket,leaky_bucket,gcra,router \
    cargo bench -q "${FEATURES[@]}" --bench memory
# ~25 s: Limiter::check against a bare FCALL on one multiplexed connection (5 runs of 2 s).
step redis_throughput bench redis_throughput -- $(q "--runs 1 --secs 1" "--runs 5 --secs 2")
# ~35 s: Redis Cluster against one node (5 runs of 3 s each).
step cluster_throughput env FLOODGATE_CLUSTER_NODES="$NODES" REDIS_URL="redis://127.0.0.1:$SINGLE" \
    cargo bench -q "${FEATURES[@]}" --bench cluster_throughput -- $(q "--runs 1 --secs 1" "--runs 5 --secs 3")
# ~45 s: a deadpool-redis pool and TLS against the multiplexed connections (5 rounds of 2 s).
step redis_transports bench redis_transports -- $(q "--runs 1 --secs 1" "--runs 5 --secs 2")
# ~45 s (+ the npm install the first time): against rate-limiter-flexible.
if [ "$PEER" = 1 ]; then
    step peer_load bench peer_load -- $(q "--runs 1 --secs 1" "--runs 3 --secs 5")
else
    echo "peer_load: skipped (SKIP_PEER=1, or no node and npm)" | tee "$OUT/peer_load.txt"
fi
# ~2 min: one hot key, Redis and Cluster, 2 algorithms, 3 rounds of 4 s with and without.
step hot_key env FLOODGATE_CLUSTER_NODES="$NODES" \
    cargo bench -q "${FEATURES[@]}" --bench hot_key -- $(q "--runs 1 --secs 2" "--runs 3 --secs 4")
# ~2.5 min: sliding log and token bucket at 5 000 decisions/s, 60 s each.
step algorithm_load bench algorithm_load -- --secs "$(q 5 60)"
# ~3 min: HTTP with wrk, 5 apps, 5 rounds of 5 s.
step http_load bench http_load -- $(q "--quick" "--rounds 5 --secs 5") --noheaders
# ~4.5 min: the Redis rows, 6 algorithms, admitted and denied traffic, 3 runs.
step loadgen bench loadgen -- $(q "--quick" "--runs 3")

# ---------------------------------------------------------------- the figures
{
    sed 's/^/machine./' "$OUT/machine.txt"

    # benches/outside: "  governor keyed     30.1 ns a decision", "  floodgate GCRA  45.0 ns  1.50x governor"
    awk '/governor keyed/ {print "memory.governor_ns=" $3}
         /floodgate GCRA/ {print "memory.gcra_ns=" $3; sub("x", "", $5); print "memory.gcra_x=" $5}
         /floodgate bucket/ {print "memory.token_bucket_ns=" $3; sub("x", "", $5); print "memory.token_bucket_x=" $5}' \
        "$OUT/outside.txt"

    # tests/jitter.rs: "fixed window: reset instants of 1000 keys ...", its
    # "  jittered: [92, 114, ...]" line, and "fixed window: 1000 clients ...
    # busiest 100 ms admits 10000 of 20000 aligned, 70 of 19990 jittered (0.007x)".
    awk '/reset instants of/ {w = ($1 == "fixed") ? "fixed_window" : "sliding_window"}
         /^ +jittered: \[/ {s = $0; gsub(/[^0-9,]/, "", s); n = split(s, a, ","); m = 0
             for (i = 1; i <= n; i++) if (a[i] + 0 > m) m = a[i] + 0
             print "jitter." w "_spread_max=" m}
         /busiest 100 ms admits/ {w = ($1 == "fixed") ? "fixed_window" : "sliding_window"
             for (i = 1; i <= NF; i++) {
                 if ($i == "admits") {print "jitter." w "_aligned_peak=" $(i+1); print "jitter." w "_aligned_all=" $(i+3)}
                 if ($i == "aligned,") {print "jitter." w "_jittered_peak=" $(i+1); print "jitter." w "_jittered_all=" $(i+3)}
             }
             x = $NF; gsub(/[()x]/, "", x); print "jitter." w "_x=" x}' \
        "$OUT/jitter.txt"

    # benches/memory.rs: "| 1 thread(s) | ..." tables, then the axum Router tables.
    awk -F' *[|] *' '
        /^[|] [12] thread/ {t = substr($2, 1, 1); next}
        /^[|] axum Router/ {r = ($2 ~ /1 thread/) ? 1 : 2; t = ""; next}
        t && $2 ~ /^[a-z_]+$/ {s = (t == 1) ? "" : "_2t"; print "inproc." $2 "_ns" s "=" $3; print "inproc." $2 "_x" s "=" $4}
        r == 1 && $2 ~ /^router_/ {n = substr($2, 8); if (n == "layer") n = "floodgate"; print "layer." n "_ns=" $3; if (n != "plain") print "layer." n "_own_ns=" $4;
            if (n == "floodgate") {print "layer.x_governor=" $5; print "layer.x_governor_headers=" $6}}' \
        "$OUT/inproc.txt"

    # tests/redis_memory.rs and tests/memory_bound.rs
    awk -F' *[|] *' '/^[|] [a-z]/ && $3 ~ /^[0-9]+$/ {n = $2; gsub(" ", "_", n); print "bytes.redis_" n "=" $3; print "bytes.redis_" n "_textbook=" $4}' \
        "$OUT/redis_memory.txt"
    # "test … ... token_bucket: 1000000 keys held of 1000000, RSS +167 MB, 167 B per key, 2.1 s"
    awk 'match($0, /[a-z_]+: [0-9]+ keys held of [0-9]+, RSS [^,]*, [0-9]+ B per key/) {
        split(substr($0, RSTART, RLENGTH), f, " "); n = f[1]; sub(":", "", n)
        print "bytes.memory_" n "=" f[10]; print "bytes.memory_keys=" f[2]}' \
        "$OUT/memory_bound.txt" | sort -u

    # abuse_load: "| off | 12 345 (…) | 1.00000 |"
    awk -F' *[|] *' '/^[|] (off|on) [|]/ {v = $3; sub(/ *\(.*/, "", v); gsub(" ", "", v); print "abuse." $2 "_rps=" v; print "abuse." $2 "_calls=" $4}
         /^throughput/ {split($0, f, " "); print "abuse.x=" f[3]}' "$OUT/abuse_load.txt"

    # redis_throughput, cluster_throughput, redis_transports, peer_load: their "median:" lines
    awk '/^median:/ {gsub("/s", ""); gsub(",", ""); gsub(";", ""); print "throughput.limiter_rps=" $3; print "throughput.raw_rps=" $6; print "throughput.x_raw=" $NF}' \
        "$OUT/redis_throughput.txt"
    awk '/^median:/ {gsub("/s", ""); gsub(",", ""); print "cluster.cluster_rps=" $3; print "cluster.single_rps=" $6; print "cluster.x_single=" $NF}' \
        "$OUT/cluster_throughput.txt"
    awk '/^median:/ {gsub("/s", ""); gsub("[(;]", ""); print "transports.multiplexed_rps=" $3; print "transports.allocations=" $4; print "transports.pool_x=" $(NF-4); print "transports.tls_x=" $NF}' \
        "$OUT/redis_transports.txt"
    awk '/^median:/ {gsub("/s", ""); gsub(",", ""); print "peer.floodgate_rps=" $3; print "peer.rlf_rps=" $5; print "peer.x=" $7}' \
        "$OUT/peer_load.txt"

    # hot_key: "== redis" / "== cluster", then per algorithm its runs
    # ("  run 0: without ...", "         with ...") and a median line.
    awk '
        function hi(k, v) { if (!(k in m) || v + 0 > m[k] + 0) m[k] = v }
        function lo(k, v) { if (!(k in m) || v + 0 < m[k] + 0) m[k] = v }
        function after(re, i,   f) { if (!match($0, re)) return ""; split(substr($0, RSTART, RLENGTH), f, " "); return f[i] }
        /^== / { w = $2 }
        /^ +with / {
            if ((v = after("max [0-9.]+", 2)) != "") hi(w "_fixed_window_max", v)
            if ((v = after("min [0-9.]+", 2)) != "") lo(w "_fixed_window_min", v)
            if ((v = after("admitted [0-9.]+ of capacity", 2)) != "") lo(w "_token_bucket_share", v)
            if ((v = after("worst excess -?[0-9]+", 3)) != "") hi(w "_token_bucket_excess", v)
        }
        /: median decisions\/s/ {
            a = $1; sub(":", "", a); gsub(/[,;:]/, " "); sub(/x /, " ")
            print "hot." w "_" a "_with=" $6; print "hot." w "_" a "_without=" $8; print "hot." w "_" a "_x=" $9
            print "hot." w "_" a "_calls_with=" $11; print "hot." w "_" a "_calls_without=" $13
        }
        END { for (k in m) print "hot." k "=" m[k] }' "$OUT/hot_key.txt" | sort

    # algorithm_load: "sliding log   300000 decisions in 60.0 s (5000/s), admitted 1.000; latency p50 1630 µs p99 5570 µs; Redis CPU 15.7 % ..."
    awk '/ decisions in / {n = ($1 == "sliding") ? "sliding_log" : "token_bucket";
        for (i = 1; i <= NF; i++) {
            if ($i == "p50") print "algload." n "_p50_us=" $(i+1); if ($i == "p99") print "algload." n "_p99_us=" $(i+1);
            if ($i == "CPU") print "algload." n "_cpu_pct=" $(i+1); if ($i == "µs/call;") print "algload." n "_us_per_call=" $(i-1);
            if ($i == "memory") {after = $(i+1); before = $(i+3); sub(/\),?/, "", before)}
            if ($i == "keys" && $(i-1) + 0 > 0) {printf "algload.%s_dataset_mb=%.2f\nalgload.%s_bytes_per_client=%.0f\n", n, (after - before) / 1e6, n, (after - before) / $(i-1)}
            if ($i == "admitted") {v = $(i+1); sub(";", "", v); print "algload." n "_admitted=" v}}}' \
        "$OUT/algorithm_load.txt"

    # http_load: "| wrk | app | requests/s | × plain | × tower_governor | × tg headers | × plain CPU | not 2xx | server µs | ..."
    awk -F' *[|] *' '$2 == "wrk" {a = $3; v = $4; gsub(" ", "", v); print "http." a "_rps=" v; print "http." a "_x_plain=" $5;
        print "http." a "_x_governor=" $6; print "http." a "_x_governor_headers=" $7; print "http." a "_server_us=" $10; us[a] = $10}
        END {if ("plain" in us) for (a in us) if (a != "plain") printf "http.%s_cost_us=%.1f\n", a, us[a] - us["plain"]}' \
        "$OUT/http_load.txt" | sort

    # loadgen: the table (admit and deny rows), then "Redis's own ceiling" lines
    awk -F' *[|] *' '$3 == "admit" || $3 == "deny" {a = $2 "_" $3; v = $6; gsub(" ", "", v);
        print "redis." a "_rps=" v; rb = $4; gsub(" ", "", rb); print "redis." a "_rb16_rps=" rb;
        x = $9; sub(/ .*/, "", x); print "redis." a "_x_textbook=" x; print "redis." a "_us=" $10;
        split($11, o, ", "); sub(/ .*/, "", o[2]); print "redis." a "_x_one_call_rps=" o[1]; print "redis." a "_x_one_call_us=" o[2];
        if ($3 == "admit") {split($14, l, " "); printf "redis.%s_p50_us=%.0f\nredis.%s_p99_us=%.0f\n", $2, l[1] * 1000, $2, l[3] * 1000;
            r = $14; sub(/.*at /, "", r); sub(/\/s.*/, "", r); gsub(" ", "", r); print "redis." $2 "_latency_at_rps=" r}}' \
        "$OUT/loadgen.txt"
    # "  gcra admit: 3.98 µs a decision (95% busy) / 4.53 µs a lesson call (97% busy): ceiling ..."
    awk '/ a decision \(/ && / a lesson call / {a = $1 "_" $2; sub(":", "", a);
        printf "redis.%s_per_core=%.0f\nredis.%s_textbook_per_core=%.0f\n", a, 1e6 / $3, a, 1e6 / $10;
        b = $7; gsub(/[(%]/, "", b); print "redis." a "_busy_pct=" b}' "$OUT/loadgen.txt"
} 2>/dev/null >"$OUT/figures.txt" || true

# Each target of BENCHMARKS.md: yes, **no**, or not measured (a figure missing).
awk -F= '
    { f[$1] = $2 }
    function has(k) { return (k in f) && f[k] != "" }
    function le(k, lim) { if (!has(k)) miss = 1; else if (f[k] + 0 > lim) bad = 1 }
    function ge(k, lim) { if (!has(k)) miss = 1; else if (f[k] + 0 < lim) bad = 1 }
    function met(name) { print "met." name "=" (miss ? "not measured" : (bad ? "**no**" : "yes")); miss = 0; bad = 0 }
    END {
        le("memory.gcra_x", 1.2); le("memory.token_bucket_x", 1.2); met("memory")
        ge("http.floodgate_x_governor", 1.0); met("http_governor")
        ge("http.floodgate_x_governor_headers", 1.0); met("http_governor_headers")
        ge("redis.token_bucket_admit_x_textbook", 1.3); met("redis_textbook")
        le("redis.token_bucket_admit_x_one_call_us", 0.7); met("redis_one_call")
        ge("peer.x", 2.0); met("peer")
        split("redis cluster", where, " ")
        for (w in where) {
            for (a = 1; a <= 2; a++) {
                alg = (a == 1) ? "fixed_window" : "token_bucket"; k = "hot." where[w] "_" alg
                ge(k "_x", 10); le(k "_calls_with", 0.02)
                if (a == 1) { le(k "_max", 1.0); ge(k "_min", 0.9) } else { le(k "_excess", 0); ge(k "_share", 0.9) }
            }
        }
        met("hot_key")
        ge("abuse.x", 5)
        if (has("abuse.on_calls") && has("abuse.off_calls") && f["abuse.off_calls"] > 0) { if (f["abuse.on_calls"] / f["abuse.off_calls"] > 0.01) bad = 1 } else miss = 1
        met("abuse")
        n = split("fixed_window sliding_counter sliding_log token_bucket leaky_bucket gcra", algs, " ")
        for (i = 1; i <= n; i++) { k = "bytes.redis_" algs[i]; if (has(k "_textbook")) le(k, f[k "_textbook"] + 0); else miss = 1 }
        met("redis_memory")
    }' "$OUT/figures.txt" >"$OUT/met.txt"
cat "$OUT/met.txt" >>"$OUT/figures.txt"
rm -f "$OUT/met.txt"

say "figures (also in $OUT/figures.txt; fill BENCHMARKS.md with benches/fill_benchmarks.py $OUT/figures.txt)"
cat "$OUT/figures.txt"
if [ ${#FAILED[@]} -gt 0 ]; then
    echo
    echo "FAILED: ${FAILED[*]} (their outputs are in $OUT)"
    exit 1
fi
