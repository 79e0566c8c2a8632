//! `RedisStore` outside a Tokio runtime, and its transports.

use super::invoke::Transport;
use super::*;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// The first poll of `f`, outside any Tokio runtime.
fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
    pin!(f).poll(&mut Context::from_waker(Waker::noop()))
}

/// Outside a Tokio runtime, a store that would make a connection
/// fails naming what is missing, instead of panicking in `tokio::spawn`.
#[test]
fn outside_a_runtime_no_connection_is_made() {
    let cmd = redis::cmd("PING");
    let store = RedisStore::from_url("redis://127.0.0.1:1").unwrap();
    let cluster = RedisClusterStore::from_nodes(["redis://127.0.0.1:1"]).unwrap();
    for sent in [
        poll_once(store.remote.transport().send(&cmd, false)),
        poll_once(cluster.remote.transport().send(&cmd, false)),
    ] {
        match sent {
            Poll::Ready(Err(e)) => {
                assert_eq!(e.kind(), crate::store::StoreErrorKind::Unavailable);
                assert!(e.to_string().contains("no Tokio runtime"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }
}

/// Outside a Tokio runtime, a limiter over Redis decides by its failure
/// policy: an error naming the missing runtime, or failing open.
#[test]
fn outside_a_runtime_the_failure_policy_decides() {
    use crate::algorithm::Gcra;
    use crate::failure::FailurePolicy;
    use crate::Limiter;
    let store = RedisStore::from_url("redis://127.0.0.1:1").unwrap();
    let gcra = Gcra::new(1, Duration::from_secs(1));
    let strict = Limiter::builder(store.clone(), gcra)
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    match poll_once(strict.check("k", 1)) {
        Poll::Ready(Err(e)) => assert!(e.to_string().contains("no Tokio runtime"), "{e}"),
        other => panic!("{other:?}"),
    }
    let open = Limiter::new(store, gcra);
    assert!(matches!(poll_once(open.check("k", 1)), Poll::Ready(Ok(_))));
}

#[test]
fn malformed_urls_name_the_field() {
    assert_eq!(RedisStore::from_url("nope://x").unwrap_err().field(), "url");
    assert!(RedisStore::from_url("redis://127.0.0.1:1").is_ok());
    let cluster = RedisClusterStore::from_url("nope://x").unwrap_err();
    assert_eq!(cluster.field(), "nodes");
    assert!(RedisClusterStore::from_nodes(["redis://127.0.0.1:1"]).is_ok());
}
