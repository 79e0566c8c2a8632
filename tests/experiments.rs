//! The two experiments every algorithm is measured by, reproduced exactly on
//! both stores: the boundary burst and the steady overload (the experiments
//! and their expected tables: `tests/common/experiments.rs`).

mod common;

use common::{experiments, RedisServer};
use floodgate::store::{MemoryStore, RedisStore};

#[tokio::test]
async fn boundary_burst_in_memory() {
    experiments::boundary_burst(|| MemoryStore::new().into()).await;
}

#[tokio::test]
async fn steady_overload_in_memory() {
    experiments::steady_overload(|| MemoryStore::new().into()).await;
}

#[tokio::test]
async fn boundary_burst_on_redis() {
    let redis = RedisServer::start();
    experiments::boundary_burst(|| RedisStore::from_url(&redis.url()).unwrap().into()).await;
}

#[tokio::test]
async fn steady_overload_on_redis() {
    let redis = RedisServer::start();
    experiments::steady_overload(|| RedisStore::from_url(&redis.url()).unwrap().into()).await;
}
