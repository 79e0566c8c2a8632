//! Using floodgate from any language: the rate limit service for Envoy.
//!
//! The layer limits a Rust service from inside it. A service in another
//! language (or many, behind one gateway) gets floodgate through the proxy
//! in front of it: `floodgate-rls`, a binary of this repository's workspace
//! (`rls/`), is Envoy's rate limit service
//! (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`), which
//! Envoy, Istio and Envoy Gateway ask before each request. It decides with
//! this library: the same stores, the same six algorithms, the same
//! failure policies.
//!
//! # Which one
//!
//! | you have | use |
//! |---|---|
//! | an axum or tonic service in Rust | the layer ([`RateLimitLayer`](crate::layer::RateLimitLayer)): no extra hop, keys from anything in the request, waiting, late costs |
//! | services in other languages behind Envoy, Istio or Envoy Gateway | `floodgate-rls` |
//! | envoyproxy/ratelimit already | `floodgate-rls` with the same files |
//! | one Envoy and a limit per instance is enough | Envoy's own `local_ratelimit` filter (no service, no shared state) |
//!
//! The hop costs a gRPC call per request: `BENCHMARKS.md` measures Envoy
//! with the service against Envoy with `local_ratelimit` and with no limit.
//!
//! # Running it
//!
//! ```sh
//! cargo install --path rls
//! REDIS_URL=redis://redis:6379 floodgate-rls --config /etc/ratelimit/   # gRPC :8081, /metrics :9090
//! ```
//!
//! Its configuration is envoyproxy/ratelimit's YAML, one file per domain;
//! descriptors nest, values take `*` wildcards, and each `rate_limit` may
//! name one of the six algorithms (fixed windows by default, aligned to the
//! unit as envoyproxy/ratelimit's):
//!
//! ```yaml
//! domain: api
//! descriptors:
//!   - key: api_key
//!     rate_limit: { unit: minute, requests_per_unit: 600, algorithm: gcra, burst: 60 }
//!     descriptors:
//!       - key: path
//!         value: /v1/search*
//!         rate_limit: { unit: second, requests_per_unit: 5, algorithm: sliding_window }
//!   - key: remote_address
//!     rate_limit: { unit: second, requests_per_unit: 100 }
//! ```
//!
//! A descriptor one value of which takes a large share of the traffic (a
//! big tenant, one shared API key) can say `hot_keys: { servers: 3 }` in
//! its `rate_limit`: each instance of the service then decides that value
//! from slices of its quota ([`HotKeys`](crate::HotKeys)), one Redis call a
//! slice instead of one a request, never admitting more than the limit.
//!
//! Envoy's side is its `envoy.filters.http.ratelimit` filter with
//! `domain: api`, a cluster for the service speaking HTTP/2, and
//! rate-limit actions on the routes (`request_headers` for `x-api-key` as
//! `api_key`, `remote_address`); `rls/README.md` has a configuration the
//! tests run against Envoy 1.40, and every option.
//!
//! # What it decides differently
//!
//! A request's descriptors are decided **all or nothing, in one store
//! call** ([`Limiter::check_keys_with`](crate::Limiter::check_keys_with)):
//! a request refused by its API key's limit does not use up its address's,
//! and a refused hit is not counted at all. envoyproxy/ratelimit counts every
//! hit on every descriptor, those over the limit included, so a client that
//! keeps retrying stays locked out for as long as it retries. The rest is
//! as there: statuses in request order with the limit, what remains and the
//! time to reset; `shadow_mode` answers `OK`; `quota_mode` refuses only
//! when every descriptor in quota mode is over (and then, unlike there,
//! gives back what the others were charged); a descriptor's `metadata:`
//! reaches Envoy's dynamic metadata with `--response-dynamic-metadata`; an
//! unknown domain or descriptor is `OK` without a limit.
//!
//! # When Redis or the service fails
//!
//! - The service unreachable: Envoy's `failure_mode_deny` decides (`false`:
//!   requests go through; `true`: 500). Envoy uses the service again by
//!   itself when it is back.
//! - Redis slow or down behind the service: it answers within
//!   `--store-timeout-ms` (100 ms) by `--on-store-failure`: `error` (the
//!   default: `UNAVAILABLE`, and Envoy's `failure_mode_deny` decides, as
//!   with envoyproxy/ratelimit), `allow` or `deny`. Set Envoy's filter
//!   `timeout` above it.
//!
//! See also [`failures`](super::failures) for the failure policies and the
//! circuit breaker behind `--on-store-failure`, and
//! [`redis_and_cluster`](super::redis_and_cluster) for `REDIS_URL`'s forms
//! (TLS, Sentinel; `--redis-cluster` for a Cluster).
