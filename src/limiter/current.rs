//! The limits a limiter decides with now, changed at run time, read by
//! every decision with one atomic load: no lock, no reference count, no
//! allocation.
//!
//! Every set of limits a limiter has had stays allocated until the limiter
//! (every clone) is dropped: a decision that read an older set, on another
//! thread or across an `.await`, keeps reading it safely without telling
//! anyone when it is done. That is what makes the load one instruction; the
//! price is a few hundred bytes per change (see
//! [`Limiter::set_algorithm`](crate::Limiter::set_algorithm)).

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The current `T`, and every `T` that was current before.
pub(crate) struct Current<T> {
    /// Points into one of `all`'s `Arc`s, the last one.
    now: AtomicPtr<T>,
    /// Every value ever current, the current one last: never removed
    /// before `self` is dropped. `Arc` (not `Box`) so that moving one in
    /// the `Vec` asserts nothing about the readers' shared references.
    all: Mutex<Vec<Arc<T>>>,
}

impl<T> Current<T> {
    pub(crate) fn new(first: T) -> Self {
        let first = Arc::new(first);
        Self {
            now: AtomicPtr::new(Arc::as_ptr(&first).cast_mut()),
            all: Mutex::new(vec![first]),
        }
    }

    /// The current value: one atomic load.
    #[inline(always)]
    pub(crate) fn load(&self) -> &T {
        let now = self.now.load(Ordering::Acquire);
        // SAFETY: `now` always points into an `Arc` held by `self.all`
        // (set by `new` and `replace` from one they keep there), and
        // nothing is ever removed from `all` while `self` lives, so the
        // value outlives the borrow of `self`. It is only ever shared
        // (`T` is never reached mutably), and the `Acquire` load pairs
        // with `replace`'s `Release` store: the value is fully built.
        unsafe { &*now }
    }

    /// Make `next` the current value, unless `keep(current)` says the
    /// current one stays (nothing changes then). Changes are serialized:
    /// `next` is built under the lock, from the current value.
    pub(crate) fn replace<E>(
        &self,
        next: impl FnOnce(&T) -> Result<Option<T>, E>,
    ) -> Result<(), E> {
        let mut all = self.lock();
        let Some(now) = all.last() else {
            return Ok(()); // Never empty: `new` puts the first value in.
        };
        let Some(next) = next(now)? else {
            return Ok(());
        };
        let next = Arc::new(next);
        let ptr = Arc::as_ptr(&next).cast_mut();
        all.push(next);
        self.now.store(ptr, Ordering::Release);
        Ok(())
    }

    /// The value that was or is current and satisfies `found`, newest
    /// first: for what read an older value and needs it again.
    pub(crate) fn find(&self, found: impl Fn(&T) -> bool) -> Option<&T> {
        let all = self.lock();
        let ptr = Arc::as_ptr(all.iter().rev().find(|t| found(t))?);
        // SAFETY: as in `load`: the `Arc` stays in `all` while `self`
        // lives, so the value outlives the borrow of `self`.
        Some(unsafe { &*ptr })
    }

    /// How many values were ever current (the current one included).
    pub(crate) fn kept(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Arc<T>>> {
        self.all.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::Current;

    #[test]
    fn a_value_read_before_a_change_stays_readable_after_it() {
        let current = Current::new(String::from("one"));
        let before = current.load();
        for n in 0..100 {
            current
                .replace(|_| Ok::<_, ()>(Some(format!("n{n}"))))
                .unwrap();
        }
        assert_eq!(before, "one", "kept while the Vec grew");
        assert_eq!(current.load(), "n99");
        assert_eq!(current.kept(), 101);
        assert_eq!(current.find(|s| s == "n3").map(String::as_str), Some("n3"));
        // A change that keeps the current value changes nothing.
        current.replace(|_| Ok::<_, ()>(None)).unwrap();
        assert_eq!(current.kept(), 101);
        assert_eq!(current.replace(|_| Err::<Option<String>, _>(7)), Err(7));
        assert_eq!(current.load(), "n99");
    }

    #[test]
    fn readers_on_other_threads_see_whole_values() {
        let current = Current::new(vec![0u64; 64]);
        std::thread::scope(|s| {
            s.spawn(|| {
                for n in 1..2000u64 {
                    current.replace(|_| Ok::<_, ()>(Some(vec![n; 64]))).unwrap();
                }
            });
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        let v = current.load();
                        assert!(v.iter().all(|&x| x == v[0]), "a torn value");
                    }
                });
            }
        });
        assert_eq!(current.load()[0], 1999);
    }
}
