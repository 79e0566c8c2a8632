//! A cluster call redirected (`ASK`, `MOVED`) where redis-rs' own
//! redirections run out.

use redis::aio::ConnectionLike;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::SingleNodeRoutingInfo;
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

/// Rounds of redis-rs' own retries one call may take when they end on a
/// redirection (see [`query`]).
const REDIRECT_ROUNDS: usize = 3;

/// One call, routed by its key; redirections and backoffs are left to
/// redis-rs, except where it ends on `ASK` or `MOVED`.
///
/// redis-rs (1.8, also 2.0) follows `ASK` by sending `ASKING` and then the
/// command as two requests on the target's shared, multiplexed connection.
/// Any other request sent to that node in between consumes the one-shot
/// `ASKING` flag; the command then gets `MOVED` back to the source, which
/// answers `ASK` again, and under load the retries run out in this
/// ping-pong. So when the error is still `ASK`, the call is sent once more as
/// one pipeline, `ASKING` and the command back to back, which nothing can
/// come between; when it is `MOVED`, the whole call is made again, routed by
/// the slot map redis-rs has refreshed meanwhile. Both are safe: `ASK` and
/// `MOVED` mean the call did not run.
pub(super) async fn query(conn: &mut ClusterConnection, call: &Cmd) -> RedisResult<Value> {
    let mut round = 0;
    loop {
        round += 1;
        let mut result = conn
            .req_packed_command(call)
            .await
            .and_then(super::library::top_error);
        if let Err(e) = &result {
            if let Some((host, port)) = ask_target(e) {
                result = asking(conn, call, host, port).await;
            }
        }
        match result {
            Err(e) if round < REDIRECT_ROUNDS && redirected(&e) => {}
            other => return other,
        }
    }
}

fn redirected(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(ServerErrorKind::Ask | ServerErrorKind::Moved)
    )
}

/// The node an `ASK` error sends the call to.
fn ask_target(e: &RedisError) -> Option<(String, u16)> {
    if e.kind() != ErrorKind::Server(ServerErrorKind::Ask) {
        return None;
    }
    let (addr, _slot) = e.redirect_node()?;
    let (host, port) = addr.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

/// `ASKING` and `call` as one pipeline to the node at `host:port`.
async fn asking(
    conn: &mut ClusterConnection,
    call: &Cmd,
    host: String,
    port: u16,
) -> RedisResult<Value> {
    let mut pipe = redis::pipe();
    pipe.cmd("ASKING").add_command(call.clone());
    let replies = conn
        .route_pipeline(pipe, 0, 2, SingleNodeRoutingInfo::ByAddress { host, port })
        .await?;
    let reply = replies
        .into_iter()
        .nth(1)
        .ok_or_else(|| RedisError::from((ErrorKind::Client, "no reply after ASKING")))?;
    super::library::top_error(reply)
}
