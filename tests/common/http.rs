//! Serving an app over real TCP, and running a test on both stores.

use floodgate::store::{MemoryStore, RedisStore, Store};
use std::net::SocketAddr;

/// Serve `app` on a free loopback port, the way axum apps are served: with
/// the peer address as `ConnectInfo` (so peer-IP keys work), HTTP/1 and
/// HTTP/2 without TLS on one port. Returns its address.
pub async fn serve_at(app: axum::Router) -> SocketAddr {
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
    addr
}

/// [`serve_at`], returning the base URL.
pub async fn serve(app: axum::Router) -> String {
    format!("http://{}", serve_at(app).await)
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

/// Wait until `f` holds (at most 2 s): settlements after a response run
/// once the response is written, on a task of their own.
pub async fn eventually(mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..200 {
        if f().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("condition not reached in 2 s");
}

/// A login endpoint: `200` for `?password=right`, else `401`.
pub fn login() -> axum::routing::MethodRouter {
    axum::routing::get(|req: axum::extract::Request| async move {
        if req.uri().query() == Some("password=right") {
            http::StatusCode::OK
        } else {
            http::StatusCode::UNAUTHORIZED
        }
    })
}
