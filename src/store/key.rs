//! Names of the keys floodgate writes: `{prefix}:{name}:{algorithm}:{{user key}}`.
//!
//! The user key comes from clients, so it is escaped: it always sits inside
//! the one hash tag, contains no brace (it can never move to another Redis
//! Cluster slot), and is bounded in length (long keys are hashed).

use sha2::{Digest, Sha256};
use std::fmt::{self, Write};

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
    // Writing to a `String` cannot fail.
    let _ = write_storage_key(&mut out, head, user);
    out
}

/// `f` of [`storage_key`]'s bytes, built on the stack when they fit (any
/// key under a usual head): a key copied into a command costs no
/// allocation of its own.
pub(crate) fn with_storage_key<R>(head: &str, user: &str, f: impl FnOnce(&[u8]) -> R) -> R {
    let mut key = StackStr::<256>::new();
    if write_storage_key(&mut key, head, user).is_ok() {
        f(key.as_bytes())
    } else {
        f(storage_key(head, user).as_bytes())
    }
}

/// A string built on the stack, up to `N` bytes: writing more fails.
pub(crate) struct StackStr<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> StackStr<N> {
    pub(crate) fn new() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl<const N: usize> Write for StackStr<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        self.buf
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// [`storage_key`], written into `out`; an error only when `out` has no
/// room.
fn write_storage_key(out: &mut impl Write, head: &str, user: &str) -> fmt::Result {
    out.write_str(head)?;
    out.write_char('{')?;
    push_user_key(out, user)?;
    out.write_char('}')
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

fn push_user_key(out: &mut impl Write, user: &str) -> fmt::Result {
    let escaped_len: usize = user.bytes().map(|b| if plain(b) { 1 } else { 3 }).sum();
    if user.is_empty() {
        return out.write_char('#');
    }
    if escaped_len > MAX_KEY_BYTES {
        return out.write_str(&hashed_user_key(user));
    }
    if escaped_len == user.len() {
        // Nothing to escape: one copy.
        return out.write_str(user);
    }
    for b in user.bytes() {
        if plain(b) {
            out.write_char(b as char)?;
        } else {
            write!(out, "%{b:02X}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_built_on_the_stack_is_the_key() {
        let short = head("rl", "api", "tb");
        for user in ["ana", "{x}%", "", &"é".repeat(100), &"k".repeat(300)] {
            let built = with_storage_key(&short, user, <[u8]>::to_vec);
            assert_eq!(built, storage_key(&short, user).into_bytes(), "{user}");
        }
        // A head too long for the stack: the same key, from the heap.
        let long = head("p".repeat(300).as_str(), "n", "fw");
        let built = with_storage_key(&long, "ana", <[u8]>::to_vec);
        assert_eq!(built, storage_key(&long, "ana").into_bytes());
    }

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
