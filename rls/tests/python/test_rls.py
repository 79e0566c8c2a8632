#!/usr/bin/env python3
"""An independent client of floodgate-rls: Python's grpcio with the Envoy
project's own generated messages (xds-protos), not the Rust types the
server is built from, checking ShouldRateLimit's answers field by field,
grpc.health.v1 and /metrics.

    python3 test_rls.py GRPC_ADDR METRICS_ADDR

GRPC_ADDR and METRICS_ADDR are host:port. The server must serve the EDGE
configuration of rls/tests/python_client.rs, freshly started (the checks
count from zero). Every check runs, in order; the failed ones are printed
with what came back, and the exit status is 1 if any failed.

Needs grpcio and xds-protos on PYTHONPATH (`bash scripts/test` installs
them, or `python3 -m pip install --target DIR grpcio xds-protos`).
"""

import re
import sys
import time
import traceback
import urllib.request

import grpc
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

Response = rls_pb2.RateLimitResponse

# The protobuf enums' values, as Envoy's API defines them.
OK, OVER_LIMIT = 1, 2
SECOND, MINUTE, HOUR = 1, 2, 3
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
# Every call's deadline, so that a server that stops answering fails the
# check instead of hanging the script.
TIMEOUT_S = 20


class Client:
    def __init__(self, addr):
        self.channel = grpc.insecure_channel(
            addr,
            options=[
                ("grpc.enable_http_proxy", 0),
                ("grpc.max_send_message_length", 16 * 1024 * 1024),
                ("grpc.max_receive_message_length", 16 * 1024 * 1024),
            ],
        )
        grpc.channel_ready_future(self.channel).result(timeout=TIMEOUT_S)
        self.stub = rls_pb2_grpc.RateLimitServiceStub(self.channel)

    def call(self, req):
        """The answer, or the grpc.RpcError raised."""
        return self.stub.ShouldRateLimit(req, timeout=TIMEOUT_S)

    def ask(self, req):
        """The answer, its shape checked (what every answer must be)."""
        try:
            r = self.call(req)
        except grpc.RpcError as e:
            raise AssertionError(
                f"ShouldRateLimit failed: {e.code()} {e.details()!r}\n"
                f"request: {short(req)}"
            ) from None
        check_shape(req, r)
        return r


def short(message, limit=600):
    text = str(message).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


def check_shape(req, r):
    """One status a descriptor, in the request's order; the overall code is
    OVER_LIMIT exactly when a status is; a status with a limit has a reset,
    one without a limit has neither."""
    where = f"\nrequest: {short(req)}\nanswer: {short(r)}"
    assert len(r.statuses) == len(req.descriptors), (
        f"{len(r.statuses)} statuses for {len(req.descriptors)} descriptors{where}"
    )
    assert r.overall_code in (OK, OVER_LIMIT), f"overall_code {r.overall_code}{where}"
    for s in r.statuses:
        assert s.code in (OK, OVER_LIMIT), f"status code {s.code}{where}"
        if s.HasField("current_limit"):
            assert s.HasField("duration_until_reset"), f"a limit without a reset{where}"
        else:
            assert not s.HasField("duration_until_reset"), f"a reset without a limit{where}"
            assert s.code == OK, f"OVER_LIMIT without a limit{where}"
    over = any(s.code == OVER_LIMIT for s in r.statuses)
    if req.domain == "py_quota":
        # Quota mode: over only when every status is.
        over = all(s.code == OVER_LIMIT for s in r.statuses)
    assert (r.overall_code == OVER_LIMIT) == over, (
        f"overall_code {r.overall_code} but statuses {[s.code for s in r.statuses]}{where}"
    )
    # The server runs with --response-dynamic-metadata: every answer names
    # its domain and descriptors.
    assert r.HasField("dynamic_metadata"), f"no dynamic_metadata{where}"
    m = r.dynamic_metadata.fields
    assert m["domain"].string_value == req.domain, f"dynamic_metadata domain{where}"
    described = [
        [e.string_value for e in d.struct_value.fields["entries"].list_value.values]
        for d in m["descriptors"].list_value.values
    ]
    sent = [[f"{e.key}={e.value}" for e in d.entries] for d in req.descriptors]
    assert described == sent, f"dynamic_metadata descriptors {described}{where}"


def descriptor(*entries, hits=None, limit=None):
    d = ratelimit_pb2.RateLimitDescriptor(
        entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key=k, value=v) for k, v in entries]
    )
    if hits is not None:
        d.hits_addend.value = hits
    if limit is not None:
        d.limit.requests_per_unit, d.limit.unit = limit
    return d


def request(domain, *descriptors, hits_addend=0):
    return rls_pb2.RateLimitRequest(
        domain=domain, descriptors=list(descriptors), hits_addend=hits_addend
    )


def seconds(duration):
    return duration.seconds + duration.nanos / 1e9


def limit_of(status):
    """(name, requests_per_unit, unit) of a status's current limit."""
    assert status.HasField("current_limit"), f"no current_limit in {short(status)}"
    c = status.current_limit
    return (c.name, c.requests_per_unit, c.unit)


def expect_no_limit(s, remaining, what):
    assert s.code == OK, f"{what}: code {s.code}, want OK"
    assert not s.HasField("current_limit"), f"{what}: a current_limit {short(s.current_limit)}"
    assert not s.HasField("duration_until_reset"), f"{what}: a duration_until_reset"
    assert s.limit_remaining == remaining, (
        f"{what}: limit_remaining {s.limit_remaining}, want {remaining}"
    )


def same_window(unit_s, need_s):
    """Wait, if need be, for a fixed window of `unit_s` (aligned to the
    Unix epoch, as the server's) with at least `need_s` left: the hits of a
    check that counts must all fall in one window."""
    left = unit_s - (time.time() % unit_s)
    if left < need_s:
        time.sleep(left + 0.05)


# The checks, run in this order (metrics last: it counts what the others
# did). Every check uses its own descriptor values, so none sees another's
# counts, except /upload (one counter for every client), used by one check.

def check_generated_enums():
    assert Response.OK == OK and Response.OVER_LIMIT == OVER_LIMIT
    unit = Response.RateLimit
    assert (unit.SECOND, unit.MINUTE, unit.HOUR) == (SECOND, MINUTE, HOUR)


def check_a_key_at_50_a_second(c):
    same_window(1, 0.4)
    r = c.ask(request("edge", descriptor(("remote_address", "py-10.0.0.1"))))
    assert r.overall_code == OK, f"overall_code {r.overall_code}"
    s = r.statuses[0]
    assert s.code == OK, f"code {s.code}"
    assert s.limit_remaining == 49, f"limit_remaining {s.limit_remaining}, want 49"
    assert limit_of(s) == ("", 50, SECOND), f"current_limit {limit_of(s)}"
    reset = seconds(s.duration_until_reset)
    assert 0 < reset <= 1, f"duration_until_reset {reset} s, want (0, 1]"
    assert 0 <= s.duration_until_reset.nanos < 10**9, f"nanos {s.duration_until_reset.nanos}"
    r = c.ask(request("edge", descriptor(("remote_address", "py-10.0.0.1"))))
    assert r.statuses[0].limit_remaining == 48, (
        f"second hit: limit_remaining {r.statuses[0].limit_remaining}, want 48"
    )
    # Another address has its own counter.
    r = c.ask(request("edge", descriptor(("remote_address", "py-10.0.0.2"))))
    assert r.statuses[0].limit_remaining == 49, (
        f"another address: limit_remaining {r.statuses[0].limit_remaining}, want 49"
    )


def check_at_20_a_minute_the_21st_hit_is_over(c):
    same_window(60, 10)
    upload = lambda: request("edge", descriptor(("path", "/upload")))  # noqa: E731
    for i in range(20):
        r = c.ask(upload())
        s = r.statuses[0]
        assert (r.overall_code, s.code) == (OK, OK), f"hit {i + 1}: {short(r)}"
        assert s.limit_remaining == 19 - i, (
            f"hit {i + 1}: limit_remaining {s.limit_remaining}, want {19 - i}"
        )
        assert limit_of(s) == ("upload", 20, MINUTE), f"hit {i + 1}: {limit_of(s)}"
    for hit in (21, 22):
        r = c.ask(upload())
        s = r.statuses[0]
        assert r.overall_code == OVER_LIMIT, f"hit {hit}: overall_code {r.overall_code}"
        assert s.code == OVER_LIMIT, f"hit {hit}: code {s.code}"
        assert s.limit_remaining == 0, f"hit {hit}: limit_remaining {s.limit_remaining}"
        assert limit_of(s) == ("upload", 20, MINUTE), f"hit {hit}: {limit_of(s)}"
        reset = seconds(s.duration_until_reset)
        assert 0 < reset <= 60, f"hit {hit}: duration_until_reset {reset} s"


def check_nested_descriptors(c):
    same_window(3600, 10)
    free = descriptor(("api_key", "py-k1"), ("plan", "free"))
    pro = descriptor(("api_key", "py-k1"), ("plan", "pro"))
    alone = descriptor(("api_key", "py-k1"))
    r = c.ask(request("edge", free, pro, alone))
    got = [(limit_of(s), s.limit_remaining) for s in r.statuses]
    want = [(("", 3, HOUR), 2), (("", 5, HOUR), 4), (("", 100, HOUR), 99)]
    assert got == want, f"(limit, remaining) {got}, want {want}"
    r = c.ask(request("edge", free))
    assert r.statuses[0].limit_remaining == 1, f"free again: {short(r)}"
    # An entry the tree does not have under plan_free: no limit.
    deeper = descriptor(("api_key", "py-k1"), ("plan", "free"), ("region", "eu"))
    r = c.ask(request("edge", deeper))
    expect_no_limit(r.statuses[0], 0, "api_key/plan/region")
    # plan is not a top-level key.
    r = c.ask(request("edge", descriptor(("plan", "free"))))
    expect_no_limit(r.statuses[0], 0, "plan alone")


def check_wildcards(c):
    same_window(3600, 10)
    for path in ("/static/app.js", "/static/", "/static/a/b/c.css"):
        r = c.ask(request("edge", descriptor(("path", path))))
        assert r.overall_code == OK, f"{path}: overall_code {r.overall_code}"
        expect_no_limit(r.statuses[0], U32_MAX, f"unlimited {path}")
    # Unlimited many times over: still OK.
    for _ in range(5):
        r = c.ask(request("edge", descriptor(("path", "/static/app.js")), hits_addend=1000))
        expect_no_limit(r.statuses[0], U32_MAX, "unlimited, hits_addend 1000")
    # /v1/*/items: every matching path its own counter, 2 an hour.
    for path in ("/v1/py-a/items", "/v1/py-b/items", "/v1/x/y/items"):
        for left in (1, 0):
            r = c.ask(request("edge", descriptor(("path", path))))
            s = r.statuses[0]
            assert (r.overall_code, s.limit_remaining) == (OK, left), f"{path}: {short(r)}"
            assert limit_of(s) == ("", 2, HOUR), f"{path}: {limit_of(s)}"
        r = c.ask(request("edge", descriptor(("path", path))))
        assert (r.overall_code, r.statuses[0].code) == (OVER_LIMIT, OVER_LIMIT), (
            f"{path}, third hit: {short(r)}"
        )
    for path in ("/v1/py-a/other", "/v2/py-a/items", "/static", "/uploads"):
        r = c.ask(request("edge", descriptor(("path", path))))
        expect_no_limit(r.statuses[0], 0, f"unmatched {path}")


def check_unlimited(c):
    r = c.ask(request("edge", descriptor(("path", "/static/u.png")), hits_addend=U32_MAX))
    assert r.overall_code == OK, f"overall_code {r.overall_code}"
    expect_no_limit(r.statuses[0], U32_MAX, "unlimited, hits_addend 2**32-1")


def check_shadow_mode(c):
    same_window(3600, 10)
    ask = lambda: request("edge", descriptor(("shadowed", "py-x")))  # noqa: E731
    r = c.ask(ask())
    s = r.statuses[0]
    assert (r.overall_code, s.code, s.limit_remaining) == (OK, OK, 0), f"first: {short(r)}"
    assert limit_of(s) == ("", 1, HOUR), f"first: {limit_of(s)}"
    for hit in (2, 3):
        r = c.ask(ask())
        s = r.statuses[0]
        assert (r.overall_code, s.code) == (OK, OK), f"hit {hit} over a shadow limit: {short(r)}"
        assert s.limit_remaining == 0, f"hit {hit}: limit_remaining {s.limit_remaining}"
        assert limit_of(s) == ("", 1, HOUR), f"hit {hit}: {limit_of(s)}"
    # Over its limit, a shadow limit refuses nothing: the others are charged.
    key = descriptor(("api_key", "py-shadow"))
    r = c.ask(request("edge", ask().descriptors[0], key))
    assert r.overall_code == OK, f"shadow and an api key: {short(r)}"
    assert [s.limit_remaining for s in r.statuses] == [0, 99], f"shadow and an api key: {short(r)}"
    r = c.ask(request("edge", key))
    assert r.statuses[0].limit_remaining == 98, f"the api key after: {short(r)}"


def check_replaces(c):
    same_window(3600, 10)
    both = lambda: request(  # noqa: E731
        "edge", descriptor(("tenant", "py-t1")), descriptor(("tenant_vip", "py-t1"))
    )
    for i in range(3):
        r = c.ask(both())
        assert r.overall_code == OK, f"both, {i + 1}: {short(r)}"
        expect_no_limit(r.statuses[0], 0, f"tenant_small replaced, {i + 1}")
        s = r.statuses[1]
        assert limit_of(s) == ("", 1000, HOUR), f"tenant_vip: {limit_of(s)}"
        assert s.limit_remaining == 999 - i, f"tenant_vip: limit_remaining {s.limit_remaining}"
    # The replaced limit was not charged: alone, tenant_small applies.
    alone = lambda: request("edge", descriptor(("tenant", "py-t1")))  # noqa: E731
    r = c.ask(alone())
    s = r.statuses[0]
    assert (r.overall_code, s.limit_remaining) == (OK, 0), f"tenant alone: {short(r)}"
    assert limit_of(s) == ("tenant_small", 1, HOUR), f"tenant alone: {limit_of(s)}"
    r = c.ask(alone())
    assert (r.overall_code, r.statuses[0].code) == (OVER_LIMIT, OVER_LIMIT), (
        f"tenant alone, second: {short(r)}"
    )


def check_unknown_domain_and_descriptor(c):
    r = c.ask(request("py-nowhere", descriptor(("a", "b")), descriptor(("remote_address", "x"))))
    assert r.overall_code == OK, f"unknown domain: {short(r)}"
    for s in r.statuses:
        expect_no_limit(s, 0, "unknown domain")
    r = c.ask(request("edge", descriptor(("unknown", "b"))))
    assert r.overall_code == OK, f"unknown descriptor: {short(r)}"
    expect_no_limit(r.statuses[0], 0, "unknown descriptor")
    # Domains are case-sensitive.
    r = c.ask(request("EDGE", descriptor(("path", "/upload"))))
    expect_no_limit(r.statuses[0], 0, "domain EDGE")


def check_statuses_in_request_order(c):
    same_window(3600, 10)
    r = c.ask(request(
        "edge",
        descriptor(("path", "/static/o.js")),
        descriptor(("api_key", "py-k2"), ("plan", "free")),
        descriptor(("unknown", "z")),
        descriptor(("path", "/v1/py-o/items")),
        descriptor(("api_key", "py-k2")),
    ))
    assert r.overall_code == OK, f"overall_code {r.overall_code}"
    expect_no_limit(r.statuses[0], U32_MAX, "status 0 (unlimited)")
    expect_no_limit(r.statuses[2], 0, "status 2 (unknown)")
    got = [(limit_of(r.statuses[i]), r.statuses[i].limit_remaining) for i in (1, 3, 4)]
    want = [(("", 3, HOUR), 2), (("", 2, HOUR), 1), (("", 100, HOUR), 99)]
    assert got == want, f"statuses 1, 3, 4: {got}, want {want}"


def check_all_or_nothing(c):
    same_window(3600, 10)
    # Use up tenant py-t3's one hit an hour.
    r = c.ask(request("edge", descriptor(("tenant", "py-t3"))))
    assert r.overall_code == OK, f"tenant py-t3, first: {short(r)}"
    # Refused by py-t3: the api key (100 an hour) is not charged.
    key = descriptor(("api_key", "py-k3"))
    r = c.ask(request("edge", key, descriptor(("tenant", "py-t3"))))
    assert r.overall_code == OVER_LIMIT, f"overall_code {r.overall_code}"
    assert [s.code for s in r.statuses] == [OK, OVER_LIMIT], f"codes {short(r)}"
    assert r.statuses[0].limit_remaining == 100, (
        f"the refused request's api key: limit_remaining {r.statuses[0].limit_remaining},"
        " want 100 (not charged)"
    )
    assert r.statuses[1].limit_remaining == 0, f"tenant: {r.statuses[1].limit_remaining}"
    r = c.ask(request("edge", key))
    assert r.statuses[0].limit_remaining == 99, (
        f"the api key's next hit: limit_remaining {r.statuses[0].limit_remaining}, want 99"
    )
    # The same with the refusing descriptor first, and several others.
    a, b = descriptor(("api_key", "py-k4")), descriptor(("path", "/v1/py-aon/items"))
    r = c.ask(request("edge", descriptor(("tenant", "py-t3")), a, b))
    assert [s.code for s in r.statuses] == [OVER_LIMIT, OK, OK], f"codes {short(r)}"
    assert [s.limit_remaining for s in r.statuses] == [0, 100, 2], f"remaining {short(r)}"
    r = c.ask(request("edge", a, b))
    assert [s.limit_remaining for s in r.statuses] == [99, 1], (
        f"next: remaining {[s.limit_remaining for s in r.statuses]}, want [99, 1]"
    )
    # A limit of 0 refuses every request and charges none of the others.
    k5 = descriptor(("api_key", "py-k5"))
    r = c.ask(request("edge", k5, descriptor(("zero", "z"))))
    assert r.overall_code == OVER_LIMIT, f"zero: {short(r)}"
    assert [s.code for s in r.statuses] == [OK, OVER_LIMIT], f"zero: {short(r)}"
    assert r.statuses[0].limit_remaining == 100, f"zero: {short(r)}"
    assert limit_of(r.statuses[1]) == ("", 0, HOUR), f"zero: {limit_of(r.statuses[1])}"
    r = c.ask(request("edge", k5))
    assert r.statuses[0].limit_remaining == 99, f"after zero: {short(r)}"
    # A refused request is not counted either: the tenant's window still
    # holds its one hit, and the api key its 99.
    for _ in range(3):
        c.ask(request("edge", k5, descriptor(("tenant", "py-t3"))))
    r = c.ask(request("edge", k5))
    assert r.statuses[0].limit_remaining == 98, f"after refusals: {short(r)}"


def check_malformed_requests(c):
    same_window(3600, 10)
    cases = [
        ("empty domain", request("", descriptor(("remote_address", "py-m")))),
        ("no descriptors", request("edge")),
        ("a descriptor without entries", request("edge", descriptor())),
        ("a descriptor without entries after a good one",
         request("edge", descriptor(("api_key", "py-m1")), descriptor())),
        ("10 000 descriptors",
         request("edge", *[descriptor(("remote_address", "py-many"))] * 10_000)),
        ("10 000 distinct descriptors",
         request("edge", *[descriptor(("remote_address", f"py-many-{i}")) for i in range(10_000)])),
        ("an entry with empty key and value", request("edge", descriptor(("", "")))),
        ("a 64 KiB value", request("edge", descriptor(("remote_address", "v" * 65536)))),
        ("a value of separators", request("edge", descriptor(("remote_address", "|=%|=%\x00\u00e9")))),
        ("a limit override in unit 99",
         request("edge", descriptor(("remote_address", "py-m2"), limit=(1, 99)))),
        ("a limit override in unit 0 (UNKNOWN)",
         request("edge", descriptor(("remote_address", "py-m2"), limit=(1, 0)))),
        ("descriptor hits_addend 2**64-1",
         request("edge", descriptor(("api_key", "py-m3"), hits=U64_MAX))),
        ("descriptor hits_addend 2**64-1 with another",
         request("edge", descriptor(("api_key", "py-m4"), hits=U64_MAX),
                 descriptor(("remote_address", "py-m4")))),
        ("two descriptors on one counter",
         request("edge", descriptor(("api_key", "py-m5")), descriptor(("api_key", "py-m5")))),
    ]
    failures = []
    for what, req in cases:
        try:
            r = c.call(req)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                failures.append(f"{what}: {e.code()} {e.details()!r}, want INVALID_ARGUMENT or an answer")
            else:
                print(f"    {what}: INVALID_ARGUMENT {e.details()!r}")
            continue
        try:
            check_shape(req, r)
        except AssertionError as e:
            failures.append(f"{what}: {e}")
            continue
        print(f"    {what}: answered, overall_code {r.overall_code}")
    # A huge hits_addend: an answer, OVER_LIMIT, nothing charged.
    for what, d in [
        ("remote_address", descriptor(("remote_address", "py-huge"))),
        ("api_key", descriptor(("api_key", "py-k6"))),
    ]:
        try:
            r = c.ask(request("edge", d, hits_addend=U32_MAX))
        except AssertionError as e:
            failures.append(f"hits_addend 2**32-1 on {what}: {e}")
            continue
        s = r.statuses[0]
        if (r.overall_code, s.code, s.limit_remaining) != (OVER_LIMIT, OVER_LIMIT, 0):
            failures.append(f"hits_addend 2**32-1 on {what}: {short(r)}, want OVER_LIMIT, remaining 0")
    r = c.ask(request("edge", descriptor(("api_key", "py-k6"))))
    if r.statuses[0].limit_remaining != 99:
        failures.append(f"api_key after hits_addend 2**32-1: remaining {r.statuses[0].limit_remaining}, want 99")
    # More than the limit by a descriptor's own hits_addend.
    r = c.ask(request("edge", descriptor(("api_key", "py-k7"), hits=101)))
    if r.overall_code != OVER_LIMIT:
        failures.append(f"descriptor hits_addend 101 of 100: {short(r)}")
    # Exactly the limit.
    r = c.ask(request("edge", descriptor(("api_key", "py-k8"), hits=100)))
    if (r.overall_code, r.statuses[0].limit_remaining) != (OK, 0):
        failures.append(f"descriptor hits_addend 100 of 100: {short(r)}")
    # Still serving, with its counts.
    r = c.ask(request("edge", descriptor(("remote_address", "py-after"))))
    if r.statuses[0].limit_remaining != 49:
        failures.append(f"a normal request after: {short(r)}")
    assert not failures, "\n".join(failures)


def check_reset_is_the_windows_end(c):
    """duration_until_reset is "the duration until reset of the current
    limit window" (Envoy's rls.proto); for these fixed windows, aligned to
    the unit, the time left until the unit's end, whatever the counter
    holds (envoyproxy/ratelimit answers that on every status with a
    limit), and never 0: a client told 0 retries at once."""
    same_window(3600, 10)
    failures = []

    def expect(what, r, code, unit_s):
        s = r.statuses[0]
        reset = seconds(s.duration_until_reset)
        left = unit_s - (time.time() % unit_s)
        if s.code != code:
            failures.append(f"{what}: code {s.code}, want {code}")
        if not 0 < reset <= unit_s or abs(reset - left) > 2:
            failures.append(
                f"{what}: duration_until_reset {reset:.3f} s ({s.duration_until_reset.seconds} s,"
                f" {s.duration_until_reset.nanos} ns), want the window's end, {left:.3f} s away"
            )

    r = c.ask(request("edge", descriptor(("api_key", "py-r1"))))
    expect("a first hit, 100 an hour", r, OK, 3600)
    for _ in range(3):
        r = c.ask(request("edge", descriptor(("path", "/v1/py-r5/items"))))
    expect("the third hit of 2 an hour", r, OVER_LIMIT, 3600)
    r = c.ask(request("edge", descriptor(("api_key", "py-r2"), hits=101)))
    expect("descriptor hits_addend 101 of 100 an hour, on an empty counter", r, OVER_LIMIT, 3600)
    r = c.ask(request("edge", descriptor(("api_key", "py-r3")), hits_addend=U32_MAX))
    expect("hits_addend 2**32-1 of 100 an hour, on an empty counter", r, OVER_LIMIT, 3600)
    r = c.ask(request("edge", descriptor(("api_key", "py-r4"), hits=0)))
    expect("descriptor hits_addend 0 (a look), on an empty counter", r, OK, 3600)
    assert not failures, "\n".join(failures)


def check_quota_mode_and_dynamic_metadata(c):
    ask = lambda: request(  # noqa: E731
        "py_quota", descriptor(("service", "one")), descriptor(("service", "two"))
    )

    def merged(r):
        fields = r.dynamic_metadata.fields
        if "metadata" not in fields:
            return None
        meta = fields["metadata"].struct_value.fields
        service = meta["service"].struct_value.fields
        return (meta["owner"].string_value, sorted((k, v.string_value) for k, v in service.items()))

    r = c.ask(ask())
    assert (r.overall_code, [s.code for s in r.statuses]) == (OK, [OK, OK]), short(r)
    # Both passed: maps merged key by key, the first one's value kept.
    assert merged(r) == ("a", [("name", "one"), ("region", "eu")]), short(r)
    r = c.ask(ask())
    # `one` is spent; `two` admits the request: only its metadata.
    assert (r.overall_code, [s.code for s in r.statuses]) == (OK, [OVER_LIMIT, OK]), short(r)
    assert merged(r) == ("b", [("region", "eu")]), short(r)
    r = c.ask(ask())
    assert (r.overall_code, [s.code for s in r.statuses]) == (
        OVER_LIMIT,
        [OVER_LIMIT, OVER_LIMIT],
    ), short(r)
    assert merged(r) is None, short(r)


def check_health(c):
    check = c.channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=None,
        response_deserializer=None,
    )

    def health_request(service):
        name = service.encode()
        assert len(name) < 128
        return b"" if not name else b"\x0a" + bytes([len(name)]) + name

    SERVING = b"\x08\x01"
    for service in ("", "envoy.service.ratelimit.v3.RateLimitService"):
        got = check(health_request(service), timeout=TIMEOUT_S)
        assert got == SERVING, f"health of {service!r}: {got!r}, want {SERVING!r} (SERVING)"
    try:
        got = check(health_request("py.NoSuchService"), timeout=TIMEOUT_S)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.NOT_FOUND, f"unknown service: {e.code()}"
    else:
        raise AssertionError(f"unknown service: {got!r}, want NOT_FOUND")


METRIC = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(metrics_addr):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{metrics_addr}/metrics", timeout=TIMEOUT_S) as answer:
        assert answer.status == 200, f"/metrics: HTTP {answer.status}"
        text = answer.read().decode()
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = METRIC.match(line)
        assert m, f"/metrics: a line not in Prometheus' text format: {line!r}"
        samples.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return text, samples


def check_metrics(metrics_addr):
    text, samples = scrape(metrics_addr)

    def value(name, **labels):
        found = [v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items())]
        return sum(found) if found else None

    def at_least(name, want, **labels):
        got = value(name, **labels)
        assert got is not None, f"no {name} with {labels} in /metrics:\n{text}"
        assert got >= want, f"{name} {labels} = {got}, want at least {want}\n{text}"

    for name in ("floodgate_rls_total_hits", "floodgate_rls_over_limit", "floodgate_rls_within_limit"):
        at_least(name, 1, domain="edge")
    # /upload: 22 hits, 20 admitted, 2 refused (check_at_20_a_minute...).
    upload = {"domain": "edge", "key": "edge.path_/upload"}
    at_least("floodgate_rls_total_hits", 22, **upload)
    at_least("floodgate_rls_within_limit", 20, **upload)
    at_least("floodgate_rls_over_limit", 2, **upload)
    at_least("floodgate_rls_total_hits", 5, domain="edge", key="edge.remote_address")
    at_least("floodgate_rls_shadow_mode", 2, domain="edge", key="edge.shadowed")
    # An unknown domain has no limit, so nothing to count.
    assert value("floodgate_rls_total_hits", domain="py-nowhere") is None, "py-nowhere counted"


def main(argv):
    if len(argv) != 3:
        print(f"usage: {argv[0]} GRPC_ADDR METRICS_ADDR (host:port each)", file=sys.stderr)
        return 2
    if not __debug__:
        print("the checks are assert statements: run without -O", file=sys.stderr)
        return 2
    grpc_addr, metrics_addr = argv[1], argv[2]
    print(f"floodgate-rls at {grpc_addr}, metrics at {metrics_addr}; grpcio {grpc.__version__}")
    c = Client(grpc_addr)
    checks = [
        ("generated enums", lambda: check_generated_enums()),
        ("a key at 50 a second", lambda: check_a_key_at_50_a_second(c)),
        ("at 20 a minute the 21st hit is over", lambda: check_at_20_a_minute_the_21st_hit_is_over(c)),
        ("nested descriptors", lambda: check_nested_descriptors(c)),
        ("wildcards", lambda: check_wildcards(c)),
        ("unlimited", lambda: check_unlimited(c)),
        ("shadow_mode", lambda: check_shadow_mode(c)),
        ("replaces", lambda: check_replaces(c)),
        ("unknown domain and descriptor", lambda: check_unknown_domain_and_descriptor(c)),
        ("statuses in request order", lambda: check_statuses_in_request_order(c)),
        ("all or nothing", lambda: check_all_or_nothing(c)),
        ("malformed requests", lambda: check_malformed_requests(c)),
        ("duration_until_reset is the window's end", lambda: check_reset_is_the_windows_end(c)),
        ("quota_mode and dynamic metadata", lambda: check_quota_mode_and_dynamic_metadata(c)),
        ("health", lambda: check_health(c)),
        ("metrics", lambda: check_metrics(metrics_addr)),
    ]
    failed = []
    for name, run in checks:
        start = time.monotonic()
        try:
            run()
        except Exception as e:  # noqa: BLE001 - every failure is reported
            failed.append(name)
            print(f"FAIL {name}: {e}")
            if not isinstance(e, AssertionError):
                traceback.print_exc(file=sys.stdout)
        else:
            print(f"ok   {name} ({time.monotonic() - start:.2f} s)")
        sys.stdout.flush()
    c.channel.close()
    if failed:
        print(f"{len(failed)} of {len(checks)} checks FAILED: {', '.join(failed)}")
        return 1
    print(f"all {len(checks)} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
