use super::layer::Config;
use crate::key::{KeyExtractor, KeyRejection};
use crate::layer::answer::Answer;
use crate::layer::gate::Gate;
use crate::layer::service::{Gatekeeper, Limit};
use crate::limiter::{Decided, Pending};
use http::Request;
use std::sync::Arc;

/// The middleware [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer)
/// wraps a service in.
pub type ConcurrencyLimit<S, K> = Limit<S, Config<K>>;

// The trait is sealed: its items are reached only through `Limit`'s
// `Service` impl, never named outside the crate.
#[allow(private_interfaces)]
impl<K: KeyExtractor> Gatekeeper for Config<K> {
    fn key<B>(&self, req: &Request<B>) -> Result<String, KeyRejection> {
        self.extractor.extract(req)
    }

    fn answer(&self) -> &Answer {
        &self.answer.answer
    }

    fn start<B>(this: &Arc<Self>, _req: &Request<B>, key: String) -> (Pending<Decided>, Gate) {
        let (id, decision) = this.limiter.start_acquire(&key);
        let gate = Gate::Lease {
            layer: this.answer.clone(),
            limiter: this.limiter.clone(),
            key,
            id,
        };
        (decision, gate)
    }
}
