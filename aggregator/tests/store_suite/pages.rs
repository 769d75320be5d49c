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
