//! `Decision`'s own tests: its constructors, ordering of waits, aging and
//! `Debug`.

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_decision_admits_exactly_when_its_reason_does() {
    for reason in Reason::ALL {
        let d = Decision::new(reason, 10, 1, ms(5), Some(ms(5)), ms(3));
        assert_eq!(d.allowed(), reason.admits());
        assert_eq!(d.retry_after().is_some(), !reason.admits());
        assert_eq!(d.delay().is_zero(), !reason.admits());
    }
}

#[test]
fn the_public_constructors_round_durations_up_to_whole_ms() {
    let d = Decision::over_limit(10, 0, Duration::from_micros(1_500), Duration::from_nanos(1));
    assert_eq!((d.reset_after(), d.retry_after()), (ms(2), Some(ms(1))));
    let d = Decision::within_limit(10, 3, Duration::from_millis(7));
    assert_eq!(d.reset_after(), ms(7));
    let d = Decision::cost_too_high(10, 3, Duration::from_nanos(1_000_001));
    assert_eq!(d.reset_after(), ms(2));
    assert_eq!(whole_ms_up(Duration::MAX), Duration::from_millis(u64::MAX));
}

#[test]
fn most_restrictive_ranks_denials_by_wait_then_admissions_by_remaining() {
    let few = Decision::within_limit(10, 1, ms(500));
    let none_left = Decision::within_limit(10, 0, ms(900));
    let short = Decision::over_limit(10, 3, ms(100), ms(100));
    let long = Decision::over_limit(10, 0, ms(100), ms(800));
    let never = Decision::new(Reason::CostTooHigh, 10, 5, ms(0), None, ms(0));
    assert_eq!(Decision::most_restrictive(few, &[none_left]), none_left);
    assert_eq!(Decision::most_restrictive(none_left, &[short]), short);
    assert_eq!(Decision::most_restrictive(short, &[long, few]), long);
    assert_eq!(Decision::most_restrictive(long, &[never]), never);
    // A tie keeps the first given.
    let twin = Decision::within_limit(10, 1, ms(500));
    assert_eq!(Decision::most_restrictive(few, &[twin]), few);
}

#[test]
fn times_kept_in_ms_read_and_print_as_durations() {
    let d = Decision::over_limit(10, 0, Duration::from_micros(1_499_001), ms(20));
    assert_eq!(
        format!("{d:?}"),
        "Decision { limit: 10, remaining: 0, reset_after: 1.5s, retry_after: Some(20ms), \
         delay: 0ns, reason: OverLimit, degraded: false }"
    );
    // The longest wait a decision holds still ranks below no wait at all.
    let longest = Decision::over_limit(10, 0, ms(0), Duration::MAX);
    assert_eq!(longest.retry_after(), Some(ms(u64::MAX)));
    let never = Decision::cost_too_high(10, 0, ms(0));
    assert_eq!(Decision::most_restrictive(longest, &[never]), never);
    assert_eq!(longest.aged(ms(5)).retry_after(), Some(ms(u64::MAX - 4)));
}

#[test]
fn the_overall_decision_carries_the_longest_delay_only_when_admitted() {
    let queued = Decision::new(Reason::WithinLimit, 10, 5, ms(0), None, ms(40));
    let plain = Decision::within_limit(10, 2, ms(0));
    let d = Decision::most_restrictive(queued, &[plain]);
    assert_eq!((d.remaining(), d.delay()), (2, ms(40)));
    let denied = Decision::over_limit(10, 0, ms(10), ms(10));
    assert_eq!(Decision::most_restrictive(queued, &[denied]).delay(), ms(0));
    assert!(Decision::most_restrictive(plain, &[queued.mark_degraded()]).is_degraded());
}
