//! A call of several keys on a Redis Cluster whose keys hash to different
//! slots: a script's keys must share a slot, so each slot's keys are
//! decided by calls of their own. A check tries every slot first, writing
//! nothing, and charges them only if all admit; when another request took
//! the room in between and a slot refuses then, the others give back what
//! they charged. No key keeps a charge for a refused request.
//!
//! Not atomic across slots: between the try and the charge another
//! request may take the room, and between a charge and its refund another
//! request may see it (and be denied by it). A check of several slots is
//! two calls a slot when it admits. A reservation is
//! decided as a check here (booking every slot at the same time would
//! take a second round).

use super::invoke::{Remote, Transport};
use crate::store::key::storage_key;
use crate::store::{Answer, Backend, Batch, Mode, Replies, StoreError, Target};
use redis::cluster_routing::Slot;

/// The slot of each target's key, when they are not all one.
pub(super) fn slots(batch: &Batch<'_>) -> Option<Vec<Slot>> {
    if batch.keys.len() < 2 {
        return None;
    }
    let slots: Vec<Slot> = batch
        .targets
        .iter()
        .enumerate()
        .map(|(i, t)| Slot::for_key(storage_key(&t.ns.head, batch.key_of(i)).as_bytes()))
        .collect();
    slots.iter().any(|s| *s != slots[0]).then_some(slots)
}

/// One slot's part of a call: the positions of its targets in the call,
/// the targets, their keys.
struct Part {
    at: Vec<usize>,
    targets: Vec<Target>,
    keys: Vec<String>,
}

/// Decide `batch`, whose targets are on the slots `slots`, one call per
/// slot.
pub(super) fn decide<T: Transport>(
    remote: &Remote<T>,
    batch: &Batch<'_>,
    slots: &[Slot],
) -> Answer {
    // In the order their first key comes: a handful of slots at most.
    let mut by_slot: Vec<(&Slot, Part)> = Vec::new();
    for (i, (target, slot)) in batch.targets.iter().zip(slots).enumerate() {
        let at = if let Some(at) = by_slot.iter().position(|(s, _)| *s == slot) {
            at
        } else {
            let part = Part {
                at: Vec::new(),
                targets: Vec::new(),
                keys: Vec::new(),
            };
            by_slot.push((slot, part));
            by_slot.len() - 1
        };
        let part = &mut by_slot[at].1;
        part.at.push(i);
        part.targets.push(target.clone());
        part.keys.push(batch.key_of(i).to_owned());
    }
    let parts: Vec<Part> = by_slot.into_iter().map(|(_, p)| p).collect();
    let (now, cost, lease, n) = (
        batch.now,
        batch.cost,
        batch.lease.to_owned(),
        batch.targets.len(),
    );
    let mode = match batch.mode {
        Mode::Reserve { .. } => Mode::Check,
        mode => mode,
    };
    let remote = remote.clone();
    Answer::Later(Box::pin(async move {
        let call = |part: &Part, mode: Mode| {
            let keys: Vec<&str> = part.keys.iter().map(String::as_str).collect();
            let batch = Batch {
                targets: &part.targets,
                key: &part.keys[0],
                keys: &keys,
                now,
                mode,
                cost,
                lease: &lease,
            };
            match remote.decide(&batch) {
                Answer::Later(f) => tokio::spawn(f),
                // A remote store always answers later.
                Answer::One(r) => tokio::spawn(async move { Ok(Replies::from_elem(r, 1)) }),
                Answer::PerTarget(r) => tokio::spawn(async move { Ok(Replies::from_vec(r)) }),
            }
        };
        // Every slot at once, then each answer in turn.
        let each = |mode: Mode| {
            let started: Vec<_> = parts.iter().map(|p| call(p, mode)).collect();
            async move {
                let mut answers = Vec::with_capacity(started.len());
                for handle in started {
                    answers.push(joined(handle.await)?);
                }
                Ok::<_, StoreError>(answers)
            }
        };
        let denied = |answers: &[Replies]| {
            parts.iter().zip(answers).any(|(p, replies)| {
                replies
                    .iter()
                    .zip(&p.targets)
                    .any(|(r, t)| !r.allowed() && !t.shadow)
            })
        };
        let answers = if mode == Mode::Check && cost > 0 {
            // A check: every slot tried first, writing nothing, so that a
            // request one slot refuses charges none (a charge given back
            // would leave the state a rounding away from untouched).
            let tried = each(Mode::Peek).await?;
            if denied(&tried) {
                tried
            } else {
                let answers = each(Mode::Check).await?;
                // Another request took the room in between: the slots that
                // charged give it back. Their replies stay what they said
                // (what the limit would leave had the request been
                // admitted), as one call on one server says them.
                if denied(&answers) {
                    for (part, replies) in parts.iter().zip(&answers) {
                        let charged = replies
                            .iter()
                            .zip(&part.targets)
                            .all(|(r, t)| r.allowed() || t.shadow);
                        if charged {
                            joined(call(part, Mode::Refund).await)?;
                        }
                    }
                }
                answers
            }
        } else {
            each(mode).await?
        };
        let mut out = Replies::from_elem(crate::algorithm::Reply::default(), n);
        for (part, replies) in parts.iter().zip(answers) {
            for (at, r) in part.at.iter().zip(replies) {
                out[*at] = r;
            }
        }
        Ok(out)
    }))
}

/// A part's answer, or its error (a part that could not run is the whole
/// call's error).
fn joined(
    handle: Result<Result<Replies, StoreError>, tokio::task::JoinError>,
) -> Result<Replies, StoreError> {
    handle.map_err(|e| StoreError::unavailable(format!("a cluster slot's call ended: {e}")))?
}
