//! Redis and Redis Cluster: where the state lives, what is atomic, and whose
//! clock counts.
//!
//! # Which store
//!
//! | you run | store | |
//! |---|---|---|
//! | one app server (or trying floodgate out, or tests) | [`MemoryStore`] | per process, cannot fail, bounded to 1 000 000 keys by default ([`with_max_keys`](crate::store::MemoryStore::with_max_keys); [`stats`](crate::store::MemoryStore::stats) says how many it holds) |
//! | several app servers behind a load balancer | [`RedisStore`] | one Redis (with a replica for failover if you have one) |
//! | more decisions than one Redis core can take | [`RedisClusterStore`] | each client's state on the shard that owns its key |
//!
//! Per-process counters behind a load balancer loosen every limit by the
//! number of servers (and by more as you scale out): once you have more than
//! one app server, the state belongs in Redis. Every store makes the same
//! decisions, decision by decision; only where the state lives differs, so
//! moving from one to another changes one line.
//!
//! ```
//! use floodgate::algorithm::SlidingWindow;
//! use floodgate::store::{RedisClusterStore, RedisStore};
//! use floodgate::Limiter;
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Nothing connects here: connections are made on first use, in the
//! // background, so the app starts even while Redis is down.
//! let store = RedisStore::from_url("redis://127.0.0.1:6379")?; // or redis://user:password@host:6379/0
//! let api = Limiter::builder(store.clone(), SlidingWindow::new(100, Duration::from_secs(60)))
//!     .name("api")
//!     .build()?;
//! // One store for all limiters: clones share its connections.
//! let exports = Limiter::builder(store, SlidingWindow::new(10, Duration::from_secs(3_600)))
//!     .name("exports")
//!     .build()?;
//!
//! // Redis Cluster: any reachable nodes; the others are discovered.
//! let cluster = RedisClusterStore::from_nodes([
//!     "redis://10.0.0.1:6379",
//!     "redis://10.0.0.2:6379",
//!     "redis://10.0.0.3:6379",
//! ])?;
//! let api_on_cluster = Limiter::builder(cluster, SlidingWindow::new(100, Duration::from_secs(60)))
//!     .name("api")
//!     .build()?;
//! # Ok(()) }
//! ```
//!
//! Redis 7 or newer for Redis Functions (`FCALL`), which floodgate uses;
//! on Redis 5 and 6, or for a user whose ACL forbids functions, it calls the
//! same code as a script (`EVALSHA`) by itself (floodgate's tests run on
//! 7.0). No module to load (managed Redis services are fine). Nothing to set
//! up first either: when Redis lacks floodgate's function library (a new
//! server, `FUNCTION FLUSH`, a new floodgate version), the call that finds
//! it missing runs the same code by `EVAL`, and the library is loaded in the
//! background. A script Redis forgot (`NOSCRIPT`, after a restart or
//! `SCRIPT FLUSH`) is sent by `EVAL` too. No decision fails or degrades
//! because of it. Each version of floodgate's code loads its own library
//! (`floodgate_<hash>`); old ones stay until you `FUNCTION DELETE` them (a
//! few tens of kB each).
//!
//! Tuning [`RedisStore`] rarely matters: it shares 2 multiplexed connections
//! ([`connections`](crate::store::RedisStore::connections)), each of which
//! pipelines every concurrent call, and decisions made at the same moment
//! share one call ([below](#many-decisions-per-call)), with no connection
//! checkout. BENCHMARKS.md measured 140 000 to 240 000 decisions per
//! second from one client process (64 tasks) on 2-core VMs, Redis on one
//! core and the client on the other. There Redis was over 90 % busy,
//! spending 4 to 7 µs of its CPU per decision (by VM), so one Redis core
//! takes on the order of 150 000 to 250 000 a second. Authentication and
//! the database are in the URL (`redis://user:password@host:6379/0`); TLS
//! is `rediss://`, Sentinel
//! `redis+sentinel://`: the URL for each managed service, the ACL
//! floodgate needs and the eviction policy to choose are in
//! [`deploying`](super::deploying).
//!
//! # One function, one key per client
//!
//! Each decision is one `FCALL` of one Lua function (`lua/main.lua`, with
//! `lua/prelude.lua` and the six algorithms joined in front of it at compile
//! time into a function library; a concurrency limiter's leases are a
//! second function of it, `lua/concurrency.lua`): it reads the state,
//! decides and writes, atomically, on Redis' command thread. No number of
//! app servers can slip two requests between a read and a write, which
//! check-then-increment from the client cannot promise. The in-memory store
//! runs a Rust twin of each algorithm that property tests compare with the
//! Lua code, decision by decision.
//!
//! The state of one client under one limiter is one Redis key:
//!
//! ```text
//! {prefix}:{limiter name}:{algorithm}:{<client key>}
//! floodgate:api:sw:{203.0.113.9}
//! floodgate:plan/day:fw:{user:7}         (one limit of a Limits named "day")
//! floodgate:uploads:cc:{ana}             (a concurrency limiter's leases)
//! floodgate:hourly:fwj:{ana}             (a jittered fixed window: swj for a sliding one)
//! ```
//!
//! The prefix ([`LimiterBuilder::prefix`](crate::LimiterBuilder::prefix),
//! default `floodgate`) separates apps sharing a Redis; the
//! [name](crate::LimiterBuilder::name) separates limiters (give every limiter
//! its own, or two limiters with the same algorithm share counters). The
//! client key sits inside braces, escaped so that it never contains one: in
//! a cluster only the text between the braces picks the slot, so all of a
//! client's keys live on one shard, and no client can move its key to
//! another slot. Keys longer than 128 bytes are replaced by a hash. Every
//! key has a TTL and disappears once the client has been idle long enough
//! for it not to matter: idle clients cost nothing, no cleanup job needed.
//! Memory per active client is 56 to 216 B depending on the algorithm (see
//! [`choosing_an_algorithm`](super::choosing_an_algorithm)): a million
//! clients active at once on a [`SlidingWindow`](crate::algorithm::SlidingWindow)
//! limit take about 56 MB.
//!
//! # Clients that keep hammering: the deny cache
//!
//! A denied client that keeps sending costs one Redis call per request, all
//! denied. [`LimiterBuilder::deny_cache(max_keys)`](crate::LimiterBuilder::deny_cache)
//! remembers denials in the app server: until the time a denial names, the
//! same request (same key, same cost) is denied again locally, with no
//! Redis call (counted in `floodgate_cache_hits_total`). It is off by
//! default because it is only exact when nothing gives room back from
//! another process: turn it on for limiters that no other app server
//! refunds, i.e. no [`Limiter::refund`](crate::Limiter::refund), no
//! [`refund_when`](crate::layer::RateLimitLayer::refund_when), and
//! [`refund_inner_denials(false)`](crate::layer::RateLimitLayer::refund_inner_denials)
//! on a layer that wraps other limits. Limits chosen per request
//! ([`limits_for`](crate::layer::RateLimitLayer::limits_for),
//! [`check_with`](crate::Limiter::check_with)) bypass it.
//!
//! # What is atomic, and what is not
//!
//! | what | atomic? | how |
//! |---|---|---|
//! | one limit on one key | yes | one script call |
//! | several limits on one key ([`Limits`](crate::algorithm::Limits)) | yes, all or nothing | one script call over all of them; one shard in a cluster (same hash tag) |
//! | a refund ([`refund_when`](crate::layer::RateLimitLayer::refund_when), [`Limiter::refund`](crate::Limiter::refund)) | yes, by itself | one script call, made after the response |
//! | a concurrency limiter's acquire, and its release | yes, each | one script call each; an acquire given up on (timeout) is undone by a release sent after it on the same connection |
//! | several keys per request (stacked layers: per IP and per user, per user and global) | **no** | one call per layer, in order, possibly on different shards; an outer charge is refunded when an inner limit denies ([`refund_inner_denials`](crate::layer::RateLimitLayer::refund_inner_denials)), so for a moment it holds a charge it will give back |
//! | [`count_only_when`](crate::layer::RateLimitLayer::count_only_when) | **no** | a trial before, a charge after the response: requests in flight together can overshoot (see [`several_limits`](super::several_limits)) |
//!
//! When two limits must hold together exactly, put them on one key as
//! `Limits`.
//!
//! # Many decisions per call
//!
//! Decisions that wait for Redis at the same moment go out as one call of
//! floodgate's code, which decides each request in turn: each request's
//! limits all or nothing, apart from the others (one's denial or error never
//! charges or denies another), in the order they were made. A call never
//! waits to fill: an idle service sends each decision alone, as a plain
//! `FCALL`; under load, what queued while the previous calls were out goes
//! together, at most 32 a call
//! ([`max_decisions_per_call`](crate::store::RedisStoreBuilder::max_decisions_per_call);
//! 1 turns it off). On a cluster a call holds one hash slot's requests only
//! (a script's keys must share a slot), so there it helps a hot key, not a
//! spread of clients. Leases of a concurrency limiter always go alone (a
//! release must follow its acquire). `tests/many_per_call.rs` checks that
//! decisions made many per call are the decisions made one call each.
//!
//! What it saves: at 16 decisions a call, Redis spends about 0.7× the
//! instructions a decision of one call each (counted by
//! `benches/many_cost.sh`; the rest is each decision's own `GET`, `SET`
//! and arithmetic), and the client sends and reads one command instead of
//! 16. BENCHMARKS.md has the timed figures.
//!
//! # Keys floodgate did not write
//!
//! floodgate's keys are `{prefix}:{name}:{tag}:{<user key>}`: keep other
//! data out of that prefix. A key there that holds something floodgate did
//! not write (a list or a hash where floodgate keeps a string, a string
//! where it keeps a sorted set, text where it keeps digits) fails the
//! decision with a [`StoreError`](crate::store::StoreError) of kind
//! [`ForeignData`](crate::store::StoreErrorKind::ForeignData) that names
//! the key and says what is there, and the failure policy decides. One
//! value is read as a fresh key instead, never as more quota than a fresh
//! key has: a negative number in a sliding window's key. (`tests/foreign_data.rs`
//! tries a list, a hash, text and a negative number on each algorithm and
//! the concurrency limit.)
//!
//! During a rolling deploy, app servers of the previous release and of the
//! new one decide on the same keys: each release's function library has a
//! name of its own (`floodgate_` and its code's hash), so both are loaded
//! side by side, and releases that keep the same format share state, no
//! key reset (`tests/upgrade.rs` runs the previous release's library beside
//! this one). A release that changes what floodgate keeps in Redis says so
//! in the CHANGELOG, with what a key's limit does during the deploy.
//!
//! # Whose clock
//!
//! By default the script reads the Redis server's clock (`TIME`; Redis 7
//! freezes it for the length of a script), so every app server decides by
//! the same clock and skewed app-server clocks change nothing. Don't give a
//! production limiter a [`clock`](crate::LimiterBuilder::clock): that makes
//! each app server pass its own time, and their skew becomes error. The
//! clock option is for tests ([`ManualClock`](crate::clock::ManualClock)),
//! where it makes Redis decide deterministically too. A [`MemoryStore`]
//! reads a [`MonotonicClock`](crate::clock::MonotonicClock): the system clock
//! once, then the CPU's counter.
//!
//! # Redis Cluster
//!
//! [`RedisClusterStore`] is a drop-in replacement for [`RedisStore`]: the
//! same code, the same decisions, each routed by its one key to the shard
//! that owns it, so clients spread over all primaries. A node that lacks
//! floodgate's code gets it as a single Redis does: the call runs by `EVAL`,
//! and the library is loaded on that node in the background. Redirections
//! during resharding or failover (`MOVED`, `ASK`), `TRYAGAIN` and
//! `CLUSTERDOWN` are retried: none of them ran the code, so retrying is
//! safe. A connection that breaks *after* the call was sent is retried too,
//! and may charge the request twice (a false denial later, never an
//! admission too many).
//!
//! [`from_nodes`](crate::store::RedisClusterStore::from_nodes) takes any
//! reachable nodes and discovers the others. To set the cluster client up
//! yourself (timeouts, retries, credentials), start from
//! [`client_builder`](crate::store::RedisClusterStore::client_builder), which
//! holds floodgate's defaults, and pass the client to
//! [`from_client`](crate::store::RedisClusterStore::from_client). The redis
//! crate it takes is re-exported as [`floodgate::store::redis`](crate::store::redis),
//! so that your client is of the same version:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::store::RedisClusterStore;
//! use std::time::Duration;
//!
//! let client = RedisClusterStore::client_builder(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379"])
//!     .connection_timeout(Duration::from_millis(300))
//!     .build()?; // a floodgate::store::redis::cluster::ClusterClient
//! let store = RedisClusterStore::from_client(client);
//! # let _ = store;
//! # Ok(()) }
//! ```
//!
//! What no store can fix: Redis replicates asynchronously, so a failover can
//! lose the last few milliseconds of charges, and until a replica is
//! promoted (about `cluster-node-timeout` plus a second), decisions for the
//! keys of the failed shard are made by the [failure policy](super::failures)
//! while the other shards go on. The same holds for Sentinel (promotion
//! after `down-after-milliseconds` plus the election: about 2 s with 1 s).
//! "A few milliseconds" assumes the replica keeps up: on a host short of CPU
//! a replica can lag by hundreds of milliseconds, and a failover then
//! forgets that much (the project's own cluster test once lost 1 659
//! admissions that way on a starved CI machine). Where losing charges
//! matters, watch the replication lag (`INFO replication`,
//! `master_repl_offset` against the replica's `offset`) and give Redis cores
//! of its own. floodgate does not wait for replicas (no `WAIT`): a decision
//! stays one round trip.
//!
//! A cluster pays off when each primary has a core or a machine of its own:
//! BENCHMARKS.md measured a 3-primary cluster squeezed onto 2 cores at about
//! the throughput of one Redis, not more. Stay on one [`RedisStore`] until
//! one Redis core is busy.
//!
//! A [`Global`](crate::key::Global) key is one key, hence one shard: a
//! fleet-wide global limit cannot spread over a cluster.
//!
//! [`MemoryStore`]: crate::store::MemoryStore
//! [`RedisStore`]: crate::store::RedisStore
//! [`RedisClusterStore`]: crate::store::RedisClusterStore
