//! Where a jittered window starts for one key: the offset, in ms, of every
//! window of that key from the aligned ones. Computed here, in Rust, for
//! every store: the memory store's twin shifts its clock by it, and the
//! Redis code receives it as an argument, so Redis, Redis Cluster and
//! memory agree by construction.
//!
//! The offset is `XXH3-64(key) mod window_ms`: XXH3's 64-bit hash (seed 0,
//! the default secret) of the user key's UTF-8 bytes, as the caller gave
//! them (before any escaping or shortening for storage). XXH3 is a
//! published, frozen format; the tests pin known values, so that a change
//! of hash, which would move every key's windows and misread their state,
//! fails a test instead of shipping.

/// The offset of `key`'s windows in a jittered window of `window_ms`
/// (at least 1): in `0..window_ms`.
#[inline]
pub(crate) fn offset(key: &str, window_ms: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key.as_bytes()) % window_ms.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_xxh3_64_and_never_changes() {
        // The reference value of the xxHash specification for empty input.
        assert_eq!(xxhash_rust::xxh3::xxh3_64(b""), 0x2D06_8005_38D3_94C2);
        // Offsets of keys as floodgate computes them: pinned, so that a
        // change of hash or of how the offset is taken fails here.
        assert_eq!(offset("", 60_000), 0x2D06_8005_38D3_94C2 % 60_000);
        assert_eq!(offset("203.0.113.7", 60_000), PINNED[0]);
        assert_eq!(offset("user:42", 3_600_000), PINNED[1]);
        assert_eq!(offset("é", 1_000), PINNED[2]);
    }

    /// `offset` of the three keys above, computed once with XXH3-64
    /// (xxhash-rust 0.8.21).
    const PINNED: [u64; 3] = [39_396, 662_826, 795];

    #[test]
    fn offsets_stay_inside_the_window() {
        for w in [1, 2, 7, 1_000, 60_000, 1 << 40] {
            for k in ["", "a", "ana", "203.0.113.7", "k999"] {
                assert!(offset(k, w) < w, "{k} {w}");
            }
        }
        assert_eq!(offset("anything", 1), 0);
    }
}
