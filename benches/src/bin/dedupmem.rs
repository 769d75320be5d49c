//! Memory of the edge's dedup window: fills `rm_ingest::dedup::DedupWindow` with
//! `--keys` distinct keys (2M, the default `RM_DEDUP_MAX_KEYS`) and reports the
//! resident memory it added (`/proc/self/statm`) per key held, next to the window's
//! own count of its table bytes. The same is measured for the layout it replaced
//! (two `std` hash maps of `(u64, u64)` to a state per shard, rotated the same way),
//! rebuilt here as it was. Each layout is measured in a process of its own (the
//! bench runs itself once per layout), so that neither reuses the other's freed
//! memory.
//!
//! `cargo run --release -p rm-benches --bin dedupmem` (`--keys 2000000 --shards 32`;
//! `--max-keys` is the window's bound, default 2M, as `retail-media ingest` sets it).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

use clap::Parser;
use rm_ingest::dedup::DedupWindow;

/// The allocator `retail-media` itself uses (see `src/main.rs`).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Settings.
#[derive(Debug, Parser)]
struct Args {
    /// Distinct keys inserted.
    #[arg(long, default_value_t = 2_000_000)]
    keys: u64,
    /// The window's bound on keys (`RM_DEDUP_MAX_KEYS`).
    #[arg(long, default_value_t = 2_000_000)]
    max_keys: usize,
    /// Shards (the edge uses 16 per core, rounded up to a power of two: 32 on 2 cores).
    #[arg(long, default_value_t = 32)]
    shards: usize,
    /// Measure one layout in this process (`old` or `new`); without it, the bench
    /// runs itself once per layout.
    #[arg(long)]
    layout: Option<String>,
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn keys(n: u64) -> impl Iterator<Item = u128> {
    let mut x = 0x9E37_79B9_7F4A_7C15_u128;
    (0..n).map(move |i| {
        x = x
            .wrapping_mul(0x2545_F491_4F6C_DD1D_2545_F491_4F6C_DD1D)
            .wrapping_add(u128::from(i));
        x ^ (x >> 61)
    })
}

/// The layout before issue 17: per shard two maps of `(u64, u64)` to a state.
#[derive(Default)]
struct XorHasher(u64);
impl Hasher for XorHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}
type OldMap = HashMap<(u64, u64), u8, BuildHasherDefault<XorHasher>>;
struct OldWindow {
    shards: Vec<(OldMap, OldMap)>,
    cap: usize,
}
impl OldWindow {
    fn new(max_keys: usize, shards: usize) -> Self {
        Self {
            shards: (0..shards).map(|_| Default::default()).collect(),
            cap: (max_keys / shards / 2).max(1),
        }
    }
    fn check(&mut self, key: u128) {
        let n = self.shards.len();
        let (cur, prev) = &mut self.shards[(key >> 116) as usize & (n - 1)];
        if cur.len() >= self.cap {
            *prev = std::mem::take(cur);
        }
        let k = ((key >> 64) as u64, key as u64);
        if !cur.contains_key(&k) && !prev.contains_key(&k) {
            cur.insert(k, 0);
        }
    }
    fn len(&self) -> usize {
        self.shards.iter().map(|(c, p)| c.len() + p.len()).sum()
    }
}

fn main() {
    let args = Args::parse();
    let shards = args.shards.next_power_of_two();
    let Some(layout) = args.layout.as_deref() else {
        println!(
            "| layout | keys inserted | keys held | RSS added (MiB) | RSS bytes / key | table bytes / key | ns / insert |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for layout in ["old", "new"] {
            let me = std::env::current_exe().expect("own path");
            let status = std::process::Command::new(me)
                .args(std::env::args().skip(1))
                .args(["--layout", layout])
                .status()
                .expect("runs");
            assert!(status.success());
        }
        return;
    };
    if layout == "old" {
        let before = rss_bytes();
        let started = Instant::now();
        let mut w = OldWindow::new(args.max_keys, shards);
        for k in keys(args.keys) {
            w.check(k);
        }
        let ns = started.elapsed().as_nanos() as f64 / args.keys as f64;
        let added = rss_bytes().saturating_sub(before);
        let held = w.len();
        println!(
            "| two hash maps of (u64, u64) per shard (before) | {} | {held} | {:.1} | {:.1} | - | {ns:.0} |",
            args.keys,
            added as f64 / 1048576.0,
            added as f64 / held as f64,
        );
        drop(w);
    } else {
        let before = rss_bytes();
        let started = Instant::now();
        let w = DedupWindow::new(u64::MAX / 4, args.max_keys, shards);
        for k in keys(args.keys) {
            w.check(k, 0);
        }
        let ns = started.elapsed().as_nanos() as f64 / args.keys as f64;
        let added = rss_bytes().saturating_sub(before);
        let held = w.len();
        println!(
            "| flat u128 tables (DedupWindow) | {} | {held} | {:.1} | {:.1} | {:.1} | {ns:.0} |",
            args.keys,
            added as f64 / 1048576.0,
            added as f64 / held as f64,
            w.memory_bytes() as f64 / held as f64,
        );
    }
}
