//! Runs the seed's two experiments through all six algorithms and prints
//! the tables in the seed's format.
//!
//! ```text
//! cargo run --example compare                             # in-memory store
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example compare   # Redis
//! ```
//! On Redis it writes keys under the prefix `floodgate-compare`, and deletes
//! them before each run.

use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::Limiter;
use std::time::Duration;

/// A window boundary, as in the seed.
const T0: u64 = 1_791_860_000_000;
const SEC: Duration = Duration::from_secs(1);
const PREFIX: &str = "floodgate-compare";

/// The seed's steady-overload traffic: Python's `random.seed(4)` sequence.
fn seed4_times() -> Vec<u64> {
    include_str!("../tests/fixtures/steady_overload_seed4.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.parse().expect("fixture time"))
        .collect()
}

struct Run {
    store: Store,
    redis_url: Option<String>,
}

impl Run {
    fn new() -> Result<Self, Box<dyn std::error::Error>> {
        Ok(match std::env::var("REDIS_URL") {
            Ok(url) => Run {
                store: RedisStore::from_url(&url)?.into(),
                redis_url: Some(url),
            },
            Err(_) => Run {
                store: MemoryStore::new().into(),
                redis_url: None,
            },
        })
    }

    /// Forget every key of earlier runs.
    fn reset(&mut self) -> Result<(), Box<dyn std::error::Error>> {
        match &self.redis_url {
            None => self.store = MemoryStore::new().into(),
            Some(url) => {
                let mut c = redis::Client::open(url.as_str())?.get_connection()?;
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(format!("{PREFIX}:*"))
                    .query(&mut c)?;
                for k in keys {
                    let _: () = redis::cmd("DEL").arg(k).query(&mut c)?;
                }
            }
        }
        Ok(())
    }

    async fn admitted<A: Algorithm>(
        &mut self,
        alg: A,
        client: &str,
        times: &[u64],
    ) -> Result<Vec<bool>, Box<dyn std::error::Error>> {
        self.reset()?;
        let clock = ManualClock::new(times[0]);
        let limiter = Limiter::builder(self.store.clone(), alg)
            .prefix(PREFIX)
            .clock(clock.clone())
            .build()?;
        let mut out = Vec::with_capacity(times.len());
        for &t in times {
            clock.set(t);
            out.push(limiter.check(client, 1).await?.allowed);
        }
        Ok(out)
    }

    async fn all(
        &mut self,
        client: &str,
        times: &[u64],
    ) -> Result<Vec<(&'static str, Vec<bool>)>, Box<dyn std::error::Error>> {
        Ok(vec![
            (
                "fixed window",
                self.admitted(FixedWindow::new(10, SEC), client, times)
                    .await?,
            ),
            (
                "sliding log",
                self.admitted(SlidingLog::new(10, SEC), client, times)
                    .await?,
            ),
            (
                "sliding counter",
                self.admitted(SlidingWindow::new(10, SEC), client, times)
                    .await?,
            ),
            (
                "token bucket",
                self.admitted(TokenBucket::new(10, 10.0), client, times)
                    .await?,
            ),
            (
                "leaky bucket",
                self.admitted(LeakyBucket::new(10, 10.0), client, times)
                    .await?,
            ),
            (
                "gcra",
                self.admitted(Gcra::new(10, SEC), client, times).await?,
            ),
        ])
    }
}

fn worst_1s(times: &[u64], admitted: &[bool]) -> usize {
    let acc: Vec<u64> = times
        .iter()
        .zip(admitted)
        .filter(|(_, a)| **a)
        .map(|(t, _)| *t)
        .collect();
    (T0..T0 + 9000)
        .step_by(5)
        .map(|s| acc.iter().filter(|&&t| s <= t && t < s + 1000).count())
        .max()
        .unwrap_or(0)
}

fn count(a: &[bool]) -> usize {
    a.iter().filter(|x| **x).count()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut run = Run::new()?;
    match &run.redis_url {
        Some(url) => println!("store: Redis at {url}\n"),
        None => println!("store: in memory (set REDIS_URL to run on Redis)\n"),
    }

    println!(
        "The boundary burst: limit 10 per second; 15 requests at t = 0.990 s, 15 at t = 1.010 s\n"
    );
    let times: Vec<u64> = [T0 + 990; 15].into_iter().chain([T0 + 1010; 15]).collect();
    for (name, a) in run.all("ana", &times).await? {
        let (first, second) = (count(&a[..15]), count(&a[15..]));
        println!(
            "{name:16} allowed {first:2} at 0.990s + {second:2} at 1.010s = {:2} within 20 ms",
            first + second
        );
    }

    println!(
        "\nSteady overload: 200 requests at random times over 10 s (about 20/s) against 10/s\n"
    );
    let times = seed4_times();
    for (name, a) in run.all("bob", &times).await? {
        println!(
            "{name:16} accepted {:3} of 200 in 10 s; most in any 1-s span: {}",
            count(&a),
            worst_1s(&times, &a)
        );
    }
    run.reset()?;
    Ok(())
}
