//! The `RateLimit` values of one limit, each built once and shared after.

use std::sync::OnceLock;

use http::HeaderValue;

use super::ietf::limit_field;
use super::kept::Kept;
use super::report::{ceil_secs, LimitReport};
use crate::Decision;

/// How many values a table holds at most (`OnceLock<Kept>` is 56 bytes:
/// 56 KiB a layer at most, filled as values are first written).
const MAX_VALUES: u64 = 1024;
/// The largest `t` a table holds: the seconds until the quota is back in
/// full, small for most requests under a per-second or per-minute limit.
const MAX_T: u64 = 63;

/// The `RateLimit` values (`"name";r=<r>;t=<t>`) of the layer's own limit,
/// when it is the only one: the values near the top of the quota (what most
/// requests of most keys see) are built on first use and then [`Kept`]:
/// each response gets one without formatting it.
pub(crate) struct LimitValues {
    name: Box<str>,
    /// The decisions' limit: `r` is looked up as `limit - r`.
    limit: u64,
    /// How many `r` below the limit are held, for each `t` in `0..=max_t`.
    span: u64,
    max_t: u64,
    values: Box<[OnceLock<Kept>]>,
}

impl LimitValues {
    /// A table for the limit `name` of `limit` units whose resets take at
    /// most `max_wait_secs` (its window, rounded up).
    pub(crate) fn new(name: &str, limit: u64, max_wait_secs: u64) -> Self {
        let max_t = max_wait_secs.min(MAX_T);
        let span = (MAX_VALUES / (max_t + 1)).min(limit.saturating_add(1));
        let len = usize::try_from(span * (max_t + 1)).unwrap_or(0);
        Self {
            name: name.into(),
            limit,
            span,
            max_t,
            values: (0..len).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The kept value of `d`, a decision of this very limit (the caller
    /// knows: it is the limiter's one own limit), if the table holds it.
    pub(crate) fn own(&self, d: &Decision) -> Option<HeaderValue> {
        self.slot(d)?.get().map(Kept::get)
    }

    /// The `RateLimit` value of `reports`, if it is one this table holds.
    pub(crate) fn get(&self, reports: &[LimitReport<'_>]) -> Option<HeaderValue> {
        let [report] = reports else { return None };
        let d = report.decision;
        if d.is_degraded() || report.name != &*self.name {
            return None;
        }
        let slot = self.slot(d)?;
        if let Some(value) = slot.get() {
            return Some(value.get());
        }
        let value = Kept::new(limit_field(reports)?);
        Some(slot.get_or_init(|| value).get())
    }

    /// Where the value of `d` is kept, if the table has a place for it:
    /// by how far below the limit it leaves the key, and by its `t`.
    fn slot(&self, d: &Decision) -> Option<&OnceLock<Kept>> {
        if d.limit() != self.limit {
            return None;
        }
        let below = self.limit.checked_sub(d.remaining())?;
        let t = ceil_secs(d.reset_after().max(d.retry_after().unwrap_or_default()));
        if below >= self.span || t > self.max_t {
            return None;
        }
        self.values
            .get(usize::try_from(t * self.span + below).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Decision, Quota};
    use std::time::Duration;

    const QUOTA: Quota = Quota {
        units: 100,
        window: Duration::from_secs(60),
    };

    fn value(values: &LimitValues, name: &str, d: &Decision) -> Option<HeaderValue> {
        values.get(&[LimitReport::new(name, QUOTA, d)])
    }

    #[test]
    fn a_held_value_is_the_one_written_and_built_once() {
        let values = LimitValues::new("api", 100, 60);
        let held = |v: &LimitValues| v.values.iter().filter(|s| s.get().is_some()).count();
        for (i, (r, ms)) in [(100, 0), (99, 1), (90, 16_200), (85, 60_000)]
            .into_iter()
            .enumerate()
        {
            let d = Decision::within_limit(100, r, Duration::from_millis(ms));
            let reports = [LimitReport::new("api", QUOTA, &d)];
            assert_eq!(values.own(&d), None, "not held before it is written");
            let first = values.get(&reports).expect("held");
            assert_eq!(values.own(&d).as_ref(), Some(&first), "the same slot");
            assert_eq!(Some(&first), limit_field(&reports).as_ref());
            assert_eq!(held(&values), i + 1, "built once, then held");
            let again = values.get(&reports).unwrap();
            assert_eq!(held(&values), i + 1);
            assert_eq!(again, first);
        }
    }

    #[test]
    fn what_the_table_does_not_hold_is_left_to_the_writer() {
        let values = LimitValues::new("api", 100, 600);
        let d = Decision::within_limit(100, 99, Duration::from_secs(1));
        assert!(value(&values, "api", &d).is_some());
        assert!(value(&values, "other", &d).is_none());
        let d = Decision::within_limit(100, 99, Duration::from_secs(MAX_T + 1));
        assert!(value(&values, "api", &d).is_none());
        // 64 values of t: 16 of r below the limit.
        let d = Decision::within_limit(100, 100 - 16, Duration::from_secs(1));
        assert!(value(&values, "api", &d).is_none());
        let d = Decision::within_limit(100, 100 - 15, Duration::from_secs(1));
        assert!(value(&values, "api", &d).is_some());
        let d = Decision::within_limit(50, 49, Duration::from_secs(1));
        assert!(value(&values, "api", &d).is_none());
        let d = Decision::within_limit(100, 99, Duration::from_secs(1)).mark_degraded();
        assert!(value(&values, "api", &d).is_none());
        let d = Decision::within_limit(100, 99, Duration::from_secs(1));
        let two = [
            LimitReport::new("api", QUOTA, &d),
            LimitReport::new("api", QUOTA, &d),
        ];
        assert!(values.get(&two).is_none());
    }
}
