//! Which rate-limit header fields a response carries.

/// The rate-limit header fields written on responses.
///
/// The values below are for one limit named `"api"` with a quota of 100
/// requests per minute, 42 requests left and 17 seconds until the quota is
/// back in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HeaderStyle {
    /// The fields of draft-ietf-httpapi-ratelimit-headers-11, RFC 9651
    /// structured-field lists. One `RateLimit-Policy` item per policy, one
    /// `RateLimit` item for the most restrictive policy:
    ///
    /// ```text
    /// RateLimit-Policy: "api";q=100;w=60
    /// RateLimit: "api";r=42;t=17
    /// ```
    #[default]
    Ietf,
    /// The de-facto `X-RateLimit-*` fields, for clients written against
    /// GitHub-style APIs. They describe the most restrictive limit only.
    /// `X-RateLimit-Limit` is that decision's [`limit`](crate::Decision::limit)
    /// (the most a key can hold at once), the number `Remaining` counts down
    /// from.
    ///
    /// ```text
    /// X-RateLimit-Limit: 100
    /// X-RateLimit-Remaining: 42
    /// X-RateLimit-Reset: 17            (ResetUnit::DeltaSeconds)
    /// X-RateLimit-Reset: 1700000017    (ResetUnit::EpochSeconds)
    /// ```
    Legacy {
        /// How `X-RateLimit-Reset` counts.
        reset: ResetUnit,
    },
    /// [`Ietf`](Self::Ietf) and [`Legacy`](Self::Legacy) together, for
    /// migrations. The legacy reset is in delta seconds, so it always equals
    /// the `t` of the `RateLimit` field.
    ///
    /// ```text
    /// RateLimit-Policy: "api";q=100;w=60
    /// RateLimit: "api";r=42;t=17
    /// X-RateLimit-Limit: 100
    /// X-RateLimit-Remaining: 42
    /// X-RateLimit-Reset: 17
    /// ```
    Both,
    /// No rate-limit header fields. Rejections still carry `Retry-After`.
    None,
}

/// The unit of `X-RateLimit-Reset`, which vendors disagree on.
///
/// - Epoch seconds: GitHub (`x-ratelimit-reset`) and X/Twitter
///   (`x-rate-limit-reset`).
/// - Delta seconds: Envoy's optional `x-ratelimit-reset`, and the early
///   IETF drafts' `RateLimit-Reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ResetUnit {
    /// Seconds from now until the quota resets, rounded up: `17`.
    #[default]
    DeltaSeconds,
    /// The Unix time (UTC seconds) at which the quota resets, rounded up:
    /// `1700000017`. Depends on the server's clock.
    EpochSeconds,
}
