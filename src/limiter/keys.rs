//! Several keys, one decision ([`Limiter::check_keys`]): each limit of a
//! [`Limits`](crate::algorithm::Limits) charged to a key of its own (per
//! user and per organisation, per API key and global), all or nothing.

use super::{plan::decisions, Ask, Limiter};
use crate::algorithm::Algorithm;
use crate::limiter::plan::Plan;
use crate::store::Mode;
use crate::{ConfigError, Decisions, Error};
use smallvec::SmallVec;

impl<A: Algorithm> Limiter<A> {
    /// Charge `cost` to several keys in one decision: `keys` names, for
    /// each limit, the key it is charged to (`("user", "ana")`,
    /// `("global", "all")`). Admitted only if every limit admits its key,
    /// and then charged to all; denied otherwise, charging none. The
    /// numbers are each limit's for its own key.
    ///
    /// One store call on one server (one Redis, Sentinel, the memory
    /// store): atomic, and one timeout when the store stalls. On a Redis
    /// Cluster, keys on different hash slots (a key's slot is its own:
    /// floodgate puts each user key in a hash tag) are first tried by one
    /// call per slot, writing nothing, and charged by a second only if
    /// every slot admits; a slot another request filled in between gives
    /// back what the others charged. No key keeps a charge for a refused
    /// request (not atomic across slots: for a moment another request may
    /// see a charge that is given back).
    ///
    /// The exemptions look at every key: a key on the deny list refuses
    /// the request, one on the allow list exempts it. Neither the deny
    /// cache nor the hot keys' allotments answer such a call (they follow
    /// one key).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use floodgate::algorithm::{Gcra, Limits};
    /// use floodgate::{store::MemoryStore, Limiter};
    /// use std::time::Duration;
    ///
    /// let limits = Limits::new("user", Gcra::new(2, Duration::from_secs(1)))
    ///     .try_with("global", Gcra::new(3, Duration::from_secs(1)))?;
    /// let limiter = Limiter::new(MemoryStore::new(), limits);
    /// let ana = [("user", "ana"), ("global", "all")];
    /// let bo = [("user", "bo"), ("global", "all")];
    /// assert!(limiter.check_keys(&ana, 1).await?.overall().allowed());
    /// assert!(limiter.check_keys(&ana, 1).await?.overall().allowed());
    /// assert!(limiter.check_keys(&ana, 1).await?.overall().denied()); // ana's own limit
    /// assert!(limiter.check_keys(&bo, 1).await?.overall().allowed()); // the global's third
    /// assert!(limiter.check_keys(&bo, 1).await?.overall().denied()); // the global limit
    /// // bo's own key was not charged by the refused request: one left.
    /// let now = limiter.check_keys(&bo, 0).await?;
    /// assert_eq!(now.each()[0].decision().remaining(), 1);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Unsupported`] when a limit has no key in `keys`, or `keys`
    /// names a limit the limiter does not have; else as
    /// [`check`](Self::check).
    pub async fn check_keys(&self, keys: &[(&str, &str)], cost: u64) -> Result<Decisions, Error> {
        self.check_keys_under(&self.version().plan, keys, cost)
            .await
    }

    /// Like [`check_keys`](Self::check_keys), with the limits of `limits`
    /// instead of the limiter's own, for this call only (as
    /// [`check_with`](Self::check_with) for one key): limits resolved per
    /// request, each charged to a key of its own, all or nothing. The
    /// rate limit service `floodgate-rls` decides an Envoy request's
    /// descriptors this way. A key's state is shared by limits of the same
    /// name and algorithm.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use floodgate::algorithm::{AnyAlgorithm, FixedWindow, Limits};
    /// use floodgate::{store::MemoryStore, Limiter};
    /// use std::time::Duration;
    ///
    /// let minute = Duration::from_secs(60);
    /// let own = Limits::new("any", AnyAlgorithm::FixedWindow(FixedWindow::new(100, minute)));
    /// let limiter = Limiter::new(MemoryStore::new(), own);
    /// // This request's limits: its path's and its client's.
    /// let limits = Limits::new("path", AnyAlgorithm::FixedWindow(FixedWindow::new(1, minute)))
    ///     .try_with("client", AnyAlgorithm::FixedWindow(FixedWindow::new(5, minute)))?;
    /// let keys = [("path", "/upload"), ("client", "10.0.0.1")];
    /// assert!(limiter.check_keys_with(&keys, 1, &limits).await?.overall().allowed());
    /// assert!(limiter.check_keys_with(&keys, 1, &limits).await?.overall().denied());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`check_keys`](Self::check_keys).
    pub async fn check_keys_with(
        &self,
        keys: &[(&str, &str)],
        cost: u64,
        limits: &A,
    ) -> Result<Decisions, Error> {
        self.check_keys_under(&self.plan(limits), keys, cost).await
    }

    async fn check_keys_under(
        &self,
        plan: &Plan,
        keys: &[(&str, &str)],
        cost: u64,
    ) -> Result<Decisions, Error> {
        let mut each: SmallVec<[&str; 4]> = SmallVec::with_capacity(plan.names.len());
        for name in &plan.names {
            let key = keys.iter().find(|(limit, _)| *limit == &**name);
            let Some((_, key)) = key else {
                return Err(unsupported(format!("no key for the limit {name:?}")));
            };
            each.push(key);
        }
        if let Some((name, _)) = keys
            .iter()
            .find(|(n, _)| !plan.names.iter().any(|l| &**l == *n))
        {
            return Err(unsupported(format!("no limit named {name:?}")));
        }
        let ask = Ask {
            plan,
            // Nothing this process keeps follows several keys.
            local: None,
            key: each[0],
            keys: &each,
            cost,
            mode: Mode::Check,
            counted: true,
            lease: "",
            slice: 0,
        };
        let decided = self.inner.core.run(ask).await?;
        Ok(decisions(plan, &decided))
    }
}

fn unsupported(reason: String) -> Error {
    Error::Unsupported(ConfigError::new("keys", reason))
}
