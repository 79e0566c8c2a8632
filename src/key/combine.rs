//! Tuples of extractors: keys on all of them at once.

use super::{KeyExtractor, KeyRejection};
use std::borrow::Cow;

/// Joins `parts` with `|`, escaping `\` and `|` so the key is unambiguous:
/// `("a|b", "c")` and `("a", "b|c")` must not share a bucket.
fn join(parts: &[Cow<'_, str>]) -> String {
    let mut key = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            key.push('|');
        }
        push_escaped(&mut key, part);
    }
    key
}

fn push_escaped(key: &mut String, part: &str) {
    for c in part.chars() {
        if matches!(c, '\\' | '|') {
            key.push('\\');
        }
        key.push(c);
    }
}

macro_rules! tuple_key {
    ($($name:ident . $idx:tt),+) => {
        /// Keys on every extractor of the tuple, joined with `|` (with `\`
        /// and `|` escaped inside each part). The first rejection wins.
        impl<$($name: KeyExtractor),+> KeyExtractor for ($($name,)+) {
            fn extract<'r, Body>(&self, req: &'r http::Request<Body>) -> Result<Cow<'r, str>, KeyRejection> {
                Ok(Cow::Owned(join(&[$(self.$idx.extract(req)?),+])))
            }
        }
    };
}

tuple_key!(A.0, B.1);
tuple_key!(A.0, B.1, C.2);

#[cfg(test)]
mod tests {
    use super::super::{Global, KeyExtractor};

    #[test]
    fn joins_and_escapes() {
        let req = http::Request::new(());
        let k = (Global::named("user:7"), Global::named("1.2.3.4"));
        assert_eq!(k.extract(&req).unwrap(), "user:7|1.2.3.4");
        let a = (Global::named("a|b"), Global::named("c"))
            .extract(&req)
            .unwrap();
        let b = (Global::named("a"), Global::named("b|c"))
            .extract(&req)
            .unwrap();
        assert_ne!(a, b);
        assert_eq!(a, r"a\|b|c");
        let k = (Global::named(r"x\"), Global::named(""), Global::named("y"));
        assert_eq!(k.extract(&req).unwrap(), r"x\\||y");
    }
}
