#!/usr/bin/env python3
"""Attributes `perf script` samples of the edge to components (stdin: perf script
output with call graphs). A sample goes to the innermost frame that names a
component, except that allocator frames anywhere near the leaf count as allocation
and the log's writer thread counts as the log. Prints shares of all samples."""
import re
import sys
from collections import Counter

# (component, pattern on a frame's symbol), innermost match wins; order breaks ties.
RULES = [
    ("alloc/free", r"(^|[^a-z])(je_|_rjem_|jemalloc|malloc|free|sdallocx|mallocx|realloc|__rust_alloc|__rust_dealloc|__rdl_)"),
    ("dedup key (hash)", r"DedupKey.*::of|canonical_form|click_key|xxh3"),
    ("dedup window", r"dedup::DedupWindow|ingest::dedup"),
    ("classification", r"traffic::of|agent::classify|regex|aho_corasick|memchr"),
    ("ad id verify", r"ad_id::|hmac|sha2|Sha256|base64"),
    ("parse/validate", r"parse_beacon|validate::|percent::|query::|rm_schemas::event|chrono::format::parse|DateTime.*parse"),
    ("record encoding", r"EventRecord|serde_json|serde::ser|to_rfc3339|chrono::format|record::"),
    ("uuid/clock", r"uuid::|Uuid|clock_gettime|vdso|Utc::now|SystemTime"),
    ("metrics", r"metrics::|metrics_exporter|metrics_util|AtomicBucket|EdgeMetrics"),
    ("inspector", r"inspector::|samples_query|params_of"),
    ("log append (edge side)", r"rm_eventlog|oneshot|sync_channel|mpmc|mpsc"),
    ("wake-ups/scheduling", r"futex|try_to_wake_up|schedule|__switch_to|finish_task_switch|park|unpark|epoll|tokio::runtime::scheduler|tokio::runtime::park|Notify|tokio::sync|wake|idle"),
    ("HTTP (hyper + kernel TCP)", r"hyper|http::|httparse|tcp_|sock_|skb|sys_writev|sys_read|sys_recv|sys_send|sys_write|ip_|__dev_queue|loopback|net_rx|netif|do_softirq|copy_user|_copy_to_iter|_copy_from_iter|TokioIo|tokio::net|tokio::io|rm_service|HeaderMap|bytes::"),
    ("edge handler (other)", r"rm_ingest::edge"),
]
COMPILED = [(name, re.compile(p)) for name, p in RULES]


def classify(thread, frames):
    if thread.startswith("eventlog-w"):
        return "log writer thread"
    if thread.startswith("eventlog-r"):
        return "log retention thread"
    if thread.startswith("rdk:"):
        return "librdkafka threads (produce, batch, network)"
    # Allocator frames within the innermost four.
    for f in frames[:4]:
        if COMPILED[0][1].search(f):
            return "alloc/free"
    for f in frames:
        for name, rx in COMPILED[1:]:
            if rx.search(f):
                return name
    return "other"


def main():
    counts = Counter()
    total = 0
    thread, frames = None, []

    def flush():
        nonlocal total
        if thread is not None:
            counts[classify(thread, frames)] += 1
            total += 1

    for line in sys.stdin:
        if not line.strip():
            flush()
            thread, frames = None, []
            continue
        if not line.startswith((" ", "\t")):
            thread = line.split()[0]
            frames = []
        else:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                frames.append(re.sub(r"\+0x[0-9a-f]+ .*$|\s\(.*\)$", "", parts[1]))
    flush()
    print(f"| component | share of edge CPU samples ({total}) |")
    print("|---|---:|")
    for name, n in counts.most_common():
        print(f"| {name} | {100 * n / max(total, 1):.1f} % |")


main()
