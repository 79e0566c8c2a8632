//! The seed 000 experiments, reproduced exactly on both stores (the
//! experiments and their expected tables: `tests/common/seed.rs`).

mod common;

use common::{seed, RedisServer};
use floodgate::store::{MemoryStore, RedisStore};

#[tokio::test]
async fn boundary_burst_in_memory() {
    seed::boundary_burst(|| MemoryStore::new().into()).await;
}

#[tokio::test]
async fn steady_overload_in_memory() {
    seed::steady_overload(|| MemoryStore::new().into()).await;
}

#[tokio::test]
async fn boundary_burst_on_redis() {
    let redis = RedisServer::start();
    seed::boundary_burst(|| RedisStore::from_url(&redis.url()).unwrap().into()).await;
}

#[tokio::test]
async fn steady_overload_on_redis() {
    let redis = RedisServer::start();
    seed::steady_overload(|| RedisStore::from_url(&redis.url()).unwrap().into()).await;
}
