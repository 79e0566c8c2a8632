//! What the rate-limit layer writes for a limiter's own limits that only
//! changes with the limits: made once per version of them (see
//! [`Limiter::set_algorithm`](crate::Limiter::set_algorithm)), so that a
//! request under them allocates no names.

use crate::algorithm::Quota;
use crate::headers::{ceil_secs, policy_field, Kept, LimitReport, LimitValues};
use crate::limiter::Plan;
use crate::Decision;
use std::sync::Arc;
use std::time::Duration;

/// The header values of one version of a limiter's own limits.
pub(crate) struct OwnFields {
    /// Each limit's name and quota, in order.
    pub(crate) limits: Box<[(Arc<str>, Quota)]>,
    /// `RateLimit-Policy` for these limits.
    pub(crate) policy_field: Option<Kept>,
    /// The `RateLimit` values of the limit, when there is exactly one
    /// (with several, the value names whichever is most restrictive):
    /// built once each, so a response's costs a copy, not a formatting.
    pub(crate) limit_values: Option<Arc<LimitValues>>,
}

impl OwnFields {
    /// The header values of `plan`'s limits.
    pub(crate) fn of(plan: &Plan) -> Self {
        let limits: Box<[_]> = plan.limits().map(|(n, q)| (n.clone(), q)).collect();
        // Any decision will do: the field reads only names and quotas.
        let decision = Decision::within_limit(0, 0, Duration::ZERO);
        let reports: Vec<_> = limits
            .iter()
            .map(|(name, quota)| LimitReport::new(name, *quota, &decision))
            .collect();
        let policy_field = policy_field(&reports).map(Kept::new);
        let limit_values = match &*limits {
            [(name, quota)] => Some(Arc::new(LimitValues::new(
                name,
                quota.units,
                ceil_secs(quota.window),
            ))),
            _ => None,
        };
        Self {
            limits,
            policy_field,
            limit_values,
        }
    }
}
