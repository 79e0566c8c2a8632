//! Header values kept to be written on many responses.
//!
//! A response's copy of a kept value costs an allocation and a copy (and
//! its free); a clone would share the kept value's reference count, which
//! every response then changes from whichever core serves it (see
//! [`own_copy`]). A value whose bytes live as long as the
//! process needs neither: it is cloned as a pointer, with no count. So the
//! values a layer keeps (its `RateLimit-Policy`, its table of `RateLimit`
//! values) are stored once for the life of the process, shared by every
//! layer that keeps the same bytes, up to [`MAX_BYTES`] for all layers
//! together; past that they are copied per response as before.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use http::HeaderValue;

/// What all layers of a process may keep for its life, counting
/// [`OVERHEAD`] a value: 128 KiB, about 3 000 values (a table of `RateLimit`
/// values holds up to 1 024 of ~20 bytes).
const MAX_BYTES: usize = 128 * 1024;
/// What the set spends on a value besides its bytes, about.
const OVERHEAD: usize = 24;

static FOREVER: Mutex<KeptBytes> = Mutex::new(KeptBytes::new(MAX_BYTES));

/// A value kept by a layer, to be written on many responses.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    value: HeaderValue,
    /// Whether `value`'s bytes live as long as the process.
    forever: bool,
}

impl Kept {
    /// Keep `value`, for the life of the process if there is room.
    pub(crate) fn new(value: HeaderValue) -> Self {
        let mut store = FOREVER.lock().unwrap_or_else(PoisonError::into_inner);
        store.keep(value)
    }

    /// The value for one response: without an allocation or a shared count
    /// when it is kept for the life of the process, else a copy.
    pub(crate) fn get(&self) -> HeaderValue {
        if self.forever {
            self.value.clone()
        } else {
            own_copy(&self.value)
        }
    }
}

/// A value for one response, made from one the layer keeps: its bytes in a
/// buffer of the response's own. A clone would share the kept value's
/// reference count, which every response then changes from whichever core
/// serves it; over HTTP (wrk, two server threads, six runs alternating the
/// two binaries) the layer's server CPU a request was 1.10–1.23× (median
/// 1.12) `tower_governor`'s with clones and 1.02–1.11× (median 1.065) with
/// copies (BENCHMARKS.md).
fn own_copy(kept: &HeaderValue) -> HeaderValue {
    HeaderValue::from_bytes(kept.as_bytes()).unwrap_or_else(|_| kept.clone())
}

/// The bytes kept for the life of the process, each once.
struct KeptBytes {
    values: BTreeSet<&'static [u8]>,
    room: usize,
}

impl KeptBytes {
    const fn new(room: usize) -> Self {
        Self {
            values: BTreeSet::new(),
            room,
        }
    }

    fn keep(&mut self, value: HeaderValue) -> Kept {
        let bytes = value.as_bytes();
        let kept = if let Some(&kept) = self.values.get(bytes) {
            Some(kept)
        } else {
            let cost = bytes.len() + OVERHEAD;
            (cost <= self.room).then(|| {
                self.room -= cost;
                let kept: &'static [u8] = Box::leak(bytes.into());
                self.values.insert(kept);
                kept
            })
        };
        // Valid: the same bytes as `value`.
        match kept.map(|k| HeaderValue::from_maybe_shared(Bytes::from_static(k))) {
            Some(Ok(forever)) => Kept {
                value: forever,
                forever: true,
            },
            _ => Kept {
                value,
                forever: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_kept_once_while_there_is_room_and_copied_after() {
        let mut store = KeptBytes::new(2 * (OVERHEAD + 3));
        let a = store.keep(HeaderValue::from_static("abc"));
        let again = store.keep(HeaderValue::from_str("abc").unwrap());
        assert!(a.forever && again.forever);
        // One copy of the bytes, and every response gets those.
        let ptr = |v: &HeaderValue| v.as_bytes().as_ptr();
        assert_eq!(ptr(&a.value), ptr(&again.value));
        assert_eq!(ptr(&a.get()), ptr(&a.value));
        assert_eq!(a.get(), "abc");
        let b = store.keep(HeaderValue::from_static("xyz"));
        assert!(b.forever);
        // No room left: kept by the layer, copied for each response.
        let c = store.keep(HeaderValue::from_static("full"));
        assert!(!c.forever);
        assert_eq!(c.get(), "full");
        assert_ne!(ptr(&c.get()), ptr(&c.value));
        assert!(store.keep(HeaderValue::from_static("abc")).forever);
    }
}
