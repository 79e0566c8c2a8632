//! A limiter's own limits as one build or one change set them: their plan
//! and everything derived from them (the deny cache's denials, the hot
//! keys' allotments, the layer's header values), replaced together.

use super::allotments::Allotments;
use super::core::Core;
use super::current::Current;
use super::deny_cache::DenyCache;
use super::hot_keys::Sharing;
use super::plan::Plan;
use crate::algorithm::Algorithm;
use crate::layer::OwnFields;
use crate::ConfigError;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// One version of a limiter's own limits, as one build or change set
/// them: the algorithm as the user gave it, and what the crate made of it.
/// A decision reads its plan and `local` here, one load from the limiter.
pub(crate) struct Version<A> {
    pub(crate) plan: Plan,
    /// What this process keeps under these limits, if anything (a deny
    /// cache, hot keys).
    pub(crate) local: Option<Arc<Local>>,
    /// Which build or change made it: unique within the limiter.
    pub(crate) generation: u64,
    /// The layer's header values of these limits, made when first needed.
    fields: OnceLock<OwnFields>,
    pub(crate) algorithm: A,
}

impl<A> Version<A> {
    /// The layer's header values of these limits.
    pub(crate) fn fields(&self) -> &OwnFields {
        self.fields.get_or_init(|| OwnFields::of(&self.plan))
    }
}

/// What this process keeps under one version of a limiter's own limits:
/// shared (an `Arc`) with the decisions that outlive a borrow of the
/// limiter (a decision waiting for Redis, a hot key's slice being taken).
pub(crate) struct Local {
    /// The version's plan.
    pub(crate) plan: Plan,
    /// The denials remembered under these limits: a change starts with
    /// none (a denial under a lower limit may be an admission now).
    pub(crate) deny_cache: Option<DenyCache>,
    /// The hot keys' allotments, sized from these limits.
    pub(crate) allotments: Option<Allotments>,
}

impl Local {
    /// Empty the deny cache and the hot keys' table: their limits changed.
    fn clear(&self) {
        if let Some(cache) = &self.deny_cache {
            cache.clear();
        }
        if let Some(table) = &self.allotments {
            table.clear();
        }
    }
}

/// Every version of a limiter's own limits, and the current one.
pub(crate) struct Versions<A> {
    current: Current<Version<A>>,
    /// The generation of the next change.
    next: AtomicU64,
}

impl<A> Versions<A> {
    /// The current version: one atomic load.
    #[inline(always)]
    pub(crate) fn current(&self) -> &Version<A> {
        self.current.load()
    }
}

impl<A: Algorithm> Versions<A> {
    /// The first version, made at build.
    pub(crate) fn new(first: Version<A>) -> Self {
        Self {
            current: Current::new(first),
            next: AtomicU64::new(1),
        }
    }

    /// The version of `generation`: the current one, or one a decision
    /// started under before a change.
    pub(crate) fn of(&self, generation: u64) -> Option<&Version<A>> {
        let now = self.current();
        if now.generation == generation {
            return Some(now);
        }
        self.current.find(|v| v.generation == generation)
    }

    /// Make `algorithm` the current version (unless it is already).
    pub(crate) fn set(&self, core: &Core, algorithm: A) -> Result<(), ConfigError> {
        self.current.replace(|now| {
            if now.algorithm == algorithm {
                return Ok(None);
            }
            let sharing = core.sharing(&algorithm)?;
            let generation = self.next.fetch_add(1, Ordering::Relaxed);
            let next = core.version(algorithm, sharing, generation);
            // The version stays for the decisions that read it, not its
            // tables: nothing decides under it any more but those.
            if let Some(local) = &now.local {
                local.clear();
            }
            Ok(Some(next))
        })
    }

    /// How many versions are kept (the current one included).
    pub(crate) fn kept(&self) -> usize {
        self.current.kept()
    }
}

impl Core {
    /// What the limiter's hot keys make of `algorithm`'s limits, checked
    /// as at build.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `hot_keys`: a limit in shadow mode, or
    /// what [`Sharing::new`] refuses.
    pub(crate) fn sharing<A: Algorithm>(
        &self,
        algorithm: &A,
    ) -> Result<Option<Sharing>, ConfigError> {
        let Some(hot) = self.hot_keys else {
            return Ok(None);
        };
        if algorithm.shadowed() != 0 {
            return Err(ConfigError::new(
                "hot_keys",
                "a limit in shadow mode is decided by the store on every request: take it out of shadow mode or turn hot keys off",
            ));
        }
        let specs: Vec<_> = algorithm.parts().into_iter().map(|p| p.1).collect();
        Sharing::new(hot, &specs).map(Some)
    }

    /// The version of `algorithm`'s limits numbered `generation`, with
    /// what [`sharing`](Self::sharing) made of them.
    pub(crate) fn version<A: Algorithm>(
        &self,
        algorithm: A,
        sharing: Option<Sharing>,
        generation: u64,
    ) -> Version<A> {
        let (parts, shadowed) = (algorithm.parts(), algorithm.shadowed());
        // Hot keys answer denials locally too: through the deny cache.
        let deny_cache = match (&sharing, self.deny_cache) {
            (Some(s), None) => NonZeroUsize::new(s.max_keys),
            (_, cache) => cache,
        };
        let plan = self.plan(parts, shadowed);
        let local = (deny_cache.is_some() || sharing.is_some()).then(|| {
            Arc::new(Local {
                plan: plan.clone(),
                deny_cache: deny_cache.map(DenyCache::new),
                allotments: sharing.map(|s| Allotments::new(s, &self.name, self.wait)),
            })
        });
        Version {
            plan,
            local,
            generation,
            fields: OnceLock::new(),
            algorithm,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::algorithm::FixedWindow;
    use crate::clock::ManualClock;
    use crate::store::MemoryStore;
    use crate::Limiter;
    use std::num::NonZeroUsize;
    use std::time::Duration;

    #[tokio::test]
    async fn a_version_changed_from_keeps_no_denials() {
        let minute = Duration::from_secs(60);
        let l = Limiter::builder(MemoryStore::new(), FixedWindow::new(1, minute))
            .clock(ManualClock::new(0))
            .deny_cache(NonZeroUsize::new(10).unwrap())
            .build()
            .unwrap();
        l.check("k", 1).await.unwrap();
        assert!(l.check("k", 1).await.unwrap().denied());
        let first = l.version().local.clone().unwrap();
        let cache = first.deny_cache.as_ref().unwrap();
        assert!(cache.get("k", 1, 0).is_some(), "remembered");
        l.set_algorithm(FixedWindow::new(2, minute)).unwrap();
        assert!(cache.get("k", 1, 0).is_none(), "emptied by the change");
    }
}
