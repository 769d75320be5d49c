#!/usr/bin/env python3
"""Byte-for-byte report comparison of two builds of `retail-media` on the same data.

A refactoring that must not change behaviour (a moved crate, a split store) is checked
here end to end: the OLD binary runs `retail-media all` on a fresh data directory
(and, with --clickhouse, a fresh ClickHouse database), takes a deterministic stream of
beacons (video views with milestones, seeks and control toggles, product impressions
and clicks, creative clicks, carts, ad impressions and clicks on ad ids the api
served, plus forged and foreign ids) and orders, and aggregates them; every report
route is then read in JSON and CSV under a sweep of filters. The OLD binary stops,
the NEW one starts on the same state, and the same requests must give the same
bytes. It prints one line per difference and a summary; the exit code is 0 only
when every answer is identical.

    deploy/local/compare_reports.py OLD_BIN NEW_BIN [--clickhouse URL] [--sessions N]

Only loopback ports are used (18080-18082 by default).
"""

import argparse
import base64
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone

REPORTS = [
    "/v1/reports/video-funnel",
    "/v1/reports/products",
    "/v1/reports/ads",
    "/v1/reports/campaigns",
    "/v1/reports/carts",
    "/v1/reports/carts/campaigns",
    "/v1/reports/sales",
]
MILESTONES = ["videoCreativeView", "videoPlay", "videoFirstQuartile", "videoMidpoint",
              "videoThirdQuartile", "videoComplete"]
CONTROLS = ["videoPause", "videoResume", "videoMute", "videoUnmute", "videoSkip"]
PRODUCTS = ["cola-1l", "chips-salt", "water-500ml", "choc-bar"]
# A fixed key, so both binaries verify the same ad ids (base64url, 32 bytes).
AD_ID_KEY = base64.urlsafe_b64encode(b"compare-reports-fixed-ad-id-key!").decode().rstrip("=")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A click answers 302 to the advertiser's page: report it, never follow it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def http(method, url, body=None, headers=None, auth=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with _OPENER.open(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Service:
    """`retail-media all` on loopback, started and stopped by this script."""

    def __init__(self, binary, data_dir, env, ports):
        self.edge = f"http://127.0.0.1:{ports[0]}"
        self.api = f"http://127.0.0.1:{ports[1]}"
        full = dict(os.environ, **env, RM_DATA_DIR=data_dir,
                    RM_INGEST_ADDR=f"127.0.0.1:{ports[0]}",
                    RM_API_ADDR=f"127.0.0.1:{ports[1]}",
                    RM_AGGREGATOR_ADDR=f"127.0.0.1:{ports[2]}",
                    RM_AD_ID_KEYS=AD_ID_KEY, RM_API_DEMO="true", RM_LOG="warn")
        for port in ports:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    sys.exit(f"port {port} is already in use: stop what listens there")
        self.log = open(os.path.join(data_dir, f"{os.path.basename(binary)}.log"), "ab")
        self.proc = subprocess.Popen([binary, "all"], env=full, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"{binary} exited with {self.proc.returncode} (log in {data_dir})")
            try:
                if http("GET", self.api + "/readyz")[0] == 200 and \
                        http("GET", self.edge + "/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        sys.exit(f"{binary} not ready in 60 s")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def token(self):
        status, body = http("POST", self.api + "/v1/oauth2/token",
                            b"grant_type=client_credentials",
                            {"Content-Type": "application/x-www-form-urlencoded"},
                            ("demo-client", "demo-secret"))
        assert status == 200, body
        return json.loads(body)["access_token"]


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def served_once(svc, token, attempt):
    """Ad ids, impression and click URLs of the ads served to three placements (new
    sessions each time: a session is not served the same ads twice)."""
    ads = []
    for placement in ["category", "search", "home"]:
        session = f"s-gen-{attempt}-{placement}"
        body = json.dumps({"sessionId": session, "placement": placement,
                           "catalogId": "demo-catalog", "maxNumberOfAds": 5}).encode()
        status, out = http("POST", svc.api + "/v1/ads/generate", body,
                           {"Authorization": f"Bearer {token}",
                            "content-type": "application/json"})
        assert status == 200, out
        for group in json.loads(out).values():
            if isinstance(group, list):
                ads += [a for a in group if isinstance(a, dict) and "partnerAdId" in a]
    return ads


def served_ads(svc, token):
    """Served ads, once the api's ads index has been built (the same number twice)."""
    last = -1
    for attempt in range(60):
        ads = served_once(svc, token, attempt)
        if ads and len(ads) == last:
            return ads
        last = len(ads)
        time.sleep(1)
    sys.exit("the demo data served no ads")


def traffic(svc, ads, sessions, rng):
    """Fires the deterministic beacon stream; returns the shoppers' customer ids."""
    now = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=1)
    ad_ids = [a["partnerAdId"] for a in ads]
    forged = ad_ids[0][:-4] + "AAAA"
    pool = ad_ids + [forged, "rm1.camp-foreign.x", "plain-ad-1"]
    customers = []
    sent = 0

    def beacon(params):
        nonlocal sent
        q = urllib.parse.urlencode(params)
        status, body = http("GET", svc.edge + "/v1/events/ad/interaction?" + q)
        assert status == 200, (status, body, q)
        sent += 1

    for i in range(sessions):
        ad = rng.choice(pool)
        day = now - timedelta(days=rng.choice([0, 0, 1]))
        t = day - timedelta(minutes=rng.randrange(600))
        sid = f"s-{i}"
        cid = f"c-{i % (sessions // 3 + 1)}"
        customers.append(cid)
        ids = {"sessionId": sid} if i % 4 else {"sessionId": sid, "customerId": cid}
        video = f"v-{rng.randrange(3)}"
        watched = rng.choice([1, 2, 3, 4, 6, 6])
        for k, m in enumerate(MILESTONES[:watched]):
            beacon({"adId": ad, "interactionType": m, "timestamp": iso(t + timedelta(seconds=5 * k)),
                    "videoId": video, **ids})
            if rng.random() < 0.2:  # a re-fire: counts once
                beacon({"adId": ad, "interactionType": m,
                        "timestamp": iso(t + timedelta(seconds=5 * k)), "videoId": video, **ids})
        for k in range(rng.randrange(4)):  # toggles, some rapid
            c = rng.choice(CONTROLS[:4])
            beacon({"adId": ad, "interactionType": c,
                    "timestamp": iso(t + timedelta(milliseconds=rng.choice([200, 800, 1500, 4000]) * (k + 1))),
                    "videoId": video, **ids})
        for p in rng.sample(PRODUCTS, rng.randrange(1, 4)):
            pt = t + timedelta(seconds=40 + rng.randrange(30))
            beacon({"adId": ad, "interactionType": "productImpression", "timestamp": iso(pt),
                    "productCode": p, "catalogId": "demo-catalog", **ids})
            if rng.random() < 0.4:
                beacon({"adId": ad, "interactionType": "productClick",
                        "timestamp": iso(pt + timedelta(seconds=2)),
                        "productCode": p, "catalogId": "demo-catalog", **ids})
            if rng.random() < 0.3:
                for n, units in enumerate(rng.choice([[1], [1, 2, 3, 0], [2, 1]])):
                    params = {"adId": ad, "interactionType": "cart",
                              "timestamp": iso(pt + timedelta(seconds=10 + n)),
                              "productCode": p, "catalogId": "demo-catalog",
                              "units": str(units), **ids}
                    if rng.random() < 0.5:
                        params["conversionValue"] = f"{1.29 * max(units, 1):.2f}"
                    beacon(params)
        if rng.random() < 0.2:
            beacon({"adId": ad, "interactionType": "creativeClick",
                    "timestamp": iso(t + timedelta(seconds=90)), "creativeId": "cr-1", **ids})
        served = [a for a in ads if a["partnerAdId"] == ad]
        if served:  # the edge's impression and click URLs
            for url in (served[0]["impressionUrl"], served[0]["clickUrl"]):
                if rng.random() < 0.7:
                    parts = urllib.parse.urlsplit(url)
                    params = dict(urllib.parse.parse_qsl(parts.query))
                    params.update(ids, timestamp=iso(t))
                    u = svc.edge + parts.path + "?" + urllib.parse.urlencode(params)
                    status, body = http("GET", u)
                    assert status in (200, 302), (status, body, u)
                    sent += 1
    return sorted(set(customers)), sent, now


def orders(svc, customers, now, rng):
    lines = []
    for n, cid in enumerate(customers[: max(1, len(customers) // 2)]):
        items = [{"productCode": p, "quantity": rng.randrange(1, 4),
                  "totalOrderItemPriceAfterDiscounts": round(rng.uniform(1, 9), 2)}
                 for p in rng.sample(PRODUCTS, rng.randrange(1, 3))]
        lines.append({"id": f"o-{n}", "customerId": cid,
                      "orderDate": iso(now + timedelta(minutes=30)),
                      "catalogId": "demo-catalog", "orderItems": items})
    status, body = http("POST", svc.api + "/v1/orders", json.dumps({"orders": lines}).encode(),
                        {"content-type": "application/json"}, ("demo-orders-key", ""))
    assert status in (200, 201, 202), (status, body)


def queries(now):
    today = now.strftime("%Y-%m-%d")
    yesterday = (now - timedelta(days=1)).strftime("%Y-%m-%d")
    filters = [{}, {"campaignId": "demo-video"}, {"campaignId": "demo-products"},
               {"campaignId": "camp-foreign"}, {"from": today}, {"to": yesterday},
               {"from": yesterday, "to": today}, {"catalogId": "demo-catalog"},
               {"campaignId": "demo-video", "from": today}]
    for route in REPORTS:
        for f in filters:
            for fmt in ("json", "csv"):
                yield route + "?" + urllib.parse.urlencode({**f, "format": fmt})


def read_all(svc, now):
    token = svc.token()
    out = {}
    for q in queries(now):
        out[q] = http("GET", svc.api + q, headers={"Authorization": f"Bearer {token}"})
    return out


def settled(svc, now):
    """Waits until the reports stop changing (the aggregator has caught up)."""
    last, same = None, 0
    for _ in range(120):
        cur = read_all(svc, now)
        same = same + 1 if cur == last else 0
        if same >= 2:
            return cur
        last = cur
        time.sleep(1)
    sys.exit("reports never settled")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--clickhouse", help="ClickHouse HTTP URL (default: the embedded store)")
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--port", type=int, default=18080)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    ports = (a.port, a.port + 1, a.port + 2)
    env = {}
    if a.clickhouse:
        env = {"RM_CLICKHOUSE_URL": a.clickhouse,
               "RM_CLICKHOUSE_DATABASE": f"rm_compare_{os.getpid()}"}
    with tempfile.TemporaryDirectory(prefix="rm-compare-") as data:
        svc = Service(a.old, data, env, ports)
        try:
            token = svc.token()
            ads = served_ads(svc, token)
            customers, sent, now = traffic(svc, ads, a.sessions, rng)
            orders(svc, customers, now, rng)
            before = settled(svc, now)
        finally:
            svc.stop()
        svc = Service(a.new, data, env, ports)
        try:
            after = settled(svc, now)
        finally:
            svc.stop()
    if a.clickhouse:
        http("POST", a.clickhouse + "/", f"DROP DATABASE IF EXISTS {env['RM_CLICKHOUSE_DATABASE']}".encode())
    diffs = [q for q in before if before[q] != after[q]]
    for q in diffs:
        print(f"DIFFERENT {q}: {before[q][0]} {len(before[q][1])} B -> "
              f"{after[q][0]} {len(after[q][1])} B")
    for route in REPORTS:
        mine = [(q, before[q]) for q in before if q.startswith(route + "?")]
        csv_rows = sum(max(b.count(b"\n") - 1, 0) for q, (s, b) in mine
                       if s == 200 and "format=csv" in q)
        codes = sorted({s for _, (s, _) in mine})
        print(f"  {route}: {len(mine)} answers, statuses {codes}, "
              f"{sum(len(b) for _, (_, b) in mine)} bytes, {csv_rows} CSV rows")
    rows = sum(b.count(b"\n") for s, b in before.values() if s == 200)
    total = sum(len(b) for _, b in before.values())
    backend = "ClickHouse" if a.clickhouse else "embedded"
    print(f"{backend}: {sent} beacons, {len(ads)} served ads; {len(before)} report answers "
          f"({total} bytes, {rows} CSV/JSON lines): {len(before) - len(diffs)} identical, "
          f"{len(diffs)} different")
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
