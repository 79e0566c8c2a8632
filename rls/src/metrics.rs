//! The counts envoyproxy/ratelimit reports per descriptor, through the
//! `metrics` facade (served as Prometheus text on `/metrics`), each
//! counting hits (`hits_addend`), labelled with `domain` and `key` (the
//! rule's descriptor path, `domain.key_value.key`; with `detailed_metric`
//! the request's own values, with `value_to_metric` the values of the
//! entries so marked):
//!
//! | metric | counts |
//! |---|---|
//! | `floodgate_rls_total_hits` | every hit of a limited descriptor |
//! | `floodgate_rls_over_limit` | hits refused by the descriptor's limit |
//! | `floodgate_rls_near_limit` | hits admitted past 80 % of the limit |
//! | `floodgate_rls_within_limit` | hits admitted |
//! | `floodgate_rls_shadow_mode` | hits a `shadow_mode` limit would have refused |
//!
//! and `floodgate_rls_config_loads{result = "ok" | "error"}`,
//! `floodgate_rls_global_shadow_mode` (answers global shadow mode turned
//! from `OVER_LIMIT` to `OK`). The library's
//! own metrics (`floodgate_decisions_total`, ...) come with them.

use metrics::counter;

use crate::slots::DescriptorLimit;

/// Count a decided request's descriptors.
pub(crate) fn count(domain: &str, slots: &[DescriptorLimit]) {
    for slot in slots {
        // Hits given back (`is_negative_hits`) are not hits.
        let DescriptorLimit::Limited(l) = slot else {
            continue;
        };
        if l.negative {
            continue;
        }
        let labels = [("domain", domain.to_owned()), ("key", l.metric_key.clone())];
        let hits = l.cost;
        counter!("floodgate_rls_total_hits", &labels).increment(hits);
        if l.over() {
            counter!("floodgate_rls_over_limit", &labels).increment(hits);
            if l.shadow {
                counter!("floodgate_rls_shadow_mode", &labels).increment(hits);
            }
            continue;
        }
        counter!("floodgate_rls_within_limit", &labels).increment(hits);
        let limit = u64::from(l.requests_per_unit);
        let used = l
            .decision
            .as_ref()
            .map_or(0, |(d, _)| limit.saturating_sub(d.remaining()));
        let near = limit * 4 / 5;
        if used > near {
            counter!("floodgate_rls_near_limit", &labels).increment(hits.min(used - near));
        }
    }
}

/// Count a configuration load.
pub(crate) fn config_loaded(ok: bool) {
    let result = if ok { "ok" } else { "error" };
    counter!("floodgate_rls_config_loads", "result" => result).increment(1);
}

/// Count an answer global shadow mode turned to `OK`.
pub(crate) fn global_shadow_mode() {
    counter!("floodgate_rls_global_shadow_mode").increment(1);
}
