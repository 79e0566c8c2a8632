//! With a debug listener, every decision is in a `floodgate.decide` span,
//! on the memory store and on Redis; without one, none is made.

mod common;

use floodgate::algorithm::Gcra;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::Limiter;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Records the names of the spans entered (a span made but never entered
/// would not hold the decision).
struct Spans {
    level: Level,
    names: Arc<Mutex<Vec<&'static str>>>,
    made: Mutex<Vec<&'static str>>,
    entered: Mutex<std::collections::HashSet<u64>>,
}

impl Subscriber for Spans {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= self.level
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut made = self.made.lock().unwrap();
        made.push(span.metadata().name());
        Id::from_u64(made.len() as u64)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, id: &Id) {
        let i = id.into_u64();
        let name = self.made.lock().unwrap()[i as usize - 1];
        // Count each span once, however many times its future is polled.
        if self.entered.lock().unwrap().insert(i) {
            self.names.lock().unwrap().push(name);
        }
    }
    fn exit(&self, _: &Id) {}
}

/// The spans made while `store` decides twice, with a listener at `level`.
fn spans(store: Store, level: Level) -> Vec<&'static str> {
    let names = Arc::new(Mutex::new(Vec::new()));
    let subscriber = Spans {
        level,
        names: names.clone(),
        made: Mutex::new(Vec::new()),
        entered: Mutex::new(Default::default()),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        rt.block_on(async {
            let limiter = Limiter::builder(store, Gcra::new(10, Duration::from_secs(1)))
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap();
            limiter.check("ana", 1).await.unwrap();
            limiter.check_all("ana", 1).await.unwrap();
        });
    });
    let names = names.lock().unwrap().clone();
    names
}

#[test]
fn decisions_are_in_a_span_for_a_debug_listener_only() {
    let redis = common::RedisServer::start();
    type MakeStore = fn(&str) -> Store;
    let stores: Vec<(&str, MakeStore)> = vec![
        ("memory", |_| MemoryStore::new().into()),
        ("redis", |url| RedisStore::from_url(url).unwrap().into()),
    ];
    for (name, store) in stores {
        let debug = spans(store(&redis.url()), Level::DEBUG);
        let decide = debug.iter().filter(|n| **n == "floodgate.decide").count();
        assert_eq!(decide, 2, "{name}: {debug:?}");
        let info = spans(store(&redis.url()), Level::INFO);
        assert!(
            !info.contains(&"floodgate.decide"),
            "{name}: no span without a debug listener: {info:?}"
        );
    }
}
