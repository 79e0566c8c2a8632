//! A gRPC greeter (tonic) behind two stacked floodgate limits: 5 calls per
//! second per client IP (GCRA), then, per API key from the `x-api-key`
//! metadata, a token bucket of 3 refilled at 1 per second.
//!
//! A call over a limit gets `RESOURCE_EXHAUSTED` with `RetryInfo` and
//! `QuotaFailure` details, a call without a key gets `INVALID_ARGUMENT`, and
//! allowed calls carry the `ratelimit` and `ratelimit-policy` fields as
//! response metadata.
//!
//! ```text
//! cargo run --example tonic_greeter --features grpc                                   # server, in-memory store
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example tonic_greeter --features grpc  # server, Redis store
//! cargo run --example tonic_greeter --features grpc -- client                         # in another terminal
//! ```
//!
//! gRPC needs floodgate's `grpc` feature (off by default):
//! `tower-floodgate = { version = "0.1", features = ["grpc"] }`. Without it
//! the layer answers gRPC calls as HTTP (429) and `PeerIp` cannot read
//! tonic's peer address.
//!
//! The client fires a burst of 8 calls with one key, prints each status and
//! retry delay, waits as long as `RetryInfo` says, and calls again. `ADDR`
//! (default `127.0.0.1:50051`) sets the address of both. No `protoc` needed:
//! `pb/helloworld.rs` is the code generated from `pb/helloworld.proto`.

// Generated code, left as generated: not held to the crate\'s lints.
#[allow(clippy::pedantic)]
mod pb {
    include!("pb/helloworld.rs");
}

mod greeter {
    use super::pb::greeter_client::GreeterClient;
    use super::pb::greeter_server::{Greeter, GreeterServer};
    use super::pb::{HelloReply, HelloRequest};
    use floodgate::algorithm::{Gcra, TokenBucket};
    use floodgate::key::{Header, PeerIp};
    use floodgate::layer::RateLimitLayer;
    use floodgate::store::{MemoryStore, RedisStore, Store};
    use floodgate::Limiter;
    use std::time::Duration;
    use tonic::metadata::MetadataMap;
    use tonic::transport::server::TcpIncoming;
    use tonic::transport::Server;
    use tonic::{Code, Request, Response, Status};
    use tonic_types::StatusExt;

    type Error = Box<dyn std::error::Error + Send + Sync>;

    /// Answers `Hello, <name>!`.
    struct Hello;

    #[tonic::async_trait]
    impl Greeter for Hello {
        async fn say_hello(
            &self,
            request: Request<HelloRequest>,
        ) -> Result<Response<HelloReply>, Status> {
            let name = request.into_inner().name;
            let message = format!("Hello, {name}!");
            Ok(Response::new(HelloReply { message }))
        }
    }

    /// The store: Redis when `REDIS_URL` is set, else in memory. Redis is
    /// probed at start-up: with the default fail-open policy a store that
    /// cannot decide would admit every request.
    async fn store_from_env() -> Result<Store, Error> {
        let Ok(url) = std::env::var("REDIS_URL") else {
            return Ok(MemoryStore::new().into());
        };
        let redis = RedisStore::from_url(&url)?;
        let report = redis.probe().await?;
        for warning in report.warnings() {
            eprintln!("floodgate: warning: {warning}");
        }
        Ok(redis.into())
    }

    fn addr() -> String {
        std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:50051".into())
    }

    pub async fn server() -> Result<(), Error> {
        let store = store_from_env().await?;
        // The names keep the two limiters' keys apart in the store and name
        // the policies in headers and in QuotaFailure.
        let per_ip = Limiter::builder(store.clone(), Gcra::new(5, Duration::from_secs(1)))
            .name("per-ip")
            .build()?;
        let per_key = Limiter::builder(store, TokenBucket::new(3, 1.0))
            .name("per-key")
            .build()?;
        let listener = tokio::net::TcpListener::bind(addr()).await?;
        let addr = listener.local_addr()?;
        println!("gRPC greeter on {addr} (plaintext HTTP/2)");
        println!("try: cargo run --example tonic_greeter -- client");
        println!(
            "or, with grpcurl (the server has no reflection, so give it the .proto):\n  \
             grpcurl -plaintext -import-path examples/pb -proto helloworld.proto \
             -H 'x-api-key: demo' -d '{{\"name\":\"ana\"}}' {addr} helloworld.Greeter/SayHello"
        );
        Server::builder()
            // The first layer is the outer one: the IP limit runs first, so
            // a client inventing API keys is still held to its IP's budget.
            // tonic puts the peer address (`TcpConnectInfo`) where PeerIp
            // finds it.
            .layer(RateLimitLayer::new(per_ip, PeerIp::new()))
            .layer(RateLimitLayer::new(per_key, Header::try_new("x-api-key")?))
            .add_service(GreeterServer::new(Hello))
            .serve_with_incoming(TcpIncoming::from(listener))
            .await?;
        Ok(())
    }

    /// The rate-limit fields of a response, one line.
    fn fields(metadata: &MetadataMap) -> String {
        let values: Vec<_> = metadata
            .get_all("ratelimit")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        values.join(", ")
    }

    /// One call; prints how it went and returns the retry delay if denied.
    async fn call(
        client: &mut GreeterClient<tonic::transport::Channel>,
        label: &str,
        key: Option<&str>,
    ) -> Result<Option<Duration>, Error> {
        let mut request = Request::new(HelloRequest { name: "ana".into() });
        if let Some(key) = key {
            request.metadata_mut().insert("x-api-key", key.parse()?);
        }
        match client.say_hello(request).await {
            Ok(response) => {
                let ratelimit = fields(response.metadata());
                let message = response.into_inner().message;
                println!("{label:>4} OK                  {message:<14} ratelimit: {ratelimit}");
                Ok(None)
            }
            Err(status) => {
                let retry = status
                    .get_details_retry_info()
                    .and_then(|info| info.retry_delay);
                let policies: Vec<_> = status
                    .get_details_quota_failure()
                    .map(|q| q.violations.into_iter().map(|v| v.subject).collect())
                    .unwrap_or_default();
                let code = format!("{:?}", status.code());
                let wait = retry.map_or_else(String::new, |d| format!("retry in {d:?}"));
                println!(
                    "{label:>4} {code:<19} {wait:<14} {} {}",
                    policies.join(","),
                    status.message()
                );
                if status.code() != Code::ResourceExhausted
                    && status.code() != Code::InvalidArgument
                {
                    return Err(status.into());
                }
                Ok(retry)
            }
        }
    }

    pub async fn client() -> Result<(), Error> {
        let addr = addr();
        let mut client = GreeterClient::connect(format!("http://{addr}")).await?;
        println!("a burst of 8 calls with x-api-key: demo");
        let mut wait = Duration::ZERO;
        for i in 1..=8 {
            if let Some(retry) = call(&mut client, &format!("#{i}"), Some("demo")).await? {
                wait = wait.max(retry);
            }
        }
        println!("waiting {wait:?}, the longest RetryInfo delay, then:");
        tokio::time::sleep(wait).await;
        call(&mut client, "#9", Some("demo")).await?;
        println!("and without x-api-key:");
        call(&mut client, "#10", None).await?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    match std::env::args().nth(1).as_deref() {
        Some("client") => greeter::client().await,
        None | Some("server") => greeter::server().await,
        Some(other) => Err(format!("unknown mode {other:?}: use `client` or nothing").into()),
    }
}
