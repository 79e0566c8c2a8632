//! Which responses change a request's charge: [`StatusPredicate`] and its
//! combinators, as tower-http's compression predicates compose.
//!
//! A closure `Fn(StatusCode) -> bool` is a predicate; so are
//! [`ServerErrors`] and [`Status`]. Combine them with
//! [`and`](StatusPredicate::and), [`or`](StatusPredicate::or) and
//! [`not`](StatusPredicate::not):
//!
//! ```
//! use floodgate::layer::predicate::{ServerErrors, Status, StatusPredicate};
//! use http::StatusCode;
//!
//! // Give the charge back for server errors, except 503 (shed on purpose).
//! let refund = ServerErrors.and(Status(StatusCode::SERVICE_UNAVAILABLE).not());
//! assert!(refund.matches(StatusCode::INTERNAL_SERVER_ERROR));
//! assert!(!refund.matches(StatusCode::SERVICE_UNAVAILABLE));
//! // Failed logins: 401 or 403.
//! let failed = Status(StatusCode::UNAUTHORIZED).or(Status(StatusCode::FORBIDDEN));
//! assert!(failed.matches(StatusCode::FORBIDDEN) && !failed.matches(StatusCode::OK));
//! ```

use http::StatusCode;

/// Whether a response's status matches: what
/// [`RateLimitLayer::refund_when`](crate::RateLimitLayer::refund_when) and
/// [`RateLimitLayer::count_only_when`](crate::RateLimitLayer::count_only_when)
/// take.
pub trait StatusPredicate: Send + Sync + 'static {
    /// Whether `status` matches.
    fn matches(&self, status: StatusCode) -> bool;

    /// Matches when both match.
    fn and<P: StatusPredicate>(self, other: P) -> And<Self, P>
    where
        Self: Sized,
    {
        And(self, other)
    }

    /// Matches when either matches.
    fn or<P: StatusPredicate>(self, other: P) -> Or<Self, P>
    where
        Self: Sized,
    {
        Or(self, other)
    }

    /// Matches when this does not.
    fn not(self) -> Not<Self>
    where
        Self: Sized,
    {
        Not(self)
    }
}

impl<F> StatusPredicate for F
where
    F: Fn(StatusCode) -> bool + Send + Sync + 'static,
{
    fn matches(&self, status: StatusCode) -> bool {
        self(status)
    }
}

/// Server errors: `5xx`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerErrors;

impl StatusPredicate for ServerErrors {
    fn matches(&self, status: StatusCode) -> bool {
        status.is_server_error()
    }
}

/// One status code.
#[derive(Debug, Clone, Copy)]
pub struct Status(pub StatusCode);

impl StatusPredicate for Status {
    fn matches(&self, status: StatusCode) -> bool {
        status == self.0
    }
}

/// Both predicates: made by [`StatusPredicate::and`].
#[derive(Debug, Clone, Copy)]
pub struct And<A, B>(A, B);

impl<A: StatusPredicate, B: StatusPredicate> StatusPredicate for And<A, B> {
    fn matches(&self, status: StatusCode) -> bool {
        self.0.matches(status) && self.1.matches(status)
    }
}

/// Either predicate: made by [`StatusPredicate::or`].
#[derive(Debug, Clone, Copy)]
pub struct Or<A, B>(A, B);

impl<A: StatusPredicate, B: StatusPredicate> StatusPredicate for Or<A, B> {
    fn matches(&self, status: StatusCode) -> bool {
        self.0.matches(status) || self.1.matches(status)
    }
}

/// The opposite of a predicate: made by [`StatusPredicate::not`].
#[derive(Debug, Clone, Copy)]
pub struct Not<P>(P);

impl<P: StatusPredicate> StatusPredicate for Not<P> {
    fn matches(&self, status: StatusCode) -> bool {
        !self.0.matches(status)
    }
}

/// How a [`RateLimitLayer`](crate::RateLimitLayer) charges requests: its
/// third type parameter, set by its builder methods. A layer either refunds
/// some responses or charges only some, never both: the second method does
/// not exist on a layer that has the first.
///
/// ```compile_fail
/// use floodgate::{algorithm::Gcra, key::Global, store::MemoryStore, Limiter, RateLimitLayer};
/// use std::time::Duration;
/// let limiter = Limiter::new(MemoryStore::new(), Gcra::new(10, Duration::from_secs(1)));
/// let layer = RateLimitLayer::new(limiter, Global::new())
///     .refund_when(|s: http::StatusCode| s.is_server_error())
///     .count_only_when(|s: http::StatusCode| s == 401); // no such method now
/// ```
pub mod charging {
    /// Every admitted request is charged when it is admitted (the default).
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Upfront;

    /// Charged when admitted, and given back when the response matches
    /// ([`RateLimitLayer::refund_when`](crate::RateLimitLayer::refund_when)).
    #[derive(Debug, Clone, Copy, Default)]
    pub struct RefundWhen;

    /// Charged only when the response matches
    /// ([`RateLimitLayer::count_only_when`](crate::RateLimitLayer::count_only_when)).
    #[derive(Debug, Clone, Copy, Default)]
    pub struct CountOnlyWhen;
}
