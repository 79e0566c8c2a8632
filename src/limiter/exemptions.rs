//! [`Exemptions`]: keys a limiter never limits, and keys it always refuses,
//! changed at run time through a shared handle.

use super::core::{Ask, Core};
use super::outcome::{Finish, Outcome};
use crate::pending::Pending;
use crate::{Decision, Reason};
use ipnet::IpNet;
use parking_lot::RwLock;
use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// An allow list (never limited, no store call) and a deny list (always
/// refused), by exact key and, for IP keys, by network: what a limiter
/// checks before anything else, on every decision (`check`, `check_all`,
/// `check_with`, `peek`, the layers; a concurrency limiter's `acquire` and
/// `peek` too). A refund or a lease's release always reaches the store: it
/// gives back what was charged before the key was listed (the layers
/// charge an exempt request nothing, so they give nothing back for it).
///
/// A handle: cheap to clone, every clone (and every limiter given one)
/// sees the same lists, and a change applies to the next decision, with
/// nothing rebuilt. Give it to a limiter with
/// [`LimiterBuilder::exemptions`](crate::LimiterBuilder::exemptions) (or
/// the concurrency limiter's), keep a clone, and change the lists while
/// the service runs.
///
/// - A key on the deny list is refused: [`Reason::Blocked`], with no
///   `retry_after` (waiting does not help). The layer answers 403 with a
///   problem+json body (gRPC `PERMISSION_DENIED`).
/// - A key on the allow list is admitted: [`Reason::Exempt`], its numbers
///   `u64::MAX` (no limit), nothing charged or read. The layer sends no
///   rate-limit fields with its response.
/// - A key on both is refused: the deny list wins.
///
/// A network matches a key that is an IP address in it (`203.0.113.7`,
/// `2001:db8::1`), or a network inside it (`2001:db8:1:2::/64`, the key of
/// [`PeerIp`](crate::key::PeerIp) or [`ClientIp`](crate::key::ClientIp)
/// grouping IPv6 clients by prefix). IPv4-mapped IPv6 addresses match as
/// IPv4, as the key extractors write them.
///
/// With both lists empty, a decision pays one atomic load for them.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use floodgate::{algorithm::Gcra, store::MemoryStore, Exemptions, Limiter, Reason};
/// use std::time::Duration;
///
/// let exemptions = Exemptions::new();
/// let limiter = Limiter::builder(MemoryStore::new(), Gcra::new(1, Duration::from_secs(60)))
///     .exemptions(exemptions.clone())
///     .build()?;
/// exemptions.allow_network("10.0.0.0/8".parse()?);
/// exemptions.deny_key("203.0.113.7");
///
/// // Never limited: the second request is admitted too.
/// assert_eq!(limiter.check("10.1.2.3", 1).await?.reason(), Reason::Exempt);
/// assert_eq!(limiter.check("10.1.2.3", 1).await?.reason(), Reason::Exempt);
/// // Always refused.
/// assert_eq!(limiter.check("203.0.113.7", 1).await?.reason(), Reason::Blocked);
/// // Changed at run time: the next decision sees it.
/// exemptions.remove_denied_key("203.0.113.7");
/// assert_eq!(limiter.check("203.0.113.7", 1).await?.reason(), Reason::WithinLimit);
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct Exemptions {
    shared: Arc<ExemptionLists>,
}

#[derive(Default)]
struct ExemptionLists {
    /// Whether any list holds anything: the one thing a decision reads when
    /// none does.
    active: AtomicBool,
    lists: RwLock<Lists>,
}

#[derive(Default)]
struct Lists {
    allowed: List,
    denied: List,
}

#[derive(Default)]
struct List {
    keys: HashSet<Box<str>>,
    networks: Vec<IpNet>,
}

/// Which list a key is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listed {
    Allowed,
    Denied,
}

impl List {
    fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.networks.is_empty()
    }

    fn holds(&self, key: &str, net: Option<IpNet>) -> bool {
        if self.keys.contains(key) {
            return true;
        }
        match net {
            Some(net) => self.networks.iter().any(|n| n.contains(&net)),
            None => false,
        }
    }
}

impl Exemptions {
    /// Empty lists.
    pub fn new() -> Self {
        Self::default()
    }

    /// Never limit `key` (matched exactly).
    pub fn allow_key(&self, key: impl Into<String>) {
        self.change(|l| {
            l.allowed.keys.insert(key.into().into_boxed_str());
        });
    }

    /// Never limit the IP keys in `network` (`"10.0.0.0/8".parse()?`, an
    /// [`IpNet`](crate::key::IpNet)).
    pub fn allow_network(&self, network: IpNet) {
        self.change(|l| add(&mut l.allowed.networks, network));
    }

    /// Always refuse `key` (matched exactly).
    pub fn deny_key(&self, key: impl Into<String>) {
        self.change(|l| {
            l.denied.keys.insert(key.into().into_boxed_str());
        });
    }

    /// Always refuse the IP keys in `network`.
    pub fn deny_network(&self, network: IpNet) {
        self.change(|l| add(&mut l.denied.networks, network));
    }

    /// Take `key` off the allow list; whether it was on it.
    pub fn remove_allowed_key(&self, key: &str) -> bool {
        self.change(|l| l.allowed.keys.remove(key))
    }

    /// Take `network` off the allow list (as it was given, normalized);
    /// whether it was on it.
    pub fn remove_allowed_network(&self, network: IpNet) -> bool {
        self.change(|l| remove(&mut l.allowed.networks, network))
    }

    /// Take `key` off the deny list; whether it was on it.
    pub fn remove_denied_key(&self, key: &str) -> bool {
        self.change(|l| l.denied.keys.remove(key))
    }

    /// Take `network` off the deny list; whether it was on it.
    pub fn remove_denied_network(&self, network: IpNet) -> bool {
        self.change(|l| remove(&mut l.denied.networks, network))
    }

    /// Empty both lists.
    pub fn clear(&self) {
        self.change(|l| *l = Lists::default());
    }

    /// Whether both lists are empty.
    pub fn is_empty(&self) -> bool {
        !self.is_active()
    }

    /// Whether `key` is on a list: `Some(true)` allowed, `Some(false)`
    /// denied (the deny list wins), `None` on neither.
    pub fn lookup(&self, key: &str) -> Option<bool> {
        self.listed(key).map(|l| l == Listed::Allowed)
    }

    /// Change the lists, then say whether any holds anything.
    fn change<R>(&self, f: impl FnOnce(&mut Lists) -> R) -> R {
        let mut lists = self.shared.lists.write();
        let r = f(&mut lists);
        let active = !(lists.allowed.is_empty() && lists.denied.is_empty());
        self.shared.active.store(active, Ordering::Release);
        r
    }

    /// Whether any list holds anything: one atomic load.
    #[inline(always)]
    pub(crate) fn is_active(&self) -> bool {
        self.shared.active.load(Ordering::Acquire)
    }

    /// Which list `key` is on, if any.
    pub(crate) fn listed(&self, key: &str) -> Option<Listed> {
        let lists = self.shared.lists.read();
        let any_networks = !(lists.denied.networks.is_empty() && lists.allowed.networks.is_empty());
        let net = any_networks.then(|| ip_net(key)).flatten();
        if lists.denied.holds(key, net) {
            Some(Listed::Denied)
        } else if lists.allowed.holds(key, net) {
            Some(Listed::Allowed)
        } else {
            None
        }
    }
}

impl Listed {
    /// The decision for a key on this list.
    pub(crate) fn decision(self) -> Decision {
        match self {
            Listed::Allowed => Decision::new(
                Reason::Exempt,
                u64::MAX,
                u64::MAX,
                Duration::ZERO,
                None,
                Duration::ZERO,
            ),
            Listed::Denied => {
                Decision::new(Reason::Blocked, 0, 0, Duration::ZERO, None, Duration::ZERO)
            }
        }
    }
}

impl Core {
    /// A key of a limiter with exemptions: answered here when it is on a
    /// list (the store not asked, the deny cache not either), else decided
    /// as any other.
    #[inline(never)]
    pub(super) fn screened<F: Finish>(
        self: &Arc<Self>,
        lists: &Exemptions,
        ask: Ask<'_>,
        cost: u64,
        finish: F,
    ) -> Pending<F::Output> {
        // A call of several keys: a key denied refuses it, else a key
        // allowed exempts it.
        let listed = if ask.keys.is_empty() {
            lists.listed(ask.key)
        } else {
            let each = ask.keys.iter().filter_map(|k| lists.listed(k));
            each.max_by_key(|l| matches!(l, Listed::Denied))
        };
        let Some(listed) = listed else {
            return self.unlisted(ask, cost, finish);
        };
        let d = listed.decision();
        if ask.counted {
            self.metrics.decided(d.reason(), false);
        }
        // One decision per limit (a plan is never empty).
        let each = ask.plan.targets.iter().map(|_| d);
        let outcome = Outcome::of(each).unwrap_or_else(|_| Outcome::one(d));
        Pending::ready(Ok(finish.finish(outcome)))
    }
}

/// `key` as a network: an address (a network of one) or a network in CIDR
/// notation, IPv4-mapped IPv6 addresses as IPv4.
fn ip_net(key: &str) -> Option<IpNet> {
    if let Ok(ip) = key.parse::<IpAddr>() {
        return Some(IpNet::from(crate::key::ip::canonical(ip)));
    }
    key.parse::<IpNet>().ok().map(|n| n.trunc())
}

fn add(networks: &mut Vec<IpNet>, network: IpNet) {
    let network = network.trunc();
    if !networks.contains(&network) {
        networks.push(network);
    }
}

fn remove(networks: &mut Vec<IpNet>, network: IpNet) -> bool {
    let network = network.trunc();
    let before = networks.len();
    networks.retain(|n| *n != network);
    networks.len() != before
}

impl std::fmt::Debug for Exemptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lists = self.shared.lists.read();
        f.debug_struct("Exemptions")
            .field("allowed_keys", &lists.allowed.keys.len())
            .field("allowed_networks", &lists.allowed.networks)
            .field("denied_keys", &lists.denied.keys.len())
            .field("denied_networks", &lists.denied.networks)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn keys_and_networks_of_both_families_match() {
        let e = Exemptions::new();
        assert!(e.is_empty() && e.lookup("10.1.2.3").is_none());
        e.allow_network(net("10.0.0.0/8"));
        e.deny_network(net("2001:db8::/32"));
        e.allow_key("ana");
        assert!(!e.is_empty());
        assert_eq!(e.lookup("10.1.2.3"), Some(true));
        assert_eq!(e.lookup("::ffff:10.1.2.3"), Some(true));
        assert_eq!(e.lookup("11.0.0.1"), None);
        assert_eq!(e.lookup("2001:db8:5::1"), Some(false));
        // A grouped IPv6 key: a network inside the listed one.
        assert_eq!(e.lookup("2001:db8:1:2::/64"), Some(false));
        assert_eq!(e.lookup("2001:db9::/64"), None);
        assert_eq!(e.lookup("ana"), Some(true));
        assert_eq!(e.lookup("ana2"), None);
    }

    #[test]
    fn the_deny_list_wins_and_removals_empty_the_lists() {
        let e = Exemptions::new();
        e.allow_key("bo");
        e.deny_key("bo");
        assert_eq!(e.lookup("bo"), Some(false));
        assert!(e.remove_denied_key("bo"));
        assert!(!e.remove_denied_key("bo"));
        assert_eq!(e.lookup("bo"), Some(true));
        assert!(e.remove_allowed_key("bo"));
        assert!(e.is_empty());
        // A network is kept as its network address.
        e.deny_network(net("192.0.2.77/24"));
        assert_eq!(e.lookup("192.0.2.1"), Some(false));
        assert!(e.remove_denied_network(net("192.0.2.0/24")));
        assert!(e.is_empty());
        e.allow_network(net("::1/128"));
        e.clear();
        assert!(e.is_empty() && e.lookup("::1").is_none());
    }
}
