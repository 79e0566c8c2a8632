//! One limit's decision, as the wire formats see it.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::time::Duration;

use crate::Decision;
use crate::Quota;

/// One limit's decision for a request: what the header fields and rejection
/// bodies report.
///
/// A request checked against several limits gives one report per limit.
///
/// The name goes on the wire as an RFC 9651 String, which allows only
/// printable ASCII (`0x20..=0x7e`). Any other character (non-ASCII, control
/// characters) is replaced by `_` everywhere the name is written, headers and
/// bodies alike, so a client can match them up: `"café"` is sent as
/// `"caf_"`. Quotes and backslashes are kept (they are escaped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LimitReport<'a> {
    /// The limit's name, `"default"` unless configured.
    pub name: &'a str,
    /// The limit's quota: units per window.
    pub quota: Quota,
    /// The decision the limit made for this request.
    pub decision: &'a Decision,
}

impl<'a> LimitReport<'a> {
    /// A report of `decision` made under the limit `name`.
    pub fn new(name: &'a str, quota: Quota, decision: &'a Decision) -> Self {
        Self {
            name,
            quota,
            decision,
        }
    }

    /// The name as written on the wire (see the type's docs).
    pub(crate) fn wire_name(&self) -> Cow<'a, str> {
        sanitize_name(self.name)
    }

    /// How long until the quota resets, or until a denied request may be
    /// retried when that is later: what `t` and `X-RateLimit-Reset` report.
    pub(crate) fn wait(&self) -> Duration {
        let d = self.decision;
        d.reset_after().max(d.retry_after().unwrap_or_default())
    }
}

fn is_sf_string_char(c: char) -> bool {
    matches!(c, '\x20'..='\x7e')
}

pub(crate) fn sanitize_name(name: &str) -> Cow<'_, str> {
    if name.chars().all(is_sf_string_char) {
        Cow::Borrowed(name)
    } else {
        let replaced = name
            .chars()
            .map(|c| if is_sf_string_char(c) { c } else { '_' })
            .collect();
        Cow::Owned(replaced)
    }
}

/// The report the single-limit fields (`RateLimit`, `X-RateLimit-*`)
/// describe: the most restrictive of the non-degraded reports, ranked as
/// [`Limiter::check`](crate::Limiter::check) ranks the limits of a request
/// (a denial before an admission; among denials the longest wait, among
/// admissions the fewest remaining), the first given on a tie. So the
/// header names the limit whose numbers `check` returns.
pub(crate) fn most_restrictive<'r, 'a>(
    reports: &'r [LimitReport<'a>],
) -> Option<&'r LimitReport<'a>> {
    reports.iter().filter(|r| !r.decision.is_degraded()).fold(
        None,
        |worst: Option<&LimitReport<'_>>, r| match worst {
            Some(w) if Decision::cmp_restrictive(r.decision, w.decision) != Ordering::Greater => {
                Some(w)
            }
            _ => Some(r),
        },
    )
}

/// Whole seconds, rounded up.
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    let extra = u64::from(d.subsec_nanos() > 0);
    d.as_secs().saturating_add(extra)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reason;

    fn decision(allowed: bool, remaining: u64, reset_ms: u64, retry_ms: Option<u64>) -> Decision {
        Decision::new(
            if allowed {
                Reason::WithinLimit
            } else {
                Reason::OverLimit
            },
            10,
            remaining,
            Duration::from_millis(reset_ms),
            retry_ms.map(Duration::from_millis),
            Duration::ZERO,
        )
    }

    const QUOTA: Quota = Quota {
        units: 10,
        window: Duration::from_secs(1),
    };

    #[test]
    fn sanitizes_only_when_needed() {
        assert!(matches!(sanitize_name("api"), Cow::Borrowed("api")));
        assert_eq!(sanitize_name("caf\u{e9}"), "caf_");
        assert_eq!(sanitize_name("a\nb\x7f"), "a_b_");
        assert_eq!(sanitize_name("q\"\\"), "q\"\\");
    }

    #[test]
    fn most_restrictive_prefers_denial_then_fewest_then_longest() {
        let a = decision(true, 1, 500, None);
        let b = decision(false, 3, 100, Some(100));
        let c = decision(true, 0, 900, None);
        let reports = [
            LimitReport::new("a", QUOTA, &a),
            LimitReport::new("b", QUOTA, &b),
            LimitReport::new("c", QUOTA, &c),
        ];
        assert_eq!(most_restrictive(&reports).map(|r| r.name), Some("b"));
        assert_eq!(most_restrictive(&reports[..1]).map(|r| r.name), Some("a"));
        let d = decision(true, 0, 100, None);
        let tie = [
            LimitReport::new("d", QUOTA, &d),
            LimitReport::new("c", QUOTA, &c),
        ];
        assert_eq!(most_restrictive(&tie).map(|r| r.name), Some("c"));
    }

    #[test]
    fn degraded_reports_are_never_chosen() {
        let a = decision(false, 0, 500, Some(500)).mark_degraded();
        let reports = [LimitReport::new("a", QUOTA, &a)];
        assert!(most_restrictive(&reports).is_none());
    }

    #[test]
    fn wait_is_the_later_of_reset_and_retry() {
        let a = decision(false, 0, 500, Some(2_000));
        assert_eq!(
            LimitReport::new("a", QUOTA, &a).wait(),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn ceil_secs_rounds_up_and_saturates() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1_001)), 2);
        assert_eq!(ceil_secs(Duration::MAX), u64::MAX);
    }
}
