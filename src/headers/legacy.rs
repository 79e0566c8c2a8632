//! `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderValue;

use super::fields::FieldSink;
use super::report::{ceil_secs, most_restrictive, LimitReport};
use super::ResetUnit;

/// Writes the three fields for the most restrictive report, replacing any
/// present: they are single numbers, so two values would be ambiguous.
pub(crate) fn write(
    reset: ResetUnit,
    reports: &[LimitReport<'_>],
    now: SystemTime,
    headers: &mut impl FieldSink,
) {
    let Some(report) = most_restrictive(reports) else {
        return;
    };
    let wait = report.wait();
    let reset = match reset {
        ResetUnit::DeltaSeconds => ceil_secs(wait),
        ResetUnit::EpochSeconds => epoch_secs_after(now, wait),
    };
    headers.legacy([
        HeaderValue::from(report.decision.limit()),
        HeaderValue::from(report.decision.remaining()),
        HeaderValue::from(reset),
    ]);
}

/// Unix time in whole seconds, rounded up, of `now + after`.
///
/// A clock before 1970 counts as 1970; the sum saturates.
pub(crate) fn epoch_secs_after(now: SystemTime, after: Duration) -> u64 {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    ceil_secs(since_epoch.saturating_add(after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_rounds_up_once() {
        let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        assert_eq!(
            epoch_secs_after(now, Duration::from_millis(750)),
            1_700_000_001
        );
        assert_eq!(
            epoch_secs_after(now, Duration::from_millis(751)),
            1_700_000_002
        );
        assert_eq!(epoch_secs_after(now, Duration::ZERO), 1_700_000_001);
    }

    #[test]
    fn epoch_survives_odd_clocks() {
        let before = UNIX_EPOCH - Duration::from_secs(10);
        assert_eq!(epoch_secs_after(before, Duration::from_secs(3)), 3);
        assert_eq!(epoch_secs_after(UNIX_EPOCH, Duration::MAX), u64::MAX);
    }
}
