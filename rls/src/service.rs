//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use floodgate::algorithm::Limits;
use floodgate::headers::{write_headers, HeaderStyle, LimitReport};
use floodgate::Limiter;
use tonic::{Request, Response, Status};

use crate::decide::decide;
use crate::hot::HotLimiters;
use crate::rules::Rules;
use crate::slots::{slots, DescriptorLimit};
use crate::OnStoreFailure;

/// The most descriptors one request may carry; more is `INVALID_ARGUMENT`
/// (Envoy sends a handful: one per rate-limit action of the route).
pub const MAX_DESCRIPTORS: usize = 1_024;

/// The library's default store timeout.
const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_millis(100);

/// The rate limit service: the limiter that decides, the rules in force
/// (swapped whole on a reload) and the header fields to send.
#[derive(Clone)]
pub struct RateLimitService {
    limiter: Limiter<Limits>,
    /// The limiters of the domains whose file names a `failure_policy`.
    by_policy: Vec<(OnStoreFailure, Limiter<Limits>, Arc<HotLimiters>)>,
    /// The limiters of the rules with `hot_keys`, beside `limiter`.
    hot: Arc<HotLimiters>,
    /// Their store timeout.
    store_timeout: Duration,
    rules: Arc<ArcSwap<Rules>>,
    headers: HeaderStyle,
    /// Global shadow mode: `OK` whatever the limits say.
    shadow_mode: bool,
    /// Whether answers carry dynamic metadata (`crate::metadata`).
    dynamic_metadata: bool,
    /// Global quota mode: every descriptor in quota mode.
    quota_mode: bool,
}

impl RateLimitService {
    /// A service deciding with `limiter` under `rules`; the rules can be
    /// replaced while it serves ([`rules`](Self::rules)).
    pub fn new(limiter: Limiter<Limits>, rules: Rules) -> Self {
        Self {
            limiter,
            by_policy: Vec::new(),
            hot: Arc::new(HotLimiters::new(DEFAULT_STORE_TIMEOUT)),
            store_timeout: DEFAULT_STORE_TIMEOUT,
            rules: Arc::new(ArcSwap::from_pointee(rules)),
            headers: HeaderStyle::None,
            shadow_mode: false,
            dynamic_metadata: false,
            quota_mode: false,
        }
    }

    /// The store timeout of the limiters a rule with `hot_keys` gets (one
    /// each, beside the service's): give the service limiter's own
    /// (default 100 ms, the library's).
    #[must_use]
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self.hot = Arc::new(HotLimiters::new(timeout));
        for (_, _, hot) in &mut self.by_policy {
            *hot = Arc::new(HotLimiters::new(timeout));
        }
        self
    }

    /// Decide the domains whose file says `failure_policy: <policy>` with
    /// `limiter` (the same store and name, that failure policy); a domain
    /// naming a policy with no limiter here takes the service's own.
    #[must_use]
    pub fn on_store_failure(mut self, policy: OnStoreFailure, limiter: Limiter<Limits>) -> Self {
        self.by_policy.retain(|(p, _, _)| *p != policy);
        let hot = Arc::new(HotLimiters::new(self.store_timeout));
        self.by_policy.push((policy, limiter, hot));
        self
    }

    /// Which rate-limit header fields Envoy is asked to add to its
    /// responses, those it lets through and its 429s alike: none (the
    /// default, as envoyproxy/ratelimit), the IETF `RateLimit` and
    /// `RateLimit-Policy`, or `X-RateLimit-Limit`, `-Remaining`, `-Reset`.
    /// They describe the descriptor closest to its limit.
    #[must_use]
    pub fn headers(mut self, style: HeaderStyle) -> Self {
        self.headers = style;
        self
    }

    /// Global shadow mode (envoyproxy/ratelimit's `SHADOW_MODE`): every
    /// request is decided and counted as usual (a request the limits
    /// refuse is charged nothing, as when they are enforced), and the
    /// answer is `OK` whatever they say; each answer so overridden counts
    /// in `floodgate_rls_global_shadow_mode`. The descriptors' statuses
    /// still say what the limits decided.
    #[must_use]
    pub fn shadow_mode(mut self, on: bool) -> Self {
        self.shadow_mode = on;
        self
    }

    /// Answers carry dynamic metadata (envoyproxy/ratelimit's
    /// `RESPONSE_DYNAMIC_METADATA`; off by default): the domain, the
    /// request's descriptors (their entries as `key=value`, their limit
    /// override and hits when they have them), the request's hits, and
    /// under `metadata` the configuration's `metadata:` of the
    /// descriptors not reported `OVER_LIMIT`, merged. Envoy's `ratelimit`
    /// filter keeps it for its access logs and later filters.
    #[must_use]
    pub fn dynamic_metadata(mut self, on: bool) -> Self {
        self.dynamic_metadata = on;
        self
    }

    /// Global quota mode (envoyproxy/ratelimit's `QUOTA_MODE`; off by
    /// default), as if every descriptor said `quota_mode: true`: a request
    /// is over only when every one of its descriptors in quota mode is
    /// over its limit. Each such descriptor is charged when it admits;
    /// its status says `OVER_LIMIT` when it does not, and the answer is
    /// `OK` while another admits. A refused request keeps no charge (what
    /// the others were charged is given back). A descriptor with no rule
    /// counts as one that admits, as in envoyproxy/ratelimit.
    #[must_use]
    pub fn quota_mode(mut self, on: bool) -> Self {
        self.quota_mode = on;
        self
    }

    /// The rules in force, to swap new ones in (`rules().store(...)`).
    pub fn rules(&self) -> &Arc<ArcSwap<Rules>> {
        &self.rules
    }

    /// The tonic service to add to a server.
    pub fn into_server(self) -> rate_limit_service_server::RateLimitServiceServer<Self> {
        rate_limit_service_server::RateLimitServiceServer::new(self)
    }

    /// Answer one request (what `ShouldRateLimit` does, without gRPC).
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for an empty domain, no descriptors, more than
    /// [`MAX_DESCRIPTORS`], a descriptor without entries or with a limit
    /// override in an unknown unit; `UNAVAILABLE` when the store fails and
    /// the failure policy returns the error (so Envoy applies its
    /// `failure_mode_deny`).
    pub async fn decide(&self, req: &RateLimitRequest) -> Result<RateLimitResponse, Status> {
        if req.domain.is_empty() {
            return Err(Status::invalid_argument(
                "rate limit domain must not be empty",
            ));
        }
        if req.descriptors.is_empty() {
            return Err(Status::invalid_argument(
                "rate limit descriptor list must not be empty",
            ));
        }
        if req.descriptors.len() > MAX_DESCRIPTORS {
            return Err(Status::invalid_argument(format!(
                "{} descriptors: at most {MAX_DESCRIPTORS}",
                req.descriptors.len()
            )));
        }
        if req.descriptors.iter().any(|d| d.entries.is_empty()) {
            return Err(Status::invalid_argument("a descriptor has no entries"));
        }
        let hits = u64::from(req.hits_addend.max(1));
        let rules = self.rules.load();
        let mut slots =
            slots(&rules, &req.domain, &req.descriptors, hits).map_err(Status::invalid_argument)?;
        let policy = rules.failure_policy(&req.domain);
        drop(rules);
        let (limiter, hot) = policy
            .and_then(|p| self.by_policy.iter().find(|(q, _, _)| *q == p))
            .map_or((&self.limiter, &self.hot), |(_, l, h)| (l, h));
        let refused = decide(limiter, hot, &mut slots, self.quota_mode)
            .await
            .map_err(|e| match e {
                floodgate::Error::Store(e) => Status::unavailable(format!("rate limit store: {e}")),
                other => Status::internal(other.to_string()),
            })?;
        crate::metrics::count(&req.domain, &slots);
        Ok(self.response(req, &slots, refused))
    }

    fn response(
        &self,
        req: &RateLimitRequest,
        slots: &[DescriptorLimit],
        over: bool,
    ) -> RateLimitResponse {
        let statuses: Vec<DescriptorStatus> = slots.iter().map(status).collect();
        let code = match (over, self.shadow_mode) {
            (false, _) => Code::Ok,
            (true, false) => Code::OverLimit,
            (true, true) => {
                crate::metrics::global_shadow_mode();
                Code::Ok
            }
        };
        RateLimitResponse {
            overall_code: code as i32,
            statuses,
            response_headers_to_add: self.header_fields(slots),
            dynamic_metadata: self
                .dynamic_metadata
                .then(|| crate::metadata::of_answer(req, slots)),
            ..RateLimitResponse::default()
        }
    }

    fn header_fields(&self, slots: &[DescriptorLimit]) -> Vec<HeaderValue> {
        if self.headers == HeaderStyle::None {
            return Vec::new();
        }
        let names: Vec<String> = slots
            .iter()
            .filter_map(|s| match s {
                DescriptorLimit::Limited(l) if l.decision.is_some() => {
                    Some(report_name(&l.name, &l.metric_key))
                }
                _ => None,
            })
            .collect();
        let reports: Vec<LimitReport<'_>> = slots
            .iter()
            .filter_map(|s| match s {
                DescriptorLimit::Limited(l) => l.decision.as_ref(),
                _ => None,
            })
            .zip(&names)
            .map(|((decision, quota), name)| LimitReport::new(name, *quota, decision))
            .collect();
        let mut map = http::HeaderMap::new();
        write_headers(self.headers, &reports, &mut map);
        map.iter()
            .filter_map(|(k, v)| {
                Some(HeaderValue {
                    key: k.as_str().to_owned(),
                    value: v.to_str().ok()?.to_owned(),
                    ..HeaderValue::default()
                })
            })
            .collect()
    }
}

/// The name a header field gives a limit: `rate_limit.name`, else the
/// descriptor's metric key.
fn report_name(name: &str, metric_key: &str) -> String {
    if name.is_empty() {
        metric_key.to_owned()
    } else {
        name.to_owned()
    }
}

fn status(slot: &DescriptorLimit) -> DescriptorStatus {
    match slot {
        DescriptorLimit::NoLimit => DescriptorStatus {
            code: Code::Ok as i32,
            ..DescriptorStatus::default()
        },
        DescriptorLimit::Unlimited => DescriptorStatus {
            code: Code::Ok as i32,
            limit_remaining: u32::MAX,
            ..DescriptorStatus::default()
        },
        DescriptorLimit::Limited(l) => {
            let code = if l.reported_over() {
                Code::OverLimit
            } else {
                Code::Ok
            };
            let remaining = l.remaining();
            DescriptorStatus {
                code: code as i32,
                current_limit: Some(RateLimit {
                    name: l.name.clone(),
                    requests_per_unit: l.requests_per_unit,
                    unit: l.unit.proto(),
                }),
                limit_remaining: u32::try_from(remaining).unwrap_or(u32::MAX),
                duration_until_reset: Some(proto_duration(l.until_reset())),
                ..DescriptorStatus::default()
            }
        }
    }
}

fn proto_duration(d: Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

#[tonic::async_trait]
impl rate_limit_service_server::RateLimitService for RateLimitService {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.decide(request.get_ref()).await.map(Response::new)
    }
}
