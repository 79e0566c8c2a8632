//! Twin of `lease` in `lua/concurrency.lua`: at most `max` leases alive per
//! key, each expiring `lease_ms` after it was taken.

use super::reply::Reply;
use super::spec::{ms, State, Write, SLACK_MS};

/// One lease operation on a key's leases: acquire (`write`, not `refund`),
/// release (`refund`: the lease named `lease`), or count them (neither).
/// Alive means expiring after `now`.
pub(super) fn decide(
    (max, lease_ms): (u64, u64),
    state: &mut Option<State>,
    now: u64,
    (refund, write): (bool, bool),
    lease: &str,
) -> (Reply, Write) {
    let (had, mut leases) = match state.take() {
        Some(State::Leases(l)) => (true, l),
        _ => (false, Vec::new()),
    };
    if write {
        // As the script: forget expired leases, drop the one released.
        leases.retain(|(id, expires)| *expires > now && !(refund && &**id == lease));
    }
    let alive = |l: &[(Box<str>, u64)]| {
        let times = l.iter().map(|(_, e)| *e).filter(|e| *e > now);
        (
            times.clone().count() as u64,
            times.clone().min(),
            times.max(),
        )
    };
    let (mut n, _, _) = alive(&leases);
    let allowed = refund || n < max;
    let mut ttl = None;
    if allowed && write && !refund {
        leases.push((lease.into(), now + lease_ms));
        n += 1;
        ttl = Some(lease_ms + SLACK_MS as u64);
    }
    let (_, first, last) = alive(&leases);
    let until = |t: Option<u64>| t.map_or(0.0, |t| (t - now) as f64);
    let retry_ms = if allowed { -1 } else { ms(until(first)) };
    let reply = Reply {
        reason: crate::Reason::of(allowed, retry_ms),
        limit: max as i64,
        remaining: max.saturating_sub(n) as i64,
        reset_ms: ms(until(last)),
        retry_ms,
        delay_ms: 0,
    };
    if had || !leases.is_empty() {
        *state = Some(State::Leases(leases));
    }
    (reply, ttl)
}
