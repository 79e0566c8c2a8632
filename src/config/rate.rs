//! The short form of a limit: `"100/min"`, `"10/s burst 20"`, `"100/30s"`,
//! optionally led by the algorithm's name (`"sliding_window 100/min"`).

use super::duration;
use crate::ConfigError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The algorithms by the names a configuration gives them (the
/// `algorithm` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    FixedWindow,
    SlidingLog,
    SlidingWindow,
    TokenBucket,
    LeakyBucket,
    Gcra,
}

impl Kind {
    pub(crate) const ALL: [Kind; 6] = [
        Kind::FixedWindow,
        Kind::SlidingLog,
        Kind::SlidingWindow,
        Kind::TokenBucket,
        Kind::LeakyBucket,
        Kind::Gcra,
    ];

    /// The name a configuration gives it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::FixedWindow => "fixed_window",
            Kind::SlidingLog => "sliding_log",
            Kind::SlidingWindow => "sliding_window",
            Kind::TokenBucket => "token_bucket",
            Kind::LeakyBucket => "leaky_bucket",
            Kind::Gcra => "gcra",
        }
    }

    fn named(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The fields of its structured form, named as its constructor's
    /// parameters (`algorithm` first).
    pub(crate) fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::FixedWindow | Kind::SlidingWindow => &["algorithm", "limit", "window", "jitter"],
            Kind::SlidingLog => &["algorithm", "limit", "window"],
            Kind::TokenBucket => &["algorithm", "capacity", "refill_per_sec"],
            Kind::LeakyBucket => &["algorithm", "capacity", "leak_per_sec"],
            Kind::Gcra => &["algorithm", "limit", "period", "burst"],
        }
    }
}

/// A short form read: `count` per `per`, maybe a burst, maybe the
/// algorithm's name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rate {
    pub(crate) algorithm: Option<Kind>,
    pub(crate) count: u64,
    pub(crate) per: Duration,
    pub(crate) burst: Option<u64>,
}

/// What a short form looks like, for error messages.
pub(crate) const EXPECTED: &str = "a limit such as \"100/min\", \"10/s burst 20\" or \"100/30s\", \
     optionally led by the algorithm's name (\"sliding_window 100/min\"), \
     or a table of the algorithm's fields";

/// `text` read as a short form, or an error saying what was expected.
pub(crate) fn parse(text: &str) -> Result<Rate, String> {
    let refuse = |why: &str| format!("invalid limit \"{text}\": {why}; expected {EXPECTED}");
    let mut rest = text.trim();
    let mut algorithm = None;
    if let Some((first, after)) = rest.split_once(char::is_whitespace) {
        if first.starts_with(|c: char| c.is_ascii_alphabetic()) {
            algorithm = Some(Kind::named(first).ok_or_else(|| {
                refuse(&format!(
                    "unknown algorithm `{first}` (one of fixed_window, sliding_log, \
                     sliding_window, token_bucket, leaky_bucket, gcra)"
                ))
            })?);
            rest = after.trim_start();
        }
    }
    let (rate, burst) = match rest.split_once("burst") {
        Some((rate, burst)) => {
            let burst = burst.trim();
            let n = burst
                .parse::<u64>()
                .map_err(|_| refuse(&format!("the burst `{burst}` is not a whole number")))?;
            (rate.trim_end(), Some(n))
        }
        None => (rest, None),
    };
    let (count, per) = rate
        .split_once('/')
        .ok_or_else(|| refuse("no `/` between the count and its period"))?;
    let count = count.trim();
    let count = count
        .parse::<u64>()
        .map_err(|_| refuse(&format!("the count `{count}` is not a whole number")))?;
    let per = per.trim();
    // A unit alone is one of it: "min" is "1min".
    let per = if per.starts_with(|c: char| c.is_ascii_digit()) {
        duration::parse(per)
    } else {
        duration::parse(&format!("1{per}"))
    }
    .map_err(|_| refuse(&format!("the period `{per}` is not a unit or a duration")))?;
    Ok(Rate {
        algorithm,
        count,
        per,
        burst,
    })
}

/// The algorithm a short form names, or `default` when it names none; an
/// error naming `algorithm` when it names another than `want`.
pub(crate) fn kind_of(
    named: Option<Kind>,
    want: Option<Kind>,
    default: Kind,
) -> Result<Kind, ConfigError> {
    match (named, want) {
        (Some(n), Some(w)) if n != w => Err(ConfigError::new(
            "algorithm",
            format!("this is a {}, not a {}", w.as_str(), n.as_str()),
        )),
        (Some(k), _) | (None, Some(k)) => Ok(k),
        (None, None) => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(algorithm: Option<Kind>, count: u64, secs: u64, burst: Option<u64>) -> Rate {
        Rate {
            algorithm,
            count,
            per: Duration::from_secs(secs),
            burst,
        }
    }

    #[test]
    fn short_forms() {
        for (text, want) in [
            ("100/min", rate(None, 100, 60, None)),
            ("100 / minute", rate(None, 100, 60, None)),
            ("10/s burst 20", rate(None, 10, 1, Some(20))),
            ("10/sec", rate(None, 10, 1, None)),
            ("10/second", rate(None, 10, 1, None)),
            ("5/h", rate(None, 5, 3_600, None)),
            ("5/hour", rate(None, 5, 3_600, None)),
            ("5/d", rate(None, 5, 86_400, None)),
            ("5/day", rate(None, 5, 86_400, None)),
            ("100/30s", rate(None, 100, 30, None)),
            ("100/1h30m", rate(None, 100, 5_400, None)),
            (
                "gcra 10/s burst 20",
                rate(Some(Kind::Gcra), 10, 1, Some(20)),
            ),
            (
                "sliding_window 100/min",
                rate(Some(Kind::SlidingWindow), 100, 60, None),
            ),
        ] {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
        for text in [
            "100",
            "x/s",
            "10/parsec",
            "10/s burst",
            "10/s burst x",
            "window 1/s",
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(&format!("invalid limit \"{text}\"")), "{e}");
        }
    }
}
