//! Property test of decisioning: on random small catalogs, campaign sets and
//! requests, `AdsIndex::decide` (with its category pruning) decides exactly what a
//! plain reference does by testing every product of every campaign in rank order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::Utc;
use proptest::prelude::*;

use super::index::{AdsIndex, ProductIndex};
use super::request::{passes, Decided, FilterMode};
use crate::model::campaign::{
    ApprovalState, BannerXCampaign, CampaignState, CampaignType, CatalogFilter, ProductKey,
};
use crate::model::catalog::Product;

const LEAVES: [&str; 4] = ["x/y", "x/z", "w/y/q", "w/v"];
const PATHS: [&str; 8] = ["x", "x/y", "x/z", "w", "w/y", "w/y/q", "w/v", "nope"];

fn product(i: usize, cats: &[usize]) -> Product {
    Product {
        catalog_id: "k".into(),
        product_code: format!("p{i}"),
        categories: cats.iter().map(|&c| LEAVES[c].to_owned()).collect(),
        ..Default::default()
    }
}

#[derive(Debug, Clone)]
struct Spec {
    bid: u8,
    banner: bool,
    wildcard: bool,
    products: Vec<usize>,
    include: Option<usize>,
    exclude: Option<usize>,
    placement: usize,
}

fn campaign(j: usize, s: &Spec) -> BannerXCampaign {
    let mut c = BannerXCampaign {
        id: format!("c{j}"),
        campaign_state: CampaignState::Active,
        catalog_ids: vec!["k".into()],
        placement_id: ["category", "search", ""][s.placement].into(),
        ..Default::default()
    };
    c.approval.state = ApprovalState::Approved;
    c.settings.campaign_type = if s.banner {
        CampaignType::BannerX
    } else {
        CampaignType::SponsoredProducts
    };
    c.settings.is_wildcard = s.wildcard;
    c.strategy.auction.max_bid = format!("${}.00", s.bid);
    c.advertised_products.products_by_key = s
        .products
        .iter()
        .map(|p| ProductKey {
            catalog_id: "k".into(),
            product_code: format!("p{p}"),
            seller_id: String::new(),
        })
        .collect();
    let filter = |p: usize| CatalogFilter {
        catalog_id: "k".into(),
        filter: format!("category:{}", PATHS[p]),
    };
    c.targeting.include_filters = s.include.map(filter).into_iter().collect();
    c.targeting.exclude_filters = s.exclude.map(filter).into_iter().collect();
    c
}

type Decision = (Vec<(String, String)>, Vec<String>);

/// Every product of every eligible campaign, tested in rank order.
fn reference(products: &[Product], specs: &[Spec], req: &Decided) -> Decision {
    let mut order: Vec<usize> = (0..specs.len()).collect();
    order.sort_by(|&a, &b| {
        specs[b]
            .bid
            .cmp(&specs[a].bid)
            .then(format!("c{a}").cmp(&format!("c{b}")))
    });
    let order: Vec<usize> = order
        .into_iter()
        .filter(|&j| {
            [req.placement.as_str(), ""].contains(&["category", "search", ""][specs[j].placement])
        })
        .collect();
    let by_code: HashMap<String, usize> = products
        .iter()
        .enumerate()
        .map(|(i, p)| (p.product_code.clone(), i))
        .collect();
    let candidates = |s: &Spec| -> Vec<usize> {
        if s.wildcard {
            return (0..products.len()).collect();
        }
        let mut seen = HashSet::new();
        s.products
            .iter()
            .filter_map(|p| by_code.get(&format!("p{p}")).copied())
            .filter(|i| seen.insert(*i))
            .collect()
    };
    let ok = |s: &Spec, i: usize| {
        let p = &products[i];
        s.include.is_none_or(|f| p.in_category(PATHS[f]))
            && !s.exclude.is_some_and(|f| p.in_category(PATHS[f]))
            && passes(&req.filters, req.mode, |path| p.in_category(path))
    };
    let (sp, bx): (Vec<usize>, Vec<usize>) = order.into_iter().partition(|&j| !specs[j].banner);
    let mut taken = HashSet::new();
    let mut ads = Vec::new();
    let mut exhausted = vec![false; sp.len()];
    while ads.len() < req.max_ads && exhausted.iter().any(|x| !x) {
        for (k, &j) in sp.iter().enumerate() {
            if ads.len() >= req.max_ads {
                break;
            }
            if exhausted[k] {
                continue;
            }
            match candidates(&specs[j])
                .into_iter()
                .find(|&i| !taken.contains(&i) && ok(&specs[j], i))
            {
                Some(i) => {
                    taken.insert(i);
                    ads.push((format!("c{j}"), products[i].product_code.clone()));
                }
                None => exhausted[k] = true,
            }
        }
    }
    let banners = bx
        .into_iter()
        .filter(|&j| candidates(&specs[j]).into_iter().any(|i| ok(&specs[j], i)))
        .take(req.max_ads)
        .map(|j| format!("c{j}"))
        .collect();
    (ads, banners)
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        1u8..4,
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::collection::vec(0usize..14, 0..5),
        prop::option::weighted(0.3, 0usize..8),
        prop::option::weighted(0.2, 0usize..8),
        0usize..3,
    )
        .prop_map(
            |(bid, banner, wildcard, products, include, exclude, placement)| Spec {
                bid,
                banner,
                wildcard,
                products,
                include,
                exclude,
                placement,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn pruned_decisions_equal_the_reference(
        cats in prop::collection::vec(prop::collection::vec(0usize..4, 1..3), 1..12),
        specs in prop::collection::vec(spec(), 0..10),
        filters in prop::collection::vec(prop::collection::vec(0usize..8, 1..4), 0..4),
        and_or in any::<bool>(),
        max_ads in 1usize..6,
    ) {
        let products: Vec<Product> = cats.iter().enumerate().map(|(i, c)| product(i, c)).collect();
        let campaigns: Vec<BannerXCampaign> = specs.iter().enumerate().map(|(j, s)| campaign(j, s)).collect();
        let ix = AdsIndex::build(Arc::new(ProductIndex::build(products.clone())), &campaigns, &HashMap::new(), Utc::now());
        let req = Decided {
            tracking_param: "sessionId",
            tracking_id: "s".into(),
            placement: "category".into(),
            catalog_id: "k".into(),
            filters: filters.iter().map(|g| g.iter().map(|&p| PATHS[p].to_owned()).collect()).collect(),
            mode: if and_or { FilterMode::AndOr } else { FilterMode::OrAnd },
            max_ads,
        };
        let (ads, banners) = ix.decide(&req);
        let got: Decision = (
            ads.iter().map(|a| (a.campaign.id.clone(), a.product.product_code.clone())).collect(),
            banners.iter().map(|b| b.campaign.id.clone()).collect(),
        );
        prop_assert_eq!(got, reference(&products, &specs, &req));
    }
}
