//! Runs three experiments through all six algorithms, prints a table for
//! each, and with `--charts DIR` draws each as an SVG chart in `DIR`.
//!
//! The first two are the boundary burst (a burst straddling a window
//! boundary) and the steady overload (10 s of overload at a steady rate),
//! printed one line per algorithm; the third is a client that bursts, idles
//! and bursts again over a steady trickle.
//!
//! ```text
//! cargo run --example compare                                   # in-memory store, tables only
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example compare  # Redis
//! cargo run --example compare -- --charts docs/charts           # and the charts of the guide
//! ```
//!
//! The charts are the same bytes on every run with the same store (the
//! subtitle names the store): the traffic is fixed, the clock is a
//! `ManualClock`, and nothing in the drawing depends on time or on hash
//! order. On Redis it writes keys under the prefix `floodgate-compare`, and
//! deletes them before each run.

mod charts;

use charts::{Figure, Panel};
use floodgate::algorithm::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket,
};
use floodgate::clock::ManualClock;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{Decision, Limiter};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// A window boundary, and the origin of every experiment's times (the `T0`
/// of the steady overload's fixture).
const T0: u64 = 1_791_860_000_000;
const SEC: Duration = Duration::from_secs(1);
const PREFIX: &str = "floodgate-compare";

/// The steady overload's traffic: Python's `random.seed(4)` sequence.
fn steady_overload_times() -> Vec<u64> {
    include_str!("../../tests/fixtures/steady_overload.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.parse().expect("fixture time"))
        .collect()
}

/// The third experiment: a steady trickle of 4 requests per second for 10 s,
/// and three bursts of 25 requests 2 ms apart (48 ms each) after 2 to 3 s of
/// idling: one inside a window, one straddling the boundary at 5 s, one
/// inside a window again. Returns the sorted times and each burst's first
/// and last time.
fn burst_idle_burst_times() -> (Vec<u64>, Vec<(u64, u64)>) {
    let burst_starts = [1_600, 4_976, 7_600];
    let trickle = (0..40).map(|k| T0 + 130 + 250 * k);
    let bursts = burst_starts
        .iter()
        .flat_map(|&s| (0..25).map(move |i| T0 + s + 2 * i));
    let mut times: Vec<u64> = trickle.chain(bursts).collect();
    times.sort_unstable();
    let spans = burst_starts
        .iter()
        .map(|&s| (T0 + s, T0 + s + 48))
        .collect();
    (times, spans)
}

/// One algorithm's run through one experiment, with everything the table
/// and the chart show, computed once.
struct Trial {
    name: &'static str,
    decisions: Vec<Decision>,
    /// Times of the admitted requests.
    admitted_at: Vec<u64>,
    /// The most admitted in any 1-s span, and where the first such span starts.
    worst: (usize, u64),
    /// The leaky bucket's queue (the only algorithm that delays).
    queue: Option<Queue>,
}

/// What leaves a leaky bucket's queue, and when.
struct Queue {
    /// Admission time + delay of each admitted request, sorted.
    served_at: Vec<u64>,
    /// The most served in any 1-s span.
    worst: usize,
    longest_delay: Duration,
}

impl Trial {
    fn new(name: &'static str, times: &[u64], decisions: Vec<Decision>) -> Self {
        let admitted: Vec<(u64, Duration)> = times
            .iter()
            .zip(&decisions)
            .filter(|(_, d)| d.allowed())
            .map(|(t, d)| (*t, d.delay()))
            .collect();
        let admitted_at: Vec<u64> = admitted.iter().map(|(t, _)| *t).collect();
        let queue = admitted.iter().any(|(_, d)| !d.is_zero()).then(|| {
            let mut served_at: Vec<u64> = admitted
                .iter()
                .map(|(t, d)| t + d.as_millis() as u64)
                .collect();
            served_at.sort_unstable();
            Queue {
                worst: worst_1s(&served_at).0,
                served_at,
                longest_delay: admitted.iter().map(|(_, d)| *d).max().unwrap_or_default(),
            }
        });
        Trial {
            name,
            worst: worst_1s(&admitted_at),
            admitted_at,
            decisions,
            queue,
        }
    }

    /// How many of the requests in `range` (indices) were admitted.
    fn admitted_of(&self, range: std::ops::Range<usize>) -> usize {
        self.decisions[range].iter().filter(|d| d.allowed()).count()
    }

    /// How many requests sent in `[from, to]` (times) were admitted.
    fn admitted_within(&self, (from, to): (u64, u64)) -> usize {
        self.admitted_at
            .iter()
            .filter(|&&t| from <= t && t <= to)
            .count()
    }

    /// The chart panel: the caption carries the counts the table prints.
    fn panel(&self, caption: String, worst: (u64, u64)) -> Panel {
        Panel {
            caption,
            admitted: self.admitted_at.clone(),
            worst,
            served: self.queue.as_ref().map(|q| q.served_at.clone()),
        }
    }

    /// The usual caption: admitted, worst 1 s, and for the leaky bucket
    /// what leaves its queue.
    fn caption(&self, sent: usize) -> String {
        let mut c = format!(
            "{}: {} of {sent} admitted, worst 1 s: {}",
            self.name,
            self.admitted_at.len(),
            self.worst.0
        );
        if let Some(q) = &self.queue {
            let _ = write!(c, " (queue out: {})", q.worst);
        }
        c
    }

    /// The shaded span of the worst 1 s.
    fn worst_span(&self) -> (u64, u64) {
        (self.worst.1, self.worst.1 + 1000)
    }
}

/// The leaky bucket's queue in one experiment, for the footnote.
struct QueueNote {
    experiment: &'static str,
    algorithm: &'static str,
    longest_delay: Duration,
    /// The most that left the queue in any 1-s span.
    worst: usize,
}

impl QueueNote {
    fn of(experiment: &'static str, trials: &[Trial]) -> Option<Self> {
        trials.iter().find_map(|t| {
            t.queue.as_ref().map(|q| QueueNote {
                experiment,
                algorithm: t.name,
                longest_delay: q.longest_delay,
                worst: q.worst,
            })
        })
    }
}

/// The footnote under the tables, once: the leaky bucket admits what the
/// token bucket admits, but holds each request in its queue until its turn.
fn queue_footnote(notes: &[QueueNote]) {
    let Some(first) = notes.first() else {
        return;
    };
    println!(
        "\n{} admits what TokenBucket admits, but each admitted request waits in its queue \
         until its turn:",
        first.algorithm
    );
    for n in notes {
        println!(
            "  {}: waits of at most {} ms; at most {} leave the queue in any 1-s span",
            n.experiment,
            n.longest_delay.as_millis(),
            n.worst
        );
    }
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

    async fn decisions<A: Algorithm>(
        &mut self,
        alg: A,
        client: &str,
        times: &[u64],
    ) -> Result<Vec<Decision>, Box<dyn std::error::Error>> {
        self.reset()?;
        let clock = ManualClock::new(times[0]);
        let limiter = Limiter::builder(self.store.clone(), alg)
            .prefix(PREFIX)
            .clock(clock.clone())
            .build()?;
        let mut out = Vec::with_capacity(times.len());
        for &t in times {
            clock.set(t);
            out.push(limiter.check(client, 1).await?);
        }
        Ok(out)
    }

    async fn all(
        &mut self,
        client: &str,
        times: &[u64],
    ) -> Result<Vec<Trial>, Box<dyn std::error::Error>> {
        let out = |name, decisions| Trial::new(name, times, decisions);
        Ok(vec![
            out(
                "FixedWindow",
                self.decisions(FixedWindow::new(10, SEC), client, times)
                    .await?,
            ),
            out(
                "SlidingLog",
                self.decisions(SlidingLog::new(10, SEC), client, times)
                    .await?,
            ),
            out(
                "SlidingWindow",
                self.decisions(SlidingWindow::new(10, SEC), client, times)
                    .await?,
            ),
            out(
                "TokenBucket",
                self.decisions(TokenBucket::new(10, 10.0), client, times)
                    .await?,
            ),
            out(
                "LeakyBucket",
                self.decisions(LeakyBucket::new(10, 10.0), client, times)
                    .await?,
            ),
            out(
                "Gcra",
                self.decisions(Gcra::new(10, SEC), client, times).await?,
            ),
        ])
    }
}

/// The most admitted in any 1-s span: a 1-s window slid in 5 ms steps from
/// `T0` to 9 s, or on to the last admitted request where that is later (the
/// steady overload's traffic ends before 10 s; the leaky bucket's queue runs
/// on past it). Also returns where the first such span starts.
fn worst_1s(accepted: &[u64]) -> (usize, u64) {
    let end = accepted.last().map_or(T0 + 9000, |&t| t.max(T0 + 9000));
    let mut best = (0, T0);
    for s in (T0..=end).step_by(5) {
        let n = accepted.iter().filter(|&&t| s <= t && t < s + 1000).count();
        if n > best.0 {
            best = (n, s);
        }
    }
    best
}

struct Options {
    /// Where to draw the charts: `--charts DIR`; none without it.
    charts: Option<PathBuf>,
}

impl Options {
    fn from_args() -> Result<Self, String> {
        let mut charts = None;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--charts" => {
                    let dir = args
                        .next()
                        .ok_or("--charts needs a directory: --charts DIR")?;
                    charts = Some(PathBuf::from(dir));
                }
                other => {
                    return Err(format!(
                        "unknown argument {other:?}: the only option is --charts DIR"
                    ))
                }
            }
        }
        Ok(Options { charts })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let opts = Options::from_args().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut run = Run::new()?;
    let store = if let Some(url) = &run.redis_url {
        println!("store: Redis at {url}\n");
        "Redis"
    } else {
        println!("store: in memory (set REDIS_URL to run on Redis)\n");
        "the in-memory store"
    };
    let subtitle = format!(
        "Limit 10 per second for all six (token and leaky bucket: capacity 10 at 10/s; GCRA: \
         burst 10). Decisions by floodgate on {store}."
    );
    let mut figures = Vec::new();

    println!(
        "The boundary burst: limit 10 per second; 15 requests at t = 0.990 s, 15 at t = 1.010 s\n"
    );
    let times: Vec<u64> = [T0 + 990; 15].into_iter().chain([T0 + 1010; 15]).collect();
    let trials = run.all("ana", &times).await?;
    let mut panels = Vec::new();
    for o in &trials {
        let (first, second) = (o.admitted_of(0..15), o.admitted_of(15..30));
        println!(
            "{:16} allowed {first:2} at 0.990s + {second:2} at 1.010s = {:2} within 20 ms",
            o.name,
            first + second
        );
        panels.push(o.panel(
            format!(
                "{}: {first} + {second} = {} admitted within 20 ms",
                o.name,
                first + second
            ),
            (T0 + 990, T0 + 1010),
        ));
    }
    let mut queues: Vec<QueueNote> = QueueNote::of("the boundary burst", &trials)
        .into_iter()
        .collect();
    figures.push(Figure {
        file: "boundary_burst.svg",
        title: "The boundary burst: 15 requests at t = 0.990 s, 15 at t = 1.010 s".into(),
        subtitle: subtitle.clone(),
        worst_label: "the 20 ms of the burst",
        sent: times.clone(),
        x_ms: (T0 + 960, T0 + 1040),
        boundaries: vec![T0 + 1000],
        bursts: vec![],
        panels,
    });

    println!(
        "\nSteady overload: 200 requests at random times over 10 s (about 20/s) against 10/s\n"
    );
    let times = steady_overload_times();
    let trials = run.all("bob", &times).await?;
    let mut panels = Vec::new();
    for o in &trials {
        println!(
            "{:16} accepted {:3} of 200 in 10 s; most in any 1-s span: {}",
            o.name,
            o.admitted_at.len(),
            o.worst.0
        );
        panels.push(o.panel(o.caption(times.len()), o.worst_span()));
    }
    queues.extend(QueueNote::of("steady overload", &trials));
    figures.push(Figure {
        file: "steady_overload.svg",
        title: "Steady overload: 200 requests at random times over 10 s (about 20/s)".into(),
        subtitle: subtitle.clone(),
        worst_label: "the 1-s span with the most admitted",
        sent: times.clone(),
        x_ms: (T0, T0 + 11_000),
        boundaries: (1..=10).map(|s| T0 + 1000 * s).collect(),
        bursts: vec![],
        panels,
    });

    let (times, bursts) = burst_idle_burst_times();
    println!(
        "\nBurst, idle, burst: {} requests in 10 s against 10/s; a trickle of 4/s, and bursts of \
         25 in 48 ms at t = 1.600 s, 4.976 s (across the window boundary at 5 s) and 7.600 s\n",
        times.len()
    );
    let trials = run.all("cat", &times).await?;
    let mut panels = Vec::new();
    for o in &trials {
        let per_burst: Vec<String> = bursts
            .iter()
            .map(|&b| format!("{:2}", o.admitted_within(b)))
            .collect();
        println!(
            "{:16} accepted {:3} of {} in 10 s ({} of the bursts); most in any 1-s span: {}",
            o.name,
            o.admitted_at.len(),
            times.len(),
            per_burst.join(" +"),
            o.worst.0
        );
        panels.push(o.panel(o.caption(times.len()), o.worst_span()));
    }
    queues.extend(QueueNote::of("burst, idle, burst", &trials));
    figures.push(Figure {
        file: "burst_idle_burst.svg",
        title: "Burst, idle, burst: a trickle of 4/s and three bursts of 25 requests in 48 ms"
            .into(),
        subtitle,
        worst_label: "the 1-s span with the most admitted",
        sent: times.clone(),
        x_ms: (T0, T0 + 11_000),
        boundaries: (1..=10).map(|s| T0 + 1000 * s).collect(),
        bursts,
        panels,
    });
    run.reset()?;
    queue_footnote(&queues);

    match opts.charts {
        None => println!("\ncharts: not drawn (`-- --charts DIR` draws them in DIR)"),
        Some(dir) => {
            std::fs::create_dir_all(&dir)?;
            println!();
            for f in &figures {
                let path = dir.join(f.file);
                charts::draw(f, T0, &path)?;
                println!("chart: {}", path.display());
            }
        }
    }
    Ok(())
}
