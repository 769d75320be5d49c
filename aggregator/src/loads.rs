//! What each batch's fold needed of what a store may hold, and where it was found:
//! in the loop's cache, nowhere (what no store can hold yet is not looked up:
//! [`crate::fresh_ads`]) or by a look-up in the store. Counted by kind in
//! [`crate::pipeline::Progress`] and in `aggregator_loads_total{kind,found}`, so an
//! operator sees what the loop's round trips to the store are spent on (the `cache`
//! share falling after a rebalance, the `nowhere` share of a live store) and a test
//! sees the bound at work.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a fold needs from the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Served ads' states (by ad id).
    ServedAds = 0,
    /// Video views' facts (by ad id and video).
    Views = 1,
    /// Cart lines' facts (by shopper, catalog and product).
    Carts = 2,
    /// Orders' states (by order id).
    Orders = 3,
    /// Tallies' places (the partitions' progress among them, always read).
    Tallies = 4,
}

impl Need {
    /// Every kind, in label order.
    pub const ALL: [Need; 5] = [
        Need::ServedAds,
        Need::Views,
        Need::Carts,
        Need::Orders,
        Need::Tallies,
    ];

    /// The metric's `kind` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Need::ServedAds => "served_ads",
            Need::Views => "views",
            Need::Carts => "carts",
            Need::Orders => "orders",
            Need::Tallies => "tallies",
        }
    }
}

/// Where a fold found what it needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// In the loop's cache.
    Cache = 0,
    /// Nowhere, not looked up: no store can hold it yet (`crate::fresh_ads`).
    Nowhere = 1,
    /// By a look-up in the store (found there or not).
    Store = 2,
}

impl Found {
    /// Every place, in label order.
    pub const ALL: [Found; 3] = [Found::Cache, Found::Nowhere, Found::Store];

    /// The metric's `found` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Found::Cache => "cache",
            Found::Nowhere => "nowhere",
            Found::Store => "store",
        }
    }
}

/// One batch's counts, by kind and where found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts([[u64; 3]; 5]);

impl Counts {
    /// Counts `n` things of `kind` found at `found`.
    pub fn add(&mut self, kind: Need, found: Found, n: usize) {
        self.0[kind as usize][found as usize] += n as u64;
    }

    /// The count of `kind` found at `found`.
    pub fn get(&self, kind: Need, found: Found) -> u64 {
        self.0[kind as usize][found as usize]
    }

    /// The things of `kind` in `wanted` to look up in the store: counts each where
    /// `found` places it, and keeps those it places in the store.
    pub fn to_look_up<'a, K: Clone + 'a, C: FromIterator<K>>(
        &mut self,
        kind: Need,
        wanted: impl IntoIterator<Item = &'a K>,
        mut found: impl FnMut(&K) -> Found,
    ) -> C {
        wanted
            .into_iter()
            .filter(|k| {
                let f = found(k);
                self.add(kind, f, 1);
                f == Found::Store
            })
            .cloned()
            .collect()
    }

    /// Every kind and place found with its count (zeros too), in label order.
    pub fn each(&self) -> impl Iterator<Item = (Need, Found, u64)> + '_ {
        Need::ALL
            .into_iter()
            .flat_map(move |n| Found::ALL.into_iter().map(move |f| (n, f, self.get(n, f))))
    }
}

/// Counts since the loop started, shared with whoever watches it.
#[derive(Debug, Default)]
pub struct Totals([[AtomicU64; 3]; 5]);

impl Totals {
    /// Adds a batch's counts.
    pub fn add(&self, counts: &Counts) {
        for (kind, found, n) in counts.each().filter(|c| c.2 > 0) {
            self.0[kind as usize][found as usize].fetch_add(n, Ordering::AcqRel);
        }
    }

    /// The count of `kind` found at `found` since the loop started.
    pub fn get(&self, kind: Need, found: Found) -> u64 {
        self.0[kind as usize][found as usize].load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_by_kind_and_place_found_and_totals_sum_batches() {
        let mut a = Counts::default();
        a.add(Need::ServedAds, Found::Cache, 3);
        a.add(Need::ServedAds, Found::Nowhere, 5);
        a.add(Need::ServedAds, Found::Store, 7);
        a.add(Need::Tallies, Found::Store, 2);
        let mut b = Counts::default();
        // Each key counted where it was found; those for the store kept.
        let missing: Vec<u32> = b.to_look_up(Need::ServedAds, &[1, 2], |k| match k {
            1 => Found::Cache,
            _ => Found::Store,
        });
        assert_eq!(missing, vec![2]);
        let totals = Totals::default();
        totals.add(&a);
        totals.add(&b);
        assert_eq!(totals.get(Need::ServedAds, Found::Cache), 4);
        assert_eq!(totals.get(Need::ServedAds, Found::Nowhere), 5);
        assert_eq!(totals.get(Need::ServedAds, Found::Store), 8);
        assert_eq!(totals.get(Need::Tallies, Found::Store), 2);
        assert_eq!(totals.get(Need::Views, Found::Cache), 0);
        // Each label pair is its own series.
        let labels: std::collections::HashSet<_> = Need::ALL
            .iter()
            .flat_map(|k| Found::ALL.iter().map(move |o| (k.as_str(), o.as_str())))
            .collect();
        assert_eq!(labels.len(), 15);
    }
}
