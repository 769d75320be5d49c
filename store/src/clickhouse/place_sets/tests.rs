//! The place conditions cover every place asked for, bind one value per `?`, and
//! stay within the bytes of a query.

use super::*;
use crate::model::tallies::{Grain, Scope};
use proptest::prelude::*;

fn place(
    scope: Scope,
    grain: Grain,
    bucket: i32,
    campaign: &str,
    product: &str,
    partition: i32,
) -> Place {
    Place {
        campaign_id: campaign.into(),
        scope,
        grain,
        bucket,
        creative: if scope == Scope::Campaign { "" } else { "cr" }.into(),
        catalog_id: if scope == Scope::Product { "cat" } else { "" }.into(),
        product_code: product.into(),
        partition,
    }
}

/// Whether a chunk's group of the place's scope and grain holds each of its values.
fn covered(chunk: &BTreeMap<(u8, u8), Columns<'_>>, p: &Place) -> bool {
    chunk.get(&(p.scope as u8, p.grain as u8)).is_some_and(|c| {
        c.buckets.contains(&p.bucket)
            && c.campaigns.contains(p.campaign_id.as_str())
            && c.creatives.contains(p.creative.as_str())
            && c.catalogs.contains(p.catalog_id.as_str())
            && c.products.contains(p.product_code.as_str())
            && c.partitions.contains(&p.partition)
    })
}

fn any_place() -> impl Strategy<Value = Place> {
    (
        prop::sample::select(vec![
            Scope::Campaign,
            Scope::Creative,
            Scope::Product,
            Scope::Video,
        ]),
        prop::sample::select(Grain::ALL.to_vec()),
        0..50i32,
        0..30usize,
        0..3000usize,
        -1..4i32,
    )
        .prop_map(|(s, g, b, c, p, part)| {
            place(
                s,
                g,
                20_000 + b,
                &format!("campaign-{c}"),
                &format!("product-{p:05}"),
                part,
            )
        })
}

proptest! {
    #[test]
    fn every_place_is_selected_by_a_condition(places in prop::collection::vec(any_place(), 0..4000)) {
        let chunks = chunks(&places);
        for p in &places {
            prop_assert!(chunks.iter().any(|c| covered(c, p)), "{p:?} not selected");
        }
        prop_assert_eq!(chunks.is_empty(), places.is_empty());
        for c in conditions(&places) {
            prop_assert_eq!(c.clause().matches('?').count(), c.args.len());
        }
    }
}

#[test]
fn many_distinct_products_split_into_queries_of_bounded_size() {
    let places: Vec<Place> = (0..40_000)
        .map(|i| {
            place(
                Scope::Product,
                Grain::Quarter,
                1,
                "c",
                &format!("a-product-code-{i:08}"),
                0,
            )
        })
        .collect();
    let conds = conditions(&places);
    assert!(conds.len() > 1, "one query of 40,000 products");
    for c in &conds {
        let bytes: usize = c
            .args
            .iter()
            .map(|a| match a {
                Arg::Str(s) => s.len() + 8,
                Arg::Int(_) => 12,
            })
            .sum();
        assert!(
            bytes <= KEY_BYTES_PER_QUERY + 200,
            "{bytes} bytes in a query"
        );
    }
}

#[test]
fn a_batch_of_recent_places_is_one_short_query() {
    // 21 campaigns, 200 products, the quarter hours of one hour, 4 partitions.
    let mut places = Vec::new();
    for c in 0..21 {
        for p in 0..200 {
            for q in 0..4 {
                for part in 0..4 {
                    let c = format!("campaign-{c}");
                    places.push(place(
                        Scope::Product,
                        Grain::Quarter,
                        1_000 + q,
                        &c,
                        &format!("p{p}"),
                        part,
                    ));
                }
            }
        }
    }
    let conds = conditions(&places);
    assert_eq!(conds.len(), 1);
    // 4 buckets, 21 campaigns, a creative, a catalog, 200 products, 4 partitions.
    assert_eq!(conds[0].args.len(), 4 + 21 + 1 + 1 + 200 + 4);
}
