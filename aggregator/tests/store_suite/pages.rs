//! Pages by key (`rm_store::sums::*_page`): read a page at a time from only its
//! places' tallies, the products, ads and video funnel reports give every row of the
//! whole report once and in order, for any page size, in UTC days and in a zone cut
//! by quarter hours, on every backend (and on ClickHouse with closed days compacted).

use rm_store::model::periods::{self, Granularity, Periods};
use rm_store::model::tallies::page::PageCursor;
use rm_store::sums::{self, Page, PageAt};
use rm_store::StoreError;

use super::{all, Store};

/// Reads every page of size `size` with `read` (a cursor and a size to a page);
/// fails when a page is over size or the pages do not end.
pub(crate) async fn by_pages<R, F, Fut>(size: usize, read: F) -> Vec<R>
where
    F: Fn(PageCursor) -> Fut,
    Fut: std::future::Future<Output = Result<Page<R>, StoreError>>,
{
    let mut rows = Vec::new();
    let mut cursor = PageCursor::default();
    for _ in 0..100_000 {
        let page = read(cursor.clone()).await.expect("a page");
        assert!(page.rows.len() <= size, "a page of {size} rows at most");
        rows.extend(page.rows);
        match page.next {
            Some(next) => cursor = next,
            None => return rows,
        }
    }
    panic!("the pages did not end");
}

/// Checks the three reports by pages of several sizes over days `from..=to`.
pub(crate) async fn read_by_pages_as_whole(store: &impl Store, from: i32, to: i32) {
    let f = &all();
    let utc = Periods::utc_days(from, to);
    let kolkata = Periods::new(
        periods::zone("Asia/Kolkata").expect("zone"),
        Granularity::Week,
        from,
        to,
    );
    for periods in [&utc, &kolkata] {
        let products = sums::product_report(store, f, periods)
            .await
            .expect("products");
        let ads = sums::ad_report(store, f, periods).await.expect("ads");
        let funnel = sums::funnel_report(store, f, periods)
            .await
            .expect("funnel");
        assert!(
            products.len() + ads.len() + funnel.len() > 2,
            "rows to page through"
        );
        for size in [1, 2, 7, 1_000] {
            let paged = by_pages(size, |cursor| async move {
                let at = PageAt {
                    cursor: &cursor,
                    size,
                };
                sums::product_page(store, f, periods, Some(at)).await
            })
            .await;
            assert_eq!(paged, products, "products by pages of {size}");
            let paged = by_pages(size, |cursor| async move {
                let at = PageAt {
                    cursor: &cursor,
                    size,
                };
                sums::ad_page(store, f, periods, Some(at)).await
            })
            .await;
            assert_eq!(paged, ads, "ads by pages of {size}");
            let paged = by_pages(size, |cursor| async move {
                let at = PageAt {
                    cursor: &cursor,
                    size,
                };
                sums::funnel_page(store, f, periods, Some(at)).await
            })
            .await;
            assert_eq!(paged, funnel, "the funnel by pages of {size}");
        }
    }
}

/// An amount column's value in units of 10^-8 (`None`: not an amount).
fn amount(s: &str) -> Option<i128> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole.trim_start_matches('-'))
        || !(frac.is_empty() || digits(frac))
        || frac.len() > 8
    {
        return None;
    }
    let n: i128 = format!("{}{frac:0<8}", whole.trim_start_matches('-'))
        .parse()
        .ok()?;
    Some(if whole.starts_with('-') { -n } else { n })
}

/// The counts and amounts of report rows (but the columns named in `skip`) summed
/// per row key (the other string columns but the period's `day` and `periodStart`):
/// what any cut of the same range into periods must add up to.
fn totals<R: serde::Serialize>(
    rows: &[R],
    skip: &[&str],
) -> std::collections::BTreeMap<String, i128> {
    let mut out = std::collections::BTreeMap::new();
    for r in rows {
        let v = serde_json::to_value(r).expect("a row");
        let obj = v.as_object().expect("an object");
        let key: Vec<String> = obj
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "day" | "periodStart" | "adIdStatus"))
            .filter_map(|(k, v)| {
                v.as_str()
                    .filter(|s| amount(s).is_none())
                    .map(|s| format!("{k}={s}"))
            })
            .collect();
        for (k, v) in obj {
            let n = v
                .as_u64()
                .map(i128::from)
                .or_else(|| v.as_str().and_then(amount));
            if let Some(n) = n.filter(|_| !skip.contains(&k.as_str())) {
                *out.entry(format!("{} {k}", key.join(","))).or_default() += n;
            }
        }
    }
    out.retain(|_, n| *n != 0);
    out
}

/// The video funnel and the campaign summary over days `from..=to` with a day to
/// spare at each end (so every event of those days is inside in any zone): by hour
/// and by day in Asia/Kolkata (whole UTC days, the UTC hours that leave them and the
/// quarters that leave those), by week in Asia/Kathmandu (+05:45), by hour in UTC
/// (UTC hours), and over the whole range in Pacific/Kiritimati, add up to the same
/// counts as the whole range in UTC (UTC days).
pub(crate) async fn zones_add_up_to_utc(store: &impl Store, from: i32, to: i32) {
    let f = &all();
    let (from, to) = (from - 1, to + 1);
    assert!(to - from < 31, "an hourly report's range");
    let at =
        |zone: &str, g: Granularity| Periods::new(periods::zone(zone).expect("zone"), g, from, to);
    // Each with the offset its periods are labelled with.
    let cuts = [
        (at("Asia/Kolkata", Granularity::Hour), "+05:30"),
        (at("Asia/Kolkata", Granularity::Day), "+05:30"),
        (at("Pacific/Kiritimati", Granularity::Summary), "+14:00"),
        (at("Asia/Kathmandu", Granularity::Week), "+05:45"),
        (at("UTC", Granularity::Hour), "Z"),
    ];
    let utc = at("UTC", Granularity::Summary);
    // A funnel row's `impressions` are its creative's in its period: shown only
    // beside a period's views, they add up to the range's only where views do.
    let skip = ["impressions"];
    let funnel = totals(
        &sums::funnel_report(store, f, &utc).await.expect("funnel"),
        &skip,
    );
    let summary = totals(
        &sums::campaign_summary(store, f, &utc, |_| None)
            .await
            .expect("campaign summary"),
        &[],
    );
    assert!(
        !funnel.is_empty() && summary.len() > 4,
        "counts to compare: {funnel:?} {summary:?}"
    );
    for (periods, offset) in &cuts {
        let got = sums::funnel_report(store, f, periods)
            .await
            .expect("funnel in a zone");
        assert_eq!(totals(&got, &skip), funnel, "the funnel by {periods:?}");
        let got = sums::campaign_summary(store, f, periods, |_| None)
            .await
            .expect("campaign summary in a zone");
        // A row per campaign, period and currency, each labelled by its period.
        let mut keys: Vec<(&str, &str, rm_schemas::money::Currency)> = got
            .iter()
            .map(|r| (r.campaign_id.as_str(), r.period_start.as_str(), r.currency))
            .collect();
        keys.dedup();
        assert_eq!(keys.len(), got.len(), "{periods:?}: a row per period");
        assert!(
            got.iter()
                .all(|r| r.period_start.ends_with(offset) && r.period_start.starts_with(&r.day)),
            "{periods:?}: labelled by their periods"
        );
        assert_eq!(
            totals(&got, &[]),
            summary,
            "the campaign summary by {periods:?}"
        );
    }
}
