use super::spec::{reply, Reply, Spec, State, Write, SLACK_MS};
use super::validate;
use crate::ConfigError;

/// Token bucket: holds up to `capacity` tokens, refilled continuously at
/// `refill_per_sec`; a request takes `cost` tokens if they are there.
///
/// "A sustained rate plus an allowed burst": a full bucket admits `capacity`
/// at once, then the refill rate. Choose the capacity as the burst you are
/// willing to accept. A key nobody used is a full bucket.
///
/// ```
/// use floodgate::algorithm::TokenBucket;
/// let api = TokenBucket::new(100, 10.0); // bursts of 100, then 10/s
/// assert!(TokenBucket::try_new(10, f64::NAN).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    capacity: u64,
    rate: f64,
}

impl TokenBucket {
    /// A bucket of `capacity` tokens refilled at `refill_per_sec` tokens per second.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message names the field.
    pub fn new(capacity: u64, refill_per_sec: f64) -> Self {
        validate::or_panic(Self::try_new(capacity, refill_per_sec))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid
    /// field: `capacity` of 0, `refill_per_sec` not finite or not above 0.
    pub fn try_new(capacity: u64, refill_per_sec: f64) -> Result<Self, ConfigError> {
        Ok(Self {
            capacity: validate::limit("capacity", capacity)?,
            rate: validate::rate("refill_per_sec", refill_per_sec)?,
        })
    }

    pub(super) fn to_spec(self) -> Spec {
        Spec::TokenBucket {
            capacity: self.capacity,
            rate: self.rate,
        }
    }
}

/// Twin of `lua/token_bucket.lua`.
pub(super) fn decide(
    cap: f64,
    rate: f64,
    state: &mut Option<State>,
    now: f64,
    cost: f64,
    dry: bool,
) -> (Reply, Write) {
    let (tokens, mut ts) = match *state {
        Some(State::Bucket { amount, ts }) => (amount, ts),
        _ => (cap, now),
    };
    let elapsed = (now - ts).max(0.0);
    let tokens = cap.min(tokens + elapsed / 1000.0 * rate);
    if tokens < cost {
        let retry = (cost <= cap).then(|| {
            let mut retry = ((cost - tokens) / rate * 1000.0).ceil();
            while tokens + retry / 1000.0 * rate < cost {
                retry += 1.0;
            }
            retry
        });
        let reset = (cap - tokens) / rate * 1000.0;
        return (reply(false, cap, tokens.floor(), reset, retry, 0.0), None);
    }
    let tokens = tokens - cost;
    let reset = (cap - tokens) / rate * 1000.0;
    let mut write = None;
    if cost > 0.0 && !dry {
        ts = ts.max(now);
        *state = Some(State::Bucket { amount: tokens, ts });
        write = Some((reset.ceil() + SLACK_MS) as u64);
    }
    (reply(true, cap, tokens.floor(), reset, None, 0.0), write)
}
