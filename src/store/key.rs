//! Names of the keys floodgate writes: `{prefix}:{name}:{algorithm}:{{user key}}`.
//!
//! The user key comes from clients, so it is escaped: it always sits inside
//! the one hash tag, contains no brace (it can never move to another Redis
//! Cluster slot), and is bounded in length (long keys are hashed).

use sha2::{Digest, Sha256};
use std::fmt::Write;

/// User keys longer than this (after escaping) are replaced by a hash.
pub(crate) const MAX_KEY_BYTES: usize = 128;

/// The prefix of every key a limiter writes unless told otherwise.
pub(crate) const DEFAULT_PREFIX: &str = "floodgate";

/// The head of every key of one limit: `{prefix}:{name}:{tag}:`.
pub(crate) fn head(prefix: &str, name: &str, tag: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + name.len() + tag.len() + 3);
    for part in [prefix, ":", name, ":", tag, ":"] {
        out.push_str(part);
    }
    out
}

/// The full storage key: `head` and the escaped user key in one hash tag.
/// Injective: distinct (prefix, name, tag, user key) give distinct strings,
/// because the prefix and name hold no brace, the name and tag no colon, and
/// escaped keys never start with `#` as hashed ones do.
pub(crate) fn storage_key(head: &str, user: &str) -> String {
    let mut out = String::with_capacity(head.len() + user.len() + 2);
    out.push_str(head);
    out.push('{');
    push_user_key(&mut out, user);
    out.push('}');
    out
}

/// The user key as the memory store and the deny cache bound it: itself,
/// or its hash (see [`hashed_user_key`]) when it is longer than
/// [`MAX_KEY_BYTES`]. (Redis keys hash by the *escaped* length, see
/// [`storage_key`]; each way keeps distinct keys apart.) Distinct results
/// for distinct keys but with the odds of a 128-bit hash.
pub(crate) fn bounded(user: &str) -> std::borrow::Cow<'_, str> {
    if user.len() > MAX_KEY_BYTES {
        hashed_user_key(user).into()
    } else {
        user.into()
    }
}

/// What stands for a user key too long to keep: `#` and a 128-bit hash of it.
pub(crate) fn hashed_user_key(user: &str) -> String {
    let mut out = String::with_capacity(33);
    out.push('#');
    for b in &Sha256::digest(user.as_bytes())[..16] {
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn plain(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'{' | b'}' | b'%' | b'#')
}

fn push_user_key(out: &mut String, user: &str) {
    let escaped_len: usize = user.bytes().map(|b| if plain(b) { 1 } else { 3 }).sum();
    if user.is_empty() {
        out.push('#');
        return;
    }
    if escaped_len > MAX_KEY_BYTES {
        out.push_str(&hashed_user_key(user));
        return;
    }
    if escaped_len == user.len() {
        // Nothing to escape: one copy.
        out.push_str(user);
        return;
    }
    for b in user.bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_stay_readable() {
        assert_eq!(
            storage_key(&head("rl", "api", "tb"), "ana"),
            "rl:api:tb:{ana}"
        );
    }

    #[test]
    fn braces_and_percent_are_escaped() {
        assert_eq!(
            storage_key(&head("rl", "d", "fw"), "{x}%"),
            "rl:d:fw:{%7Bx%7D%25}"
        );
        assert_eq!(
            storage_key(&head("rl", "d", "fw"), "a b#"),
            "rl:d:fw:{a%20b%23}"
        );
    }

    #[test]
    fn long_and_empty_keys_are_hashed_and_bounded() {
        let long = "k".repeat(10_000);
        let k = storage_key(&head("rl", "d", "fw"), &long);
        assert!(k.len() < 64, "{k}");
        assert_ne!(k, storage_key(&head("rl", "d", "fw"), &"k".repeat(10_001)));
        assert_eq!(storage_key(&head("rl", "d", "fw"), ""), "rl:d:fw:{#}");
        let exact = "k".repeat(MAX_KEY_BYTES);
        assert!(storage_key(&head("rl", "d", "fw"), &exact).contains(&exact));
    }

    #[test]
    fn one_hash_tag_whatever_the_key() {
        for user in ["}{", "{{a}}", "}", "\u{7b}\u{7d}", "é{"] {
            let k = storage_key(&head("rl", "d", "gcra"), user);
            let open = k.find('{').unwrap();
            let close = k[open..].find('}').unwrap() + open;
            assert_eq!(close, k.len() - 1, "{k}");
        }
    }
}
