//! The carts report read by key (`cart_lines`, `rm_store::model::carts::lines`): after
//! a stream folded in batches cut anywhere, through crashes and replays (the rollups'
//! [`super::rollups`] ingestion), where shoppers' lines move between campaigns and
//! days as later events arrive, the store's lines are exactly those of the stream
//! folded at once, at their latest event's place (none left behind at a place it
//! moved from), whole and page by page, for every campaign, a tenant, a day and an ad.

use rm_aggregator::batch::{fold_at, Policy};
use rm_store::model::carts::lines::{self, CartLine, LinePlace};
use rm_store::model::carts::CartStateRow;
use rm_store::{EntitySets, ReportFilter, Tenant};

use super::{all, Store};

/// The lines of the stream of `seed` (minted again) folded in one batch from an empty
/// store.
fn folded(seed: u64) -> Vec<CartLine> {
    let (records, positions) = super::rollups::stream(seed);
    let mut sets = EntitySets::default();
    let w = fold_at(&records, Some(&positions), &mut sets, &Policy::default()).0;
    lines::lines(&w.cart_rows)
}

/// Every page of `size` lines of the report with filter `f`.
pub(crate) async fn by_pages(
    store: &impl Store,
    f: &ReportFilter,
    size: usize,
) -> Vec<CartStateRow> {
    let mut rows = Vec::new();
    let mut from: Option<LinePlace> = None;
    for _ in 0..10_000 {
        let (page, next) = rm_store::sums::cart_page(store, f, from.as_ref(), Some(size))
            .await
            .expect("a page");
        assert!(page.len() <= size, "a page of {size} lines at most");
        rows.extend(page);
        match next {
            Some(p) => from = Some(p),
            None => return rows,
        }
    }
    panic!("the pages did not end");
}

/// A line with its ad id cut to what a stream of the same seed mints alike (each
/// minting draws a fresh nonce): campaign, creative and expiry.
fn minted_alike(l: &CartLine) -> CartLine {
    let cut: Vec<&str> = l.ad_id.split('.').take(4).collect();
    CartLine {
        ad_id: cut.join("."),
        ..l.clone()
    }
}

/// Checks the store's carts report against the stream of `seed` folded at once;
/// returns a transcript.
pub(crate) async fn as_folded(store: &impl Store, seed: u64) -> Vec<String> {
    let folded: Vec<CartLine> = folded(seed).iter().map(minted_alike).collect();
    assert!(
        folded.len() > 2,
        "the stream makes cart lines: {}",
        folded.len()
    );
    let want = store
        .cart_lines(&all(), None, usize::MAX)
        .await
        .expect("lines");
    let got: Vec<CartLine> = want.iter().map(minted_alike).collect();
    assert_eq!(got, folded, "seed {seed}: the store's lines");
    let first = &want[0];
    let mut filters = vec![
        all(),
        ReportFilter {
            from_day: Some(first.place.day),
            to_day: Some(first.place.day),
            ..all()
        },
        ReportFilter {
            ad_id: Some(first.ad_id.clone()),
            ..all()
        },
        ReportFilter {
            tenant: Some(Tenant {
                namespace: "t".into(),
                campaigns: std::sync::Arc::new([first.place.campaign_id.clone()].into()),
            }),
            ..all()
        },
    ];
    let campaigns: std::collections::BTreeSet<&str> =
        want.iter().map(|l| l.place.campaign_id.as_str()).collect();
    filters.extend(campaigns.iter().map(|c| ReportFilter {
        campaign_id: Some((*c).to_owned()),
        ..all()
    }));
    for f in &filters {
        let whole: Vec<CartStateRow> = lines::page(want.clone(), f, None, usize::MAX)
            .iter()
            .map(CartLine::state)
            .collect();
        assert!(!whole.is_empty(), "seed {seed}: lines for {f:?}");
        assert_eq!(store.carts(f).await.expect("carts"), whole, "{f:?}");
        for size in [1, 3, 1_000] {
            assert_eq!(by_pages(store, f, size).await, whole, "{f:?} by {size}");
        }
    }
    got.iter().map(|l| format!("{l:?}")).collect()
}
