//! What a denial says (which limits, how long to wait), shared by the HTTP
//! and gRPC rejections.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

use crate::headers::{ceil_secs, LimitReport};

/// When the rejected request may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// After this long: the latest retry time of the denying limits.
    After(Duration),
    /// Never: the request costs more than some limit can hold.
    Never,
    /// No report denied the request, so there is nothing to say.
    Unknown,
}

/// The denying reports of a request, degraded ones included: a fallback
/// decision's denial is still why the request is rejected.
pub(crate) struct Denial<'r, 'a> {
    pub(crate) denied: Vec<&'r LimitReport<'a>>,
    pub(crate) retry: Retry,
}

impl<'r, 'a> Denial<'r, 'a> {
    pub(crate) fn of(reports: &'r [LimitReport<'a>]) -> Self {
        let denied: Vec<_> = reports.iter().filter(|r| r.decision.denied()).collect();
        let retry = if denied.is_empty() {
            Retry::Unknown
        } else {
            denied
                .iter()
                .map(|r| r.decision.retry_after())
                .try_fold(Duration::ZERO, |latest, d| d.map(|d| latest.max(d)))
                .map_or(Retry::Never, Retry::After)
        };
        Self { denied, retry }
    }

    /// The wire names of the denying limits, in order.
    pub(crate) fn violated(&self) -> Vec<Cow<'a, str>> {
        self.denied.iter().map(|r| r.wire_name()).collect()
    }

    /// One or two sentences for a person: which limits ("policies" on the
    /// wire, as the draft calls them), and how long to
    /// wait or why waiting will not help.
    pub(crate) fn detail(&self) -> String {
        match self.retry {
            Retry::Unknown => "Rate limit exceeded.".to_owned(),
            Retry::After(d) => {
                let mut s = String::from("Rate limit exceeded for ");
                push_names(&mut s, self.denied.iter().copied());
                let secs = ceil_secs(d);
                let unit = if secs == 1 { "second" } else { "seconds" };
                let _ = write!(s, ". Retry in {secs} {unit}.");
                s
            }
            Retry::Never => {
                let never = self
                    .denied
                    .iter()
                    .copied()
                    .filter(|r| r.decision.retry_after().is_none());
                let mut s = String::from("The request's cost exceeds the limit of ");
                push_names(&mut s, never);
                s.push_str("; it will never be admitted.");
                s
            }
        }
    }
}

/// `policy "a"` or `policies "a", "b"`, with each policy's limit.
fn push_names<'r, 'a: 'r>(
    s: &mut String,
    reports: impl Iterator<Item = &'r LimitReport<'a>> + Clone,
) {
    let noun = if reports.clone().count() == 1 {
        "policy"
    } else {
        "policies"
    };
    s.push_str(noun);
    for (i, r) in reports.enumerate() {
        let sep = if i == 0 { " " } else { ", " };
        let _ = write!(
            s,
            "{sep}\"{}\" (limit {})",
            r.wire_name(),
            r.decision.limit()
        );
    }
}

/// Milliseconds, rounded up, for `grpc-retry-pushback-ms`.
#[cfg(feature = "grpc")]
pub(crate) fn ceil_millis(d: Duration) -> u64 {
    let extra = u128::from(!d.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(d.as_millis() + extra).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Quota;
    use crate::{Decision, Reason};

    const QUOTA: Quota = Quota {
        units: 10,
        window: Duration::from_secs(1),
    };

    fn denied(retry_ms: Option<u64>) -> Decision {
        Decision::new(
            Reason::OverLimit,
            10,
            0,
            Duration::from_secs(1),
            retry_ms.map(Duration::from_millis),
            Duration::ZERO,
        )
    }

    #[test]
    fn retry_is_the_latest_denial() {
        let a = denied(Some(200));
        let b = denied(Some(1_200));
        let ok = Decision::within_limit(10, 0, Duration::ZERO);
        let reports = [
            LimitReport::new("a", QUOTA, &a),
            LimitReport::new("ok", QUOTA, &ok),
            LimitReport::new("b", QUOTA, &b),
        ];
        let r = Denial::of(&reports);
        assert_eq!(r.retry, Retry::After(Duration::from_millis(1_200)));
        assert_eq!(r.violated(), ["a", "b"]);
        assert_eq!(
            r.detail(),
            r#"Rate limit exceeded for policies "a" (limit 10), "b" (limit 10). Retry in 2 seconds."#
        );
    }

    #[test]
    fn one_never_fitting_denial_means_never() {
        let a = denied(Some(200));
        let b = denied(None);
        let reports = [
            LimitReport::new("a", QUOTA, &a),
            LimitReport::new("b", QUOTA, &b),
        ];
        let r = Denial::of(&reports);
        assert_eq!(r.retry, Retry::Never);
        assert_eq!(
            r.detail(),
            r#"The request's cost exceeds the limit of policy "b" (limit 10); it will never be admitted."#
        );
    }

    #[test]
    fn no_denial_is_unknown() {
        let r = Denial::of(&[]);
        assert_eq!(r.retry, Retry::Unknown);
        assert_eq!(r.detail(), "Rate limit exceeded.");
    }

    #[test]
    fn one_second_is_singular() {
        let a = denied(Some(1));
        let reports = [LimitReport::new("a", QUOTA, &a)];
        assert!(Denial::of(&reports)
            .detail()
            .ends_with("Retry in 1 second."));
    }

    #[cfg(feature = "grpc")]
    #[test]
    fn millis_round_up() {
        assert_eq!(ceil_millis(Duration::ZERO), 0);
        assert_eq!(ceil_millis(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_millis(Duration::from_micros(1_001)), 2);
        assert_eq!(ceil_millis(Duration::MAX), u64::MAX);
    }
}
