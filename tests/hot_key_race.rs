//! Many tasks on one hot key, in the debug build `cargo test` uses (where
//! an integer overflow panics instead of wrapping).
//!
//! Each task reads the clock before the allotments' lock, so a task that
//! read it earlier can reach the lock after one that read it later and
//! recorded a later instant (a slice taken "at" it). The clock here makes
//! that happen all the time instead of once in a while: its readings jump
//! back by up to 9 ms from one read to the next, as two tasks' readings
//! can arrive at the lock out of order. Before the allotments kept their
//! own latest instant, `now - taken` underflowed here on nearly every run
//! (a panic in debug, nonsense ages in release).

mod common;

use floodgate::algorithm::{FixedWindow, TokenBucket};
use floodgate::clock::Clock;
use floodgate::store::MemoryStore;
use floodgate::{HotKeys, Limiter};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A clock whose readings go back and forth by up to 9 ms around a time
/// that moves forward by 1 ms every 64 readings.
#[derive(Default)]
struct OutOfOrder {
    reads: AtomicU64,
}

impl Clock for OutOfOrder {
    fn now_ms(&self) -> u64 {
        let n = self.reads.fetch_add(1, Ordering::Relaxed);
        const JUMPS: [u64; 8] = [9, 0, 4, 7, 1, 8, 2, 5];
        1_000_000 + n / 64 + JUMPS[(n % 8) as usize]
    }
}

const TASKS: usize = 64;
const CHECKS: usize = 400;

/// `TASKS` tasks × `CHECKS` checks of one key; every answer's numbers
/// stay within the limit and the window.
async fn hammer<A: floodgate::algorithm::Algorithm>(
    limiter: Limiter<A>,
    limit: u64,
    window: Duration,
) {
    let admitted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (limiter, admitted) = (limiter.clone(), admitted.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..CHECKS {
                let d = limiter.check("celebrity", 1).await.expect("a decision");
                assert!(
                    d.remaining() <= limit,
                    "remaining {} > {limit}",
                    d.remaining()
                );
                assert!(
                    d.reset_after() <= window,
                    "reset after {:?}",
                    d.reset_after()
                );
                if d.allowed() {
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        // A panic inside a task (an overflow) fails the test here.
        t.await.expect("a task panicked");
    }
    assert!(admitted.load(Ordering::Relaxed) > 0);
}

#[test]
fn many_tasks_on_one_hot_fixed_window_key_never_see_time_run_backwards() {
    let window = Duration::from_secs(60);
    let limiter = Limiter::builder(MemoryStore::new(), FixedWindow::new(1_000_000, window))
        .clock(OutOfOrder::default())
        .hot_keys(HotKeys::new(2).threshold(1))
        .build()
        .unwrap();
    // Timers on (`common::runtime`): a request that meets a slice being
    // taken waits for it under the limiter's timeout.
    common::runtime().block_on(hammer(limiter, 1_000_000, window));
}

#[test]
fn many_tasks_on_one_hot_token_bucket_key_never_see_time_run_backwards() {
    let limiter = Limiter::builder(MemoryStore::new(), TokenBucket::new(1_000_000, 1_000.0))
        .clock(OutOfOrder::default())
        .hot_keys(HotKeys::new(2).threshold(1))
        .build()
        .unwrap();
    // A bucket's reset is when it is full again: at most 1 000 s here.
    common::runtime().block_on(hammer(limiter, 1_000_000, Duration::from_secs(1_000)));
}
