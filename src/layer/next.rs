//! What a decision leads to, for either layer: reject at once, call the
//! service (now, or after the wait booked for it), and what the admitted
//! response carries.

use super::responder::{RejectionKind, Responder};
use super::settle::{ResponseHead, Settlement};
use super::settle_at_end::SettleAtEnd;
use super::waiting::{Seat, Waiter};
use super::OwnFields;
use crate::concurrency::{ConcurrencyLimiter, Lease};
use crate::headers::{write_with_policy, FieldSink, HeaderStyle, LimitReport, Prepared, ResetUnit};
use crate::limiter::{Outcome, Plan};
use crate::{Decision, Error, Reason};
use bytes::Bytes;
use http::{HeaderMap, Response};
use smallvec::SmallVec;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How the rate-limit layer answers.
#[derive(Clone)]
pub(crate) struct RateResponder {
    pub(crate) responder: Responder,
}

impl RateResponder {
    /// `f` of the reports of each limit's decision: under the limiter's
    /// own limits (`own`, those the decision was made under), or under
    /// `plan`'s.
    fn with_reports<R>(
        own: &OwnFields,
        plan: Option<&Plan>,
        decided: &Outcome,
        f: impl FnOnce(&[LimitReport<'_>]) -> R,
    ) -> R {
        let each = decided.each_limit();
        let limit = |i: usize| match plan {
            None => own.limits.get(i).map(|(name, quota)| (&**name, *quota)),
            Some(plan) => plan
                .names
                .get(i)
                .zip(plan.targets.get(i))
                .map(|(name, t)| (&**name, t.spec.quota())),
        };
        // Limits in shadow mode are not reported: they limit no client.
        let mask = decided.shadow_mask();
        // One limit, the common case: its report on the stack.
        if let ([d], Some((name, quota)), 0) = (&each[..], limit(0), mask) {
            return f(&[LimitReport::new(name, quota, d)]);
        }
        let reports: SmallVec<[LimitReport<'_>; 4]> = each
            .iter()
            .enumerate()
            .map_while(|(i, d)| limit(i).map(|(name, quota)| (i, LimitReport::new(name, quota, d))))
            .filter(|(i, _)| *i >= 16 || mask & (1 << i) == 0)
            .map(|(_, report)| report)
            .collect();
        f(&reports)
    }
}

/// How the concurrency layer answers.
#[derive(Clone)]
pub(crate) struct LeaseResponder {
    pub(crate) responder: Responder,
    /// The `Retry-After` of a rejection: a slot frees when any request of
    /// the key ends, which the layer cannot foresee.
    pub(crate) retry_after: Duration,
}

/// What a request of the rate-limit layer brings to its decision's
/// outcome: `plan` is a quota resolved for this request (`None`: the
/// limiter's own limits, of version `generation`: those the decision
/// started under, whatever changed since).
pub(crate) struct RateTicket {
    pub(crate) plan: Option<Arc<Plan>>,
    pub(crate) generation: u64,
    pub(crate) settlement: Option<Settlement>,
    /// A reservation (the layer may hold the request): its seat in the
    /// waiting room, if any, and its charge, given back if the request
    /// waits and never gets served.
    pub(crate) reserved: Option<Box<(Option<Seat>, Settlement)>>,
}

/// What a request of the concurrency layer brings: the lease `id` of `key`
/// being acquired.
pub(crate) struct LeaseTicket {
    pub(crate) limiter: ConcurrencyLimiter,
    pub(crate) key: String,
    pub(crate) id: String,
}

/// What a decision leads to.
pub(crate) enum Next {
    /// The layer answers by itself.
    Reject(Response<Bytes>),
    /// The inner service is called now.
    Call(Admitted),
    /// The inner service is called after a wait: the time booked for the
    /// request (a reservation, or a leaky bucket's place in its queue).
    Delay(Duration, Admitted, Option<Box<Waiter>>),
}

/// An admitted request: the rate-limit fields its response gets, its
/// charge to settle once the status is known, and the lease it holds.
pub(crate) struct Admitted {
    fields: ResponseFields,
    settlement: Option<Settlement>,
    lease: Option<Box<Lease>>,
}

/// The rate-limit fields of an admitted response, written at its decision:
/// the response future carries their values, not the layer (whose shared
/// count every request would change) nor the decision.
enum ResponseFields {
    /// The same whatever the response.
    Fixed(Prepared),
    /// A request only tried: the fields as charged, for a response that
    /// counts, and else without the charge its trial assumed.
    Trial(Box<[Prepared; 2]>),
}

impl RateResponder {
    /// What `result` leads to; `headers` are the request's (the request
    /// itself stays where it is: it is large to move).
    /// `own`: the header values of the limiter's own limits the decision
    /// was made under.
    pub(crate) fn next(
        &self,
        ticket: RateTicket,
        own: &OwnFields,
        result: Result<Outcome, Error>,
        headers: &HeaderMap,
    ) -> Next {
        let RateTicket {
            plan,
            settlement,
            reserved,
            ..
        } = ticket;
        let served = served(&self.responder, result, headers, |d| {
            Self::with_reports(own, plan.as_deref(), d, |reports| {
                self.responder
                    .reject(RejectionKind::Limited { reports }, headers)
            })
        });
        let (decided, d) = match served {
            Ok(served) => served,
            Err(response) => return Next::Reject(response),
        };
        // Shadow mode charged nothing to give back for a denial, nor an
        // exemption for an exempt key.
        let exempt = d.reason() == Reason::Exempt;
        let settlement = settlement.filter(|_| d.allowed() && !exempt);
        let trial = settlement.as_ref().filter(|s| s.is_trial()).map(|s| s.cost);
        let plan = plan.as_deref();
        let fields = match trial {
            // An exempt request is not limited: no rate-limit fields.
            None if exempt => ResponseFields::Fixed(Prepared::default()),
            None => ResponseFields::Fixed(self.fields(own, plan, &decided, &d)),
            Some(cost) => {
                let uncharged = decided.map_each(|d| {
                    if d.allowed() {
                        d.with_remaining(d.remaining().saturating_add(cost))
                    } else {
                        d
                    }
                });
                let overall = uncharged.overall();
                ResponseFields::Trial(Box::new([
                    self.fields(own, plan, &decided, &d),
                    self.fields(own, plan, &uncharged, &overall),
                ]))
            }
        };
        let admitted = Admitted {
            fields,
            settlement,
            lease: None,
        };
        if d.allowed() && !d.delay().is_zero() {
            let waiter = reserved.map(|r| {
                let (seat, reservation) = *r;
                Box::new(Waiter::new(seat, Some(reservation)))
            });
            Next::Delay(d.delay(), admitted, waiter)
        } else {
            Next::Call(admitted)
        }
    }

    /// The rate-limit fields of `decided` (which adds up to `overall`),
    /// under `plan`'s limits or the limiter's own.
    fn fields(
        &self,
        own: &OwnFields,
        plan: Option<&Plan>,
        decided: &Outcome,
        overall: &Decision,
    ) -> Prepared {
        let mut fields = Prepared::default();
        let style = self.responder.style;
        if style == HeaderStyle::None {
            return fields;
        }
        // The limiter's one own limit in the IETF style, the usual case:
        // both values are kept ones, so nothing is built.
        if let (None, HeaderStyle::Ietf, Some(policy), Some(values)) =
            (plan, style, &own.policy_field, &own.limit_values)
        {
            if decided.is_single() && !overall.is_degraded() {
                if let Some(limit) = values.own(overall) {
                    fields.ietf(Some(policy.get()), Some(limit));
                    return fields;
                }
            }
        }
        let epoch = matches!(
            style,
            HeaderStyle::Legacy {
                reset: ResetUnit::EpochSeconds
            }
        );
        // The clock is read for epoch resets only.
        let at = if epoch {
            SystemTime::now()
        } else {
            SystemTime::UNIX_EPOCH
        };
        let is_own = plan.is_none();
        // The kept policy lists every limit, those in shadow mode too.
        let policy = own
            .policy_field
            .as_ref()
            .filter(|_| is_own && decided.shadow_mask() == 0);
        let values = own.limit_values.as_deref().filter(|_| is_own);
        Self::with_reports(own, plan, decided, |reports| {
            write_with_policy(style, reports, at, &mut fields, policy, values);
        });
        fields
    }
}

impl LeaseResponder {
    /// What `result` leads to; `headers` are the request's.
    pub(crate) fn next(
        &self,
        ticket: LeaseTicket,
        result: Result<Outcome, Error>,
        headers: &HeaderMap,
    ) -> Next {
        let LeaseTicket { limiter, key, id } = ticket;
        let served = served(&self.responder, result, headers, |d| {
            let d = d.overall();
            let wait = self.retry_after;
            let full = Decision::over_limit(d.limit(), d.remaining(), wait, wait);
            let quota = limiter.quota();
            let reports = [LimitReport::new(limiter.name(), quota, &full)];
            self.responder
                .reject(RejectionKind::Limited { reports: &reports }, headers)
        });
        let decided = match served {
            Ok((decided, _)) => decided,
            Err(response) => return Next::Reject(response),
        };
        Next::Call(Admitted {
            fields: ResponseFields::Fixed(Prepared::default()),
            settlement: None,
            // Shadow mode serves a request that got no lease.
            lease: limiter.lease(key, id, &decided).ok().map(Box::new),
        })
    }
}

/// The decision of a request the layer serves (and what its limits add up
/// to), or the layer's answer to one it refuses: 503 when the decision
/// could not be made or the failure policy denies, 403 for a key on the
/// deny list, `limited` (429) when a limit denies, unless in shadow mode.
// The refusal is no error to propagate but the layer's answer, built once
// and moved once to the response: boxing it would allocate on every one.
#[allow(clippy::result_large_err)]
fn served(
    responder: &Responder,
    result: Result<Outcome, Error>,
    headers: &HeaderMap,
    limited: impl FnOnce(&Outcome) -> Response<Bytes>,
) -> Result<(Outcome, Decision), Response<Bytes>> {
    let decided = match result {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(error = %e, limiter = %responder.name, "rate-limit decision failed; answering 503");
            let kind = RejectionKind::Unavailable { retry_after: None };
            return Err(responder.reject(kind, headers));
        }
    };
    let d = decided.overall();
    if d.allowed() {
        return Ok((decided, d));
    }
    if responder.shadow {
        tracing::info!(limiter = %responder.name, reason = %d.reason(), "shadow mode: request over the limit served anyway");
        return Ok((decided, d));
    }
    Err(match d.reason() {
        Reason::FailClosed | Reason::FailOpen => {
            let kind = RejectionKind::Unavailable {
                retry_after: d.retry_after(),
            };
            responder.reject(kind, headers)
        }
        Reason::Blocked => responder.reject(RejectionKind::Blocked, headers),
        _ => limited(&decided),
    })
}

impl Admitted {
    /// The response's head is known: write its fields, settle its charge
    /// (or, when a trailer will say the cost, hand the settlement on); the
    /// lease goes on with the body.
    pub(crate) fn finish<B>(self, response: &mut Response<B>) -> Rider {
        let owed = self.settlement.as_ref().map(|s| {
            s.owed(&ResponseHead {
                status: response.status(),
                headers: response.headers(),
                extensions: response.extensions(),
            })
        });
        let fields = match self.fields {
            ResponseFields::Fixed(fields) => fields,
            // A request only tried: the fields as charged if it owes its
            // cost, else without the charge its trial assumed.
            ResponseFields::Trial(both) => {
                let [charged, uncharged] = *both;
                if owed.is_some_and(|o| o > 0) {
                    charged
                } else {
                    uncharged
                }
            }
        };
        fields.write_to(response.headers_mut());
        let mut at_end = None;
        if let (Some(settlement), Some(owed)) = (self.settlement, owed) {
            // A response that owes nothing needs no trailer to say so.
            match settlement.awaited_trailer(response.headers()) {
                Some(trailer) if owed > 0 => {
                    at_end = Some(SettleAtEnd::new(settlement, owed, trailer));
                }
                _ => settlement.settle(owed),
            }
        }
        Rider {
            lease: self.lease,
            at_end,
        }
    }
}

/// What rides on an admitted response's body until it ends: the
/// concurrency layer's lease, or the rate-limit layer's settlement when a
/// trailer will say the cost.
pub(crate) struct Rider {
    pub(crate) lease: Option<Box<Lease>>,
    pub(crate) at_end: Option<SettleAtEnd>,
}
