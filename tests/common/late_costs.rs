//! What the late-cost tests share: a token limiter on a clock the test
//! holds, and waiting for a settlement made in the background.

use floodgate::algorithm::TokenBucket;
use floodgate::clock::ManualClock;
use floodgate::store::Store;
use floodgate::Limiter;

/// 1 000 tokens a minute (one every 60 ms), on a clock the test moves.
pub fn tokens(store: Store, clock: &ManualClock) -> Limiter<TokenBucket> {
    Limiter::builder(store, TokenBucket::new(1000, 1000.0 / 60.0))
        .name("tokens")
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// The tokens left for `key`, once any settlement in the background is done
/// (`expected`).
pub async fn settles_at(limiter: &Limiter<TokenBucket>, key: &str, expected: u64) {
    super::http::eventually(async || limiter.peek(key).await.unwrap().remaining() == expected)
        .await;
}
