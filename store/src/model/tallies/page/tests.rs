//! Paging by key: reading a report page by page, each page from only its places'
//! tallies, gives every row of the whole report once, in order, whatever the page
//! size, however many places have no row and whatever rows per place the first read
//! of a page assumes.

use proptest::prelude::*;

use super::*;
use crate::model::tallies::{Grain, Kind, Metric, Scope};

fn tally(campaign: u8, product: u8, bucket: i32, value: i64) -> SummedTally {
    SummedTally {
        place: Place {
            campaign_id: format!("c{campaign}").into(),
            scope: Scope::Product,
            grain: Grain::Day,
            bucket,
            creative: "cr".into(),
            catalog_id: "cat".into(),
            product_code: format!("p{product}").into(),
            partition: 0,
        },
        metric: Metric::Events(Kind::ProductImpression, None),
        value,
    }
}

/// A report's rows from tallies: one per place and bucket with a count, in place
/// then bucket order (as the reports make them).
fn rows(summed: &[SummedTally]) -> Vec<(PlaceKey, i32, i64)> {
    let mut out: Vec<(PlaceKey, i32, i64)> = summed
        .iter()
        .filter(|s| s.value > 0)
        .map(|s| (PlaceKey::of(&s.place), s.place.bucket, s.value))
        .collect();
    out.sort();
    out
}

/// Every row of `all` by pages of `size`, each read in rounds as the reports read
/// them ([`first_places`] for places of at most `per_place` rows, then
/// [`more_places`]).
fn paged(all: &[SummedTally], size: usize, per_place: usize) -> Vec<(PlaceKey, i32, i64)> {
    let mut seen = Vec::new();
    let mut cursor = PageCursor::default();
    for _ in 0..10_000 {
        let mut page = PlacePage {
            from: cursor.place.clone(),
            places: first_places(size, cursor.skip, per_place),
        };
        // What a store returns: the page's places' tallies, in any order.
        let mut summed = page.select(all.to_vec());
        let mut rounds = 1;
        while let Some(more) = more_places(
            size,
            cursor.skip,
            page.places,
            places_in(&summed),
            rows(&summed).len(),
        ) {
            assert!(
                more > page.places && more <= size + 1,
                "asks for more, up to a row's worth"
            );
            page.places = more;
            summed = page.select(all.to_vec());
            rounds += 1;
        }
        assert!(
            rounds <= 2 + size.ilog2() as usize,
            "{rounds} rounds for {size} rows"
        );
        summed.reverse();
        let read = PageRead::of(&summed, &page);
        let (got, next) = cut(rows(&summed), |r| r.0.clone(), &cursor, size, &read);
        assert!(got.len() <= size);
        seen.extend(got);
        match next {
            Some(c) => {
                assert!(
                    (c.place.clone(), c.skip) > (cursor.place.clone(), cursor.skip),
                    "a page moves on"
                );
                cursor = c;
            }
            None => return seen,
        }
    }
    panic!("paging did not end");
}

proptest! {
    #[test]
    fn pages_give_every_row_once(
        cells in proptest::collection::vec((0u8..4, 0u8..6, 0i32..5, 0i64..3), 0..80),
        size in 1usize..8,
        per_place in 1usize..10,
    ) {
        let all: Vec<SummedTally> = cells.iter().map(|&(c, p, b, v)| tally(c, p, b, v)).collect();
        prop_assert_eq!(paged(&all, size, per_place), rows(&all));
    }
}

#[test]
fn a_page_keeps_the_smallest_places_from_its_key() {
    let all: Vec<SummedTally> = (0..5).map(|p| tally(1, p, 0, 1)).collect();
    let page = PlacePage {
        from: PlaceKey::of(&all[1].place),
        places: 2,
    };
    let kept: Vec<String> = page
        .select(all.clone())
        .iter()
        .map(|s| s.place.product_code.to_string())
        .collect();
    assert_eq!(kept, ["p1", "p2"]);
    assert_eq!(places_in(&all), 5);
    let none = PlacePage {
        from: PlaceKey {
            campaign_id: "c9".into(),
            ..PlaceKey::default()
        },
        places: 2,
    };
    assert!(none.select(all).is_empty());
}
