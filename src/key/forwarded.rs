//! RFC 7239 `Forwarded`: the `for` node of each element.
//!
//! ```text
//! Forwarded         = 1#forwarded-element
//! forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//! forwarded-pair    = token "=" value
//! value             = token / quoted-string
//! ```
//!
//! The tokenizer runs left to right (quoted strings can only be delimited
//! that way) in linear time and without allocating. It is lenient where real
//! proxies are sloppy (whitespace around `;` and `=`, `:` and brackets in
//! unquoted values) and strict about everything that decides the address.

use super::ip::{parse_node, Node, MAX_NODE_LEN};

/// Calls `emit` with the `for` node of each element of one header value, left
/// to right. A malformed element yields [`Node::Invalid`].
///
/// After an error, parsing resumes at the first comma after the start of the
/// pair that failed, even if that comma is inside a quoted string. So a
/// client's stray quote (`for="x`) cannot swallow, or pair up with a quote
/// of, the elements proxies append on the right: those are re-parsed.
pub(crate) fn for_nodes(value: &[u8], mut emit: impl FnMut(Node)) {
    let mut p = Parser { s: value, pos: 0 };
    while p.pos < value.len() {
        match p.element() {
            Ok(Some(node)) => emit(node),
            // An empty list element: HTTP list syntax says to ignore it.
            Ok(None) => {}
            Err(pair_start) => {
                emit(Node::Invalid);
                p.pos = value[pair_start..]
                    .iter()
                    .position(|&b| b == b',')
                    .map_or(value.len(), |i| pair_start + i);
            }
        }
        p.pos += 1; // the comma, or past the end
    }
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

/// A value copied out of the header with quoted-pairs resolved; anything
/// longer than a node can be is cut, and then fails to parse as one.
struct Value {
    buf: [u8; MAX_NODE_LEN + 1],
    len: usize,
}

impl Value {
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// One element, up to (not past) the next comma or the end. `Ok(None)`
    /// for an element without pairs; `Err(start)` of the pair that failed.
    fn element(&mut self) -> Result<Option<Node>, usize> {
        let mut node = None;
        let mut pairs = 0;
        loop {
            self.skip_ows();
            match self.peek() {
                None | Some(b',') => break,
                Some(b';') => {
                    self.pos += 1;
                    continue;
                }
                Some(_) => {}
            }
            let start = self.pos;
            let (is_for, value) = self.pair().ok_or(start)?;
            if is_for {
                // A second `for` makes the element ambiguous (RFC 7239 §4).
                if node.is_some() {
                    return Err(start);
                }
                node = Some(parse_node(&value.buf[..value.len]));
            }
            pairs += 1;
            self.skip_ows();
            match self.peek() {
                None | Some(b',') => break,
                Some(b';') => self.pos += 1,
                Some(_) => return Err(start),
            }
        }
        Ok((pairs > 0).then(|| node.unwrap_or(Node::Unknown)))
    }

    /// `name = value`: whether the name is `for`, and the value.
    fn pair(&mut self) -> Option<(bool, Value)> {
        let start = self.pos;
        while self.peek().is_some_and(tchar) {
            self.pos += 1;
        }
        let name = &self.s[start..self.pos];
        if name.is_empty() {
            return None;
        }
        self.skip_ows();
        if self.peek() != Some(b'=') {
            return None;
        }
        self.pos += 1;
        self.skip_ows();
        let is_for = name.eq_ignore_ascii_case(b"for");
        Some((is_for, self.value()?))
    }

    fn value(&mut self) -> Option<Value> {
        let mut v = Value {
            buf: [0; MAX_NODE_LEN + 1],
            len: 0,
        };
        if self.peek() == Some(b'"') {
            self.pos += 1;
            loop {
                let b = self.peek()?;
                self.pos += 1;
                match b {
                    b'"' => return Some(v),
                    b'\\' => {
                        let escaped = self.peek().filter(|&c| qpair(c))?;
                        self.pos += 1;
                        v.push(escaped);
                    }
                    _ if qdtext(b) => v.push(b),
                    _ => return None,
                }
            }
        }
        // Lenient: `:` and brackets are not tchars, but some proxies write
        // `for=192.0.2.1:80` or `for=[2001:db8::1]` unquoted.
        let open = self.pos;
        while let Some(b) = self
            .peek()
            .filter(|&b| tchar(b) || matches!(b, b':' | b'[' | b']'))
        {
            v.push(b);
            self.pos += 1;
        }
        (self.pos > open).then_some(v)
    }
}

/// RFC 9110 `tchar`.
fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// RFC 9110 `qdtext`.
fn qdtext(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | 0x21 | 0x23..=0x5B | 0x5D..=0x7E | 0x80..=0xFF)
}

/// RFC 9110 `quoted-pair` second byte.
fn qpair(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | 0x21..=0x7E | 0x80..=0xFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(s: &[u8]) -> Vec<Node> {
        let mut out = Vec::new();
        for_nodes(s, |n| out.push(n));
        out
    }

    fn ip(s: &str) -> Node {
        Node::Ip(s.parse().unwrap())
    }

    #[test]
    fn rfc_examples() {
        assert_eq!(nodes(br#"for="_gazonk""#), [Node::Obfuscated]);
        assert_eq!(
            nodes(br#"For="[2001:db8:cafe::17]:4711""#),
            [ip("2001:db8:cafe::17")]
        );
        assert_eq!(
            nodes(b"for=192.0.2.60;proto=http;by=203.0.113.43"),
            [ip("192.0.2.60")]
        );
        assert_eq!(
            nodes(b"for=192.0.2.43, for=198.51.100.17"),
            [ip("192.0.2.43"), ip("198.51.100.17")]
        );
        assert_eq!(nodes(br#"for="192.0.2.43:47011""#), [ip("192.0.2.43")]);
        assert_eq!(nodes(b"for=unknown"), [Node::Unknown]);
    }

    #[test]
    fn lenient_forms() {
        assert_eq!(
            nodes(b"proto=https; FOR = 192.0.2.1 ;by=x"),
            [ip("192.0.2.1")]
        );
        assert_eq!(nodes(b"for=192.0.2.1:80"), [ip("192.0.2.1")]);
        assert_eq!(nodes(b"for=[2001:db8::1]:80"), [ip("2001:db8::1")]);
        assert_eq!(nodes(br#"for="2001:db8::1""#), [ip("2001:db8::1")]);
        assert_eq!(nodes(br#"for="\1\9\2.0.2.1""#), [ip("192.0.2.1")]);
        // Empty elements are ignored; an element without `for` is unknown.
        assert_eq!(
            nodes(b" , for=192.0.2.1,, proto=http ,"),
            [ip("192.0.2.1"), Node::Unknown]
        );
        // Quoted commas and semicolons in other parameters.
        assert_eq!(
            nodes(br#"ext="a,b;c", for=192.0.2.1"#),
            [Node::Unknown, ip("192.0.2.1")]
        );
    }

    #[test]
    fn garbage_is_contained() {
        let cases: &[(&[u8], &[Node])] = &[
            (
                br#"for="192.0.2.1, for=198.51.100.1"#,
                &[Node::Invalid, ip("198.51.100.1")],
            ),
            (
                b"for, for=198.51.100.1",
                &[Node::Invalid, ip("198.51.100.1")],
            ),
            (
                b"for=, for=198.51.100.1",
                &[Node::Invalid, ip("198.51.100.1")],
            ),
            (
                b"=x, for=198.51.100.1",
                &[Node::Invalid, ip("198.51.100.1")],
            ),
            (
                b"for=1.2.3.4 x, for=198.51.100.1",
                &[Node::Invalid, ip("198.51.100.1")],
            ),
            (b"for=1.2.3.4;for=5.6.7.8", &[Node::Invalid]),
            (b"for=\"[2001:db8::1\"", &[Node::Invalid]),
            (b"for=\"1.2.3.4:99999\"", &[Node::Invalid]),
            (b"for=\"1.2.3.4\\", &[Node::Invalid]),
            (b"for=\"1.2\x01.3.4\"", &[Node::Invalid]),
            (b"for=\xff\xfe", &[Node::Invalid]),
            // A stray quote pairs with the proxy's, the rest is re-parsed.
            (
                br#"for="x, for="[2001:db8::1]:80""#,
                &[Node::Invalid, ip("2001:db8::1")],
            ),
            (
                br#"a=b;c="\, for="192.0.2.9""#,
                &[Node::Invalid, ip("192.0.2.9")],
            ),
            (
                br#"ext="a,b"x, for=192.0.2.1"#,
                &[Node::Invalid, Node::Invalid, ip("192.0.2.1")],
            ),
            (b"for=\"\xff\"", &[Node::Invalid]),
        ];
        for (input, want) in cases {
            assert_eq!(nodes(input), *want, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn long_values_do_not_parse() {
        let mut long = b"for=\"".to_vec();
        long.extend(std::iter::repeat_n(b'1', 10_000));
        long.extend(b"\", for=192.0.2.1");
        assert_eq!(nodes(&long), [Node::Invalid, ip("192.0.2.1")]);
    }
}
