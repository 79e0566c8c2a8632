//! A request extension as the key, e.g. the user an auth layer found.

use std::any::type_name;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use super::{KeyExtractor, KeyRejection};

/// Keys on a request extension of type `T`, which a layer before the
/// limiter (typically authentication) inserted.
///
/// The key is `T`'s [`Display`](fmt::Display) form with
/// [`new`](ExtensionKey::new), or what a function makes of it with
/// [`with`](ExtensionKey::with). A missing extension, or an empty key, is a
/// rejection: the limiter must run after the layer that inserts `T`.
///
/// ```
/// use floodgate::key::{ExtensionKey, KeyExtractor};
///
/// #[derive(Clone)]
/// struct User { id: u64, org: String }
///
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(User { id: 7, org: "acme".into() });
///
/// let per_org = ExtensionKey::with(|u: &User| format!("org:{}", u.org));
/// assert_eq!(per_org.extract(&req).unwrap(), "org:acme");
///
/// // A type with `Display` needs no function.
/// #[derive(Clone)]
/// struct UserId(u64);
/// impl std::fmt::Display for UserId {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         write!(f, "user:{}", self.0)
///     }
/// }
/// let per_user = ExtensionKey::<UserId>::new();
/// assert!(per_user.extract(&req).is_err());
/// req.extensions_mut().insert(UserId(7));
/// assert_eq!(per_user.extract(&req).unwrap(), "user:7");
/// ```
pub struct ExtensionKey<T, F = fn(&T) -> String> {
    map: F,
    // `fn() -> T`: the extractor neither owns a `T` nor needs `T: Sync`.
    _type: PhantomData<fn() -> T>,
}

impl<T: fmt::Display> ExtensionKey<T> {
    /// Keys on `T`'s `Display` form.
    pub fn new() -> Self {
        Self::with(|t: &T| t.to_string())
    }
}

impl<T: fmt::Display> Default for ExtensionKey<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, F: Fn(&T) -> String> ExtensionKey<T, F> {
    /// Keys on `map(&T)`.
    pub fn with(map: F) -> Self {
        Self {
            map,
            _type: PhantomData,
        }
    }
}

impl<T, F: Clone> Clone for ExtensionKey<T, F> {
    fn clone(&self) -> Self {
        Self {
            map: self.map.clone(),
            _type: PhantomData,
        }
    }
}

impl<T, F> fmt::Debug for ExtensionKey<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ExtensionKey")
            .field(&type_name::<T>())
            .finish()
    }
}

impl<T, F> KeyExtractor for ExtensionKey<T, F>
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> String + Clone + Send + Sync + 'static,
{
    fn extract<'r, B>(&self, req: &'r http::Request<B>) -> Result<Cow<'r, str>, KeyRejection> {
        let Some(value) = req.extensions().get::<T>() else {
            return Err(KeyRejection::new(format!(
                "missing request extension `{}`: the layer that inserts it must run before the rate limiter",
                type_name::<T>()
            )));
        };
        let key = (self.map)(value);
        if key.is_empty() {
            return Err(KeyRejection::new(format!(
                "request extension `{}` gave an empty key",
                type_name::<T>()
            )));
        }
        Ok(Cow::Owned(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_key_is_rejected() {
        let mut req = http::Request::new(());
        req.extensions_mut().insert(String::new());
        let err = ExtensionKey::<String>::new().extract(&req).unwrap_err();
        assert!(err.reason().contains("empty key"), "{err}");
    }
}
