//! Serving an app over real TCP, and running a test on both stores.

use floodgate::store::{MemoryStore, RedisStore, Store};
use std::net::SocketAddr;

/// Serve `app` on a free loopback port (with connect info, so peer-IP keys
/// work) and return its base URL.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    format!("http://{addr}")
}

/// Run `test` once on a memory store and once on a fresh Redis.
pub async fn on_both_stores<F, Fut>(test: F)
where
    F: Fn(Store) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    test(MemoryStore::new().into()).await;
    let redis = super::RedisServer::start();
    test(RedisStore::from_url(&redis.url()).unwrap().into()).await;
}
