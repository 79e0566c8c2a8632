//! # Waiting instead of refusing, outbound limits, costs known late
//!
//! By default a limit answers at once: admitted, or 429. Around that one
//! question are three others this page answers: should a request over the
//! limit **wait** for its turn instead; how does a fleet of workers share
//! **someone else's** quota; and what if a request's cost is known only
//! **after** it ran (the tokens an LLM call used)?
//!
//! ## Waiting versus refusing
//!
//! A refusal is the right answer for a public API: the client knows best
//! whether to retry (`Retry-After` says when), and nobody holds a
//! connection open. Waiting suits callers that would retry anyway and
//! cannot do better: a batch job, an internal service, a webhook sender,
//! a queue worker. floodgate waits by **booking**: the request's cost is
//! charged now, for the earliest time it fits, and the request goes on
//! then. Because the booking is in the shared store, a fleet that books
//! never exceeds the limit, and the requests come out at the algorithm's
//! own pace.
//!
//! | you want | use |
//! |---|---|
//! | a decision now, and a time to come back | [`Limiter::check`](crate::Limiter::check) (and `retry_after`) |
//! | a booking: charged now, go at the time it says | [`Limiter::reserve`](crate::Limiter::reserve) (`cancel` gives it back) |
//! | to wait for that time in the same task | [`Limiter::until_ready`](crate::Limiter::until_ready) |
//! | as much of a batch as fits now | [`Limiter::check_at_most`](crate::Limiter::check_at_most) |
//! | a server that holds requests over the limit instead of 429 | [`RateLimitLayer::wait_up_to`](crate::layer::RateLimitLayer::wait_up_to) |
//!
//! Booking needs a schedule: GCRA and the token bucket book the exact
//! time the cost fits, and the leaky bucket's queue is the same thing
//! with its capacity as the longest wait. A window or the sliding log
//! counts what happened inside it, and a booking in the next window would
//! not count there: with them a reservation is a check, and `wait_up_to`
//! refuses to build.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::{algorithm::Gcra, store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! // A webhook sender: 5 a second to each customer's endpoint.
//! let limiter = Limiter::new(MemoryStore::new(), Gcra::new(5, Duration::from_secs(1)).try_burst(1)?);
//! for event in 0..3 {
//!     // Waits 0, 200 and 400 ms; a wait beyond 10 s comes back denied.
//!     let d = limiter.until_ready("customer-42", 1, Duration::from_secs(10)).await?;
//!     assert!(d.allowed());
//!     // send(event).await;
//! #   let _ = event;
//! }
//! # Ok(()) }
//! ```
//!
//! A server that waits, in front of an internal service:
//!
//! ```
//! # fn main() -> Result<(), floodgate::ConfigError> {
//! use axum::{routing::post, Router};
//! use floodgate::{algorithm::TokenBucket, key::Header, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! let limiter = Limiter::new(MemoryStore::new(), TokenBucket::new(50, 50.0));
//! let app: Router = Router::new().route("/jobs", post(|| async { "queued" })).layer(
//!     RateLimitLayer::new(limiter, Header::try_new("x-tenant")?)
//!         // Hold a request up to 2 s for its turn; refuse beyond that.
//!         .wait_up_to(Duration::from_secs(2))?
//!         // At most 20 waiting per tenant, 2 000 in all.
//!         .max_waiting(20, 2_000),
//! );
//! # Ok(()) }
//! ```
//!
//! What a waiting server guarantees: a client that goes away while its
//! request waits gives the booking back; a gRPC call is never held past
//! its `grpc-timeout` (it is answered `RESOURCE_EXHAUSTED` at once, and
//! nothing is booked); the requests waiting are bounded per key and in all
//! (a request that finds no room is decided as without waiting); and
//! `floodgate_waiting_requests` and `floodgate_waits_total` show them.
//! Waiting costs a task, its request and a timer per request held: bound
//! it, and keep `wait_up_to` short next to your clients' own timeouts.
//!
//! ## Outbound limits: sharing a partner's quota
//!
//! Your workers call a partner's API that allows 100 requests a second
//! for your whole account. Each worker limiting itself to 100 / N breaks
//! as soon as N changes; a shared limit does not.
//! [`OutboundLimitLayer`](crate::layer::OutboundLimitLayer) wraps the
//! client: every request books its turn in the shared store and waits for
//! it (at most `max_wait`, else an
//! [`OutboundError::Limited`](crate::layer::OutboundError::Limited) you
//! can match, and nothing sent), and when the partner answers 429 or 503
//! with `Retry-After` anyway, the key is paused for **every** worker
//! ([`Limiter::block`](crate::Limiter::block), written to the store).
//!
//! ```
//! use floodgate::{algorithm::Gcra, layer::OutboundLimitLayer, store::MemoryStore, Limiter};
//! use std::time::Duration;
//! use tower::ServiceBuilder;
//!
//! // Ask for a little less than the partner allows: the network between
//! // the booked time and the partner's clock is not free.
//! let quota = Limiter::new(MemoryStore::new(), Gcra::new(95, Duration::from_secs(1)));
//! let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
//!     .build_http::<String>();
//! let client = ServiceBuilder::new()
//!     .layer(OutboundLimitLayer::new(quota, "api.partner.example").max_wait(Duration::from_secs(5)))
//!     .service(client);
//! # let _ = client;
//! ```
//!
//! Two quotas with different units (100 requests a second and 1 000 000
//! tokens a minute) are two outbound layers: one costing 1, one costing
//! the tokens a request will use (`cost_fn`), settled with what the
//! answer says (`actual_cost`).
//!
//! ## Costs known late
//!
//! An LLM call's cost is the tokens it used, known when the answer comes.
//! Charge an **estimate** when the request comes in, and **settle** when
//! the response says what it used:
//! [`RateLimitLayer::actual_cost`](crate::layer::RateLimitLayer::actual_cost)
//! reads it from a response header or from a
//! [`Cost`](crate::layer::Cost) the handler puts in the response's
//! extensions, and gives back or charges the difference. A **streamed**
//! answer knows its count only at its end: say it in a trailer
//! ([`ActualCost::Trailer`](crate::layer::ActualCost::Trailer), gRPC
//! trailing metadata or HTTP trailers) and the settlement waits for the
//! body's end; a client that leaves mid-stream leaves the estimate charged.
//!
//! When the actual cost is more than what remains, the key goes into
//! **debt** ([`Limiter::debit`](crate::Limiter::debit)): nothing is lost,
//! and the key's next requests are refused until time has paid it back,
//! with a `Retry-After` that says when. GCRA and the buckets keep the whole
//! debt; a window or the sliding log is charged up to its limit (full
//! until it ends). A response dropped before its head is known keeps its
//! estimate: choose the estimate as what a typical call costs, not the
//! most it can.
//!
//! Without a layer, [`Limiter::settle`](crate::Limiter::settle) does the
//! same for a cost charged earlier:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::{algorithm::TokenBucket, store::MemoryStore, Limiter};
//!
//! // 100 000 tokens a minute per customer.
//! let tokens = Limiter::new(MemoryStore::new(), TokenBucket::new(100_000, 100_000.0 / 60.0));
//! let estimate = 2_000;
//! if tokens.check("customer-7", estimate).await?.allowed() {
//!     let used = 3_250; // what the model said
//!     tokens.settle("customer-7", estimate, used).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! `examples/llm_gateway.rs` puts the three together: an axum proxy in
//! front of a model service, per API key calls and tokens a minute
//! (estimate, then settle), and one outbound limit towards the upstream
//! that obeys its 429s.
