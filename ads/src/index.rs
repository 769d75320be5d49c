//! Ad decisioning over an in-memory index of the catalog and the campaigns. Pure: it
//! is built from values and answers from them, no I/O.
//!
//! Eligible campaigns are `CAMPAIGN_STATE_ACTIVE` and `APPROVAL_STATE_APPROVED`,
//! inside `startTime..endTime` (and `settings.fromTime..toTime` when set), list the
//! request's catalog, serve its placement (an empty `placementId` serves all), and
//! have spend left under both limits. Spend is cost per click: billable clicks times
//! the auction's `maxBid` (see `crate::spend`), exact, in the campaign's currency, as
//! its limits are (`BannerXCampaign::currency`).
//!
//! Ranking is by `strategy.auction.maxBid`, highest first, ties by campaign id. Bids
//! are compared by amount: the campaigns of one catalog are one retailer's, in its
//! currency. Walking
//! campaigns in that order, each sponsored-products campaign contributes its best
//! product that passes the request's filters and the campaign's include/exclude
//! filters and was not taken by a higher bid (no product twice); banner X campaigns
//! contribute one banner each when any of their advertised products (or, for a
//! wildcard campaign, any product of the catalog) passes. The walk stops when
//! `maxNumberOfAds` of each kind are found, so a typical request touches few
//! campaigns. A wildcard campaign looks at products through a category index, at most
//! [`MAX_SCAN`] per request, so no request is unbounded.
//!
//! With filters, campaigns whose products cannot pass them are skipped up front
//! through a category coverage index ([`super::candidates`]), so a request with
//! filters costs in proportion to the campaigns advertising in its categories, not
//! to every campaign of the catalog.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::candidates::{Coverage, PassingPool};
use super::request::Decided;
use crate::model::campaign::{ApprovalState, BannerXCampaign, CampaignState, CampaignType};
use crate::model::catalog::Product;
use rm_schemas::money::Decimal;

/// Most products a wildcard campaign looks at per request.
pub const MAX_SCAN: usize = 10_000;

/// The products of one catalog, with a category index.
#[derive(Debug, Default)]
pub struct CatalogProducts {
    /// Products by index.
    pub products: Vec<Product>,
    by_code: HashMap<String, u32>,
    /// Every category path prefix to the products in it or below.
    by_category: HashMap<String, Vec<u32>>,
    /// Every category path prefix to its id (for [`Coverage`]).
    category_ids: HashMap<String, u32>,
    /// Product `i`'s category prefix ids are `prefix_ids[prefix_at[i]..prefix_at[i + 1]]`,
    /// so filters are checked by id, without comparing paths.
    prefix_ids: Vec<u32>,
    prefix_at: Vec<u32>,
}

impl CatalogProducts {
    fn add(&mut self, p: Product) {
        let idx = self.products.len() as u32;
        if self.prefix_at.is_empty() {
            self.prefix_at.push(0);
        }
        for c in &p.categories {
            let mut end = 0;
            for part in c.split('/') {
                end += part.len();
                let prefix = &c[..end];
                let id = match self.category_ids.get(prefix) {
                    Some(&id) => id,
                    None => {
                        let id = self.category_ids.len() as u32;
                        self.category_ids.insert(prefix.to_owned(), id);
                        id
                    }
                };
                self.prefix_ids.push(id);
                let list = self.by_category.entry(prefix.to_owned()).or_default();
                if list.last() != Some(&idx) {
                    list.push(idx);
                }
                end += 1;
            }
        }
        self.prefix_at.push(self.prefix_ids.len() as u32);
        self.by_code.insert(p.product_code.clone(), idx);
        self.products.push(p);
    }

    /// Whether product `idx` is in category `id` or below it (`None`: a path no
    /// product is in).
    fn has(&self, idx: u32, id: Option<u32>) -> bool {
        let (from, to) = (
            self.prefix_at[idx as usize] as usize,
            self.prefix_at[idx as usize + 1] as usize,
        );
        id.is_some_and(|id| self.prefix_ids[from..to].contains(&id))
    }

    fn in_category(&self, idx: u32, path: &str) -> bool {
        self.products[idx as usize].in_category(path)
    }

    /// The ids of every category prefix the products are in.
    fn category_ids_of(&self, idxs: &[u32]) -> Vec<u32> {
        let mut ids = Vec::new();
        for &i in idxs {
            for c in &self.products[i as usize].categories {
                let mut end = 0;
                for part in c.split('/') {
                    end += part.len();
                    ids.extend(self.category_ids.get(&c[..end]).copied());
                    end += 1;
                }
            }
        }
        ids
    }
}

/// Products of every catalog.
#[derive(Debug, Default)]
pub struct ProductIndex {
    /// Per catalog id.
    pub catalogs: HashMap<String, CatalogProducts>,
}

/// The index key of catalog `catalog` of namespace `ns` (catalog ids are unique
/// within a namespace; an empty `ns` is `default`'s).
pub fn catalog_key(ns: &str, catalog: &str) -> String {
    let ns = if ns.is_empty() {
        rm_schemas::namespace::DEFAULT
    } else {
        ns
    };
    rm_schemas::namespace::scoped(ns, catalog)
}

impl ProductIndex {
    /// Indexes `products`, per namespace and catalog.
    pub fn build(products: impl IntoIterator<Item = Product>) -> ProductIndex {
        let mut ix = ProductIndex::default();
        for p in products {
            let key = catalog_key(&p.namespace_id, &p.catalog_id);
            ix.catalogs.entry(key).or_default().add(p);
        }
        ix
    }

    /// How many products.
    pub fn len(&self) -> usize {
        self.catalogs.values().map(|c| c.products.len()).sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A campaign's spend so far, exact, in the campaign's currency.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spend {
    /// Spent today (UTC).
    pub today: Decimal,
    /// Spent in all.
    pub total: Decimal,
}

#[derive(Debug)]
struct Entry {
    campaign: Arc<BannerXCampaign>,
    bid: Decimal,
    /// Advertised products in this catalog; `None` for a wildcard campaign.
    products: Option<Vec<u32>>,
    include: Vec<String>,
    /// `include` and `exclude` as category ids of the catalog.
    include_ids: Vec<Option<u32>>,
    exclude_ids: Vec<Option<u32>>,
}

/// The campaigns eligible in one catalog, in rank order.
#[derive(Debug, Default)]
struct CatalogCampaigns {
    product_ads: Vec<Entry>,
    banners: Vec<Entry>,
    product_cover: Coverage,
    banner_cover: Coverage,
}

/// The decisioning index: products and the campaigns eligible at build time.
#[derive(Debug)]
pub struct AdsIndex {
    products: Arc<ProductIndex>,
    catalogs: HashMap<String, CatalogCampaigns>,
    /// When the campaign part was built.
    pub built_at: DateTime<Utc>,
}

/// A chosen product ad.
#[derive(Debug, Clone, PartialEq)]
pub struct ProductPick {
    /// The campaign.
    pub campaign: Arc<BannerXCampaign>,
    /// The product.
    pub product: Product,
}

/// A chosen banner.
#[derive(Debug, Clone, PartialEq)]
pub struct BannerPick {
    /// The campaign.
    pub campaign: Arc<BannerXCampaign>,
}

fn filters_of(c: &BannerXCampaign, catalog: &str, include: bool) -> Vec<String> {
    let list = if include {
        &c.targeting.include_filters
    } else {
        &c.targeting.exclude_filters
    };
    list.iter()
        .filter(|f| f.catalog_id.is_empty() || f.catalog_id == catalog)
        .filter_map(|f| f.filter.strip_prefix("category:"))
        .map(|p| p.trim_matches('/').to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Category ids of `paths` in `products` (`None` for a path no product is in).
fn ids_of(products: Option<&CatalogProducts>, paths: &[String]) -> Vec<Option<u32>> {
    paths
        .iter()
        .map(|p| products.and_then(|cp| cp.category_ids.get(p).copied()))
        .collect()
}

/// `request::passes` over category ids.
fn passes_ids(
    groups: &[Vec<Option<u32>>],
    mode: super::request::FilterMode,
    has: impl Fn(Option<u32>) -> bool,
) -> bool {
    use super::request::FilterMode;
    if groups.is_empty() {
        return true;
    }
    match mode {
        FilterMode::OrAnd => groups.iter().any(|g| g.iter().all(|&c| has(c))),
        FilterMode::AndOr => groups.iter().all(|g| g.iter().any(|&c| has(c))),
    }
}

/// Whether `c` may serve at `now` with `spend`, ignoring catalog and placement.
pub fn serving(c: &BannerXCampaign, now: DateTime<Utc>, spend: Spend) -> bool {
    let in_window = |from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>| {
        from.is_none_or(|f| now >= f) && to.is_none_or(|t| now <= t)
    };
    let (daily, total) = c.spend_limits();
    c.campaign_state == CampaignState::Active
        && c.approval.state == ApprovalState::Approved
        && in_window(c.start_time, c.end_time)
        && in_window(c.settings.from_time, c.settings.to_time)
        && daily.is_none_or(|l| spend.today < l.amount)
        && total.is_none_or(|l| spend.total < l.amount)
}

impl AdsIndex {
    /// Builds the campaign part over `products` for campaigns serving at `now`.
    pub fn build(
        products: Arc<ProductIndex>,
        campaigns: &[BannerXCampaign],
        spend: &HashMap<String, Spend>,
        now: DateTime<Utc>,
    ) -> AdsIndex {
        let mut catalogs: HashMap<String, CatalogCampaigns> = HashMap::new();
        for c in campaigns {
            if !serving(c, now, spend.get(&c.id).copied().unwrap_or_default()) {
                continue;
            }
            let c = Arc::new(c.clone());
            let bid = c.max_bid().map_or(Decimal::ZERO, |b| b.amount);
            for catalog in &c.catalog_ids {
                // A campaign decides only over its own namespace's catalogs.
                let key = catalog_key(&c.namespace_id, catalog);
                let cat_products = products.catalogs.get(&key);
                let advertised = (!c.settings.is_wildcard).then(|| {
                    let mut v: Vec<u32> = c
                        .advertised_products
                        .products_by_key
                        .iter()
                        .filter(|k| k.catalog_id == *catalog)
                        .filter_map(|k| {
                            cat_products.and_then(|cp| cp.by_code.get(&k.product_code).copied())
                        })
                        .collect();
                    let mut seen = HashSet::new();
                    v.retain(|i| seen.insert(*i));
                    v
                });
                let entry = Entry {
                    campaign: Arc::clone(&c),
                    bid,
                    products: advertised,
                    include_ids: ids_of(cat_products, &filters_of(&c, catalog, true)),
                    exclude_ids: ids_of(cat_products, &filters_of(&c, catalog, false)),
                    include: filters_of(&c, catalog, true),
                };
                let slot = catalogs.entry(key).or_default();
                match c.settings.campaign_type {
                    CampaignType::SponsoredProducts => slot.product_ads.push(entry),
                    CampaignType::BannerX => slot.banners.push(entry),
                }
            }
        }
        for (catalog, slot) in catalogs.iter_mut() {
            let rank = |a: &Entry, b: &Entry| {
                b.bid
                    .cmp(&a.bid)
                    .then_with(|| a.campaign.id.cmp(&b.campaign.id))
            };
            slot.product_ads.sort_by(rank);
            slot.banners.sort_by(rank);
            let cover = |entries: &[Entry]| {
                Coverage::build(entries.iter().map(|e| {
                    e.products.as_ref().map(|ps| {
                        products
                            .catalogs
                            .get(catalog)
                            .map_or_else(Vec::new, |cp| cp.category_ids_of(ps))
                    })
                }))
            };
            slot.product_cover = cover(&slot.product_ads);
            slot.banner_cover = cover(&slot.banners);
        }
        AdsIndex {
            products,
            catalogs,
            built_at: now,
        }
    }

    /// Campaigns indexed (per catalog, counted once per catalog).
    pub fn campaign_entries(&self) -> usize {
        self.catalogs
            .values()
            .map(|c| c.product_ads.len() + c.banners.len())
            .sum()
    }

    /// The product `code` of `catalog` of namespace `ns`.
    pub fn product(&self, ns: &str, catalog: &str, code: &str) -> Option<&Product> {
        let c = self.products.catalogs.get(&catalog_key(ns, catalog))?;
        c.by_code.get(code).map(|&i| &c.products[i as usize])
    }

    /// The products index.
    pub fn products(&self) -> &Arc<ProductIndex> {
        &self.products
    }

    /// Decides the ads for a request in the `default` namespace ([`Self::decide_in`]).
    pub fn decide(&self, req: &Decided) -> (Vec<ProductPick>, Vec<BannerPick>) {
        self.decide_in(rm_schemas::namespace::DEFAULT, req)
    }

    /// Decides the ads for a request of namespace `ns`: only its campaigns, over its
    /// catalog of the request's id.
    pub fn decide_in(&self, ns: &str, req: &Decided) -> (Vec<ProductPick>, Vec<BannerPick>) {
        let key = catalog_key(ns, &req.catalog_id);
        let (Some(slot), Some(cat)) = (self.catalogs.get(&key), self.products.catalogs.get(&key))
        else {
            return (Vec::new(), Vec::new());
        };
        let placement_ok =
            |c: &BannerXCampaign| c.placement_id.is_empty() || c.placement_id == req.placement;
        // Campaigns that may have a passing product (`None`: no filters, all may), and
        // for wildcard campaigns the passing products, computed once.
        let groups: Vec<Vec<Option<u32>>> = req
            .filters
            .iter()
            .map(|g| g.iter().map(|p| cat.category_ids.get(p).copied()).collect())
            .collect();
        let ok = |e: &Entry, idx: u32| {
            (e.include_ids.is_empty() || e.include_ids.iter().any(|&c| cat.has(idx, c)))
                && !e.exclude_ids.iter().any(|&c| cat.has(idx, c))
                && passes_ids(&groups, req.mode, |c| cat.has(idx, c))
        };
        let product_candidates = slot.product_cover.candidates(&groups, req.mode);
        let banner_candidates = slot.banner_cover.candidates(&groups, req.mode);
        let wildcard_pool = std::cell::RefCell::new(None::<PassingPool>);
        let pool = |i: usize| {
            wildcard_pool
                .borrow_mut()
                .get_or_insert_with(|| {
                    PassingPool::new(
                        &req.filters,
                        req.mode,
                        |p| cat.by_category.get(p).map(Vec::as_slice),
                        MAX_SCAN,
                    )
                })
                .get(i, &req.filters, req.mode, |idx, p| cat.in_category(idx, p))
        };
        let may = |c: &Option<Vec<bool>>, i: usize| c.as_ref().is_none_or(|m| m[i]);
        let mut taken: HashSet<u32> = HashSet::new();
        let mut ads = Vec::new();
        // Rounds over the campaigns in rank order: each round gives every campaign
        // its next best product, so the highest bid leads and no campaign crowds
        // out the others.
        let mut exhausted = vec![false; slot.product_ads.len()];
        while ads.len() < req.max_ads && exhausted.iter().any(|x| !x) {
            for (i, e) in slot.product_ads.iter().enumerate() {
                if ads.len() >= req.max_ads {
                    break;
                }
                if exhausted[i] {
                    continue;
                }
                if !placement_ok(&e.campaign) || !may(&product_candidates, i) {
                    exhausted[i] = true;
                    continue;
                }
                match self.first_match(e, cat, req, pool, |idx| !taken.contains(&idx) && ok(e, idx))
                {
                    Some(idx) => {
                        taken.insert(idx);
                        ads.push(ProductPick {
                            campaign: Arc::clone(&e.campaign),
                            product: cat.products[idx as usize].clone(),
                        });
                    }
                    None => exhausted[i] = true,
                }
            }
        }
        let mut banners = Vec::new();
        for (i, e) in slot.banners.iter().enumerate() {
            if banners.len() >= req.max_ads {
                break;
            }
            if placement_ok(&e.campaign)
                && may(&banner_candidates, i)
                && self
                    .first_match(e, cat, req, pool, |idx| ok(e, idx))
                    .is_some()
            {
                banners.push(BannerPick {
                    campaign: Arc::clone(&e.campaign),
                });
            }
        }
        (ads, banners)
    }

    fn first_match(
        &self,
        e: &Entry,
        cat: &CatalogProducts,
        req: &Decided,
        pool: impl Fn(usize) -> Option<u32>,
        accept: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        match &e.products {
            Some(list) => list.iter().copied().find(|&i| accept(i)),
            // Wildcard with filters: the request's passing products.
            None if !req.filters.is_empty() => (0..).map_while(pool).find(|&i| accept(i)),
            None => {
                // Wildcard without filters: its one include category when it has
                // exactly one, else the catalog. Both capped.
                match e.include.as_slice() {
                    [p] => cat
                        .by_category
                        .get(p.as_str())?
                        .iter()
                        .copied()
                        .take(MAX_SCAN)
                        .find(|&i| accept(i)),
                    _ => (0..cat.products.len() as u32)
                        .take(MAX_SCAN)
                        .find(|&i| accept(i)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::campaign::ProductKey;
    use crate::request::FilterMode;

    fn product(code: &str, cat: &str) -> Product {
        Product {
            catalog_id: "k".into(),
            product_code: code.into(),
            categories: vec![cat.into()],
            ..Default::default()
        }
    }

    fn campaign(id: &str, bid: &str, kind: CampaignType, products: &[&str]) -> BannerXCampaign {
        let mut c = BannerXCampaign {
            id: id.into(),
            campaign_state: CampaignState::Active,
            catalog_ids: vec!["k".into()],
            placement_id: "category".into(),
            ..Default::default()
        };
        c.approval.state = ApprovalState::Approved;
        c.settings.campaign_type = kind;
        c.strategy.auction.max_bid = bid.into();
        c.advertised_products.products_by_key = products
            .iter()
            .map(|p| ProductKey {
                catalog_id: "k".into(),
                product_code: (*p).into(),
                seller_id: String::new(),
            })
            .collect();
        c
    }

    fn req(filters: &[&[&str]], mode: FilterMode, max: usize) -> Decided {
        Decided {
            tracking_param: "sessionId",
            tracking_id: "s".into(),
            placement: "category".into(),
            catalog_id: "k".into(),
            filters: filters
                .iter()
                .map(|g| g.iter().map(|s| (*s).to_owned()).collect())
                .collect(),
            mode,
            max_ads: max,
        }
    }

    fn index(campaigns: &[BannerXCampaign], spend: &HashMap<String, Spend>) -> AdsIndex {
        let products = Arc::new(ProductIndex::build([
            product("crisps", "food/snacks/crisps"),
            product("dip", "food/snacks/dips"),
            product("cola", "drinks/soft/cola"),
        ]));
        AdsIndex::build(products, campaigns, spend, Utc::now())
    }

    #[test]
    fn ranks_by_bid_and_never_repeats_a_product() {
        let ix = index(
            &[
                campaign(
                    "low",
                    "$1.00",
                    CampaignType::SponsoredProducts,
                    &["crisps", "dip"],
                ),
                campaign(
                    "high",
                    "$2.00",
                    CampaignType::SponsoredProducts,
                    &["crisps"],
                ),
                campaign("banner", "$3.00", CampaignType::BannerX, &["cola"]),
            ],
            &HashMap::new(),
        );
        let (ads, banners) = ix.decide(&req(&[], FilterMode::OrAnd, 10));
        let got: Vec<(&str, &str)> = ads
            .iter()
            .map(|a| (a.campaign.id.as_str(), a.product.product_code.as_str()))
            .collect();
        assert_eq!(got, vec![("high", "crisps"), ("low", "dip")]);
        let two = index(
            &[campaign(
                "one",
                "$1.00",
                CampaignType::SponsoredProducts,
                &["crisps", "dip", "cola"],
            )],
            &HashMap::new(),
        );
        assert_eq!(
            two.decide(&req(&[], FilterMode::OrAnd, 2)).0.len(),
            2,
            "a campaign fills free slots"
        );
        assert_eq!(banners.len(), 1);
        let (ads, _) = ix.decide(&req(&[], FilterMode::OrAnd, 1));
        assert_eq!(ads.len(), 1);
    }

    #[test]
    fn filters_choose_products_by_category_subtree() {
        let ix = index(
            &[
                campaign(
                    "a",
                    "$1.00",
                    CampaignType::SponsoredProducts,
                    &["crisps", "dip"],
                ),
                campaign("b", "$1.50", CampaignType::BannerX, &["cola"]),
            ],
            &HashMap::new(),
        );
        let (ads, banners) = ix.decide(&req(&[&["food/snacks/dips"]], FilterMode::OrAnd, 10));
        assert_eq!(ads[0].product.product_code, "dip");
        assert!(banners.is_empty(), "the banner's cola is not a dip");
        let (ads, _) = ix.decide(&req(&[&["food"], &["drinks"]], FilterMode::AndOr, 10));
        assert!(ads.is_empty(), "AndOr: nothing is both food and drinks");
        let (ads, banners) = ix.decide(&req(&[&["food"], &["drinks"]], FilterMode::OrAnd, 10));
        assert_eq!(ads.len(), 2, "crisps and dip are food");
        assert_eq!(banners.len(), 1);
    }

    #[test]
    fn ineligible_campaigns_never_serve() {
        let mut paused = campaign("p", "$9", CampaignType::SponsoredProducts, &["crisps"]);
        paused.campaign_state = CampaignState::Paused;
        let mut pending = campaign("q", "$9", CampaignType::SponsoredProducts, &["crisps"]);
        pending.approval.state = ApprovalState::Pending;
        let mut over = campaign("o", "$9", CampaignType::SponsoredProducts, &["crisps"]);
        over.strategy.auction.spend_limit.daily = "$10".into();
        let mut ended = campaign("e", "$9", CampaignType::SponsoredProducts, &["crisps"]);
        ended.end_time = Some(Utc::now() - chrono::Duration::days(1));
        let mut elsewhere = campaign("x", "$9", CampaignType::SponsoredProducts, &["crisps"]);
        elsewhere.placement_id = "search".into();
        let spend = HashMap::from([(
            "o".to_owned(),
            Spend {
                today: Decimal::TEN,
                total: Decimal::TEN,
            },
        )]);
        let ix = index(&[paused, pending, over, ended, elsewhere], &spend);
        let (ads, _) = ix.decide(&req(&[], FilterMode::OrAnd, 10));
        assert!(ads.is_empty(), "{ads:?}");
    }

    #[test]
    fn spend_limits_compare_exact_spend() {
        // 3 clicks x $0.70 is $2.10 exactly (in f64, 2.0999999999999996: under the
        // limit, and the campaign would serve on).
        let mut c = campaign("o", "$0.70", CampaignType::SponsoredProducts, &["crisps"]);
        c.strategy.auction.spend_limit.daily = "$2.10".into();
        let bid = c.max_bid().expect("bid");
        let spend = |n: u64| Spend {
            today: bid.times(n).expect("fits").amount,
            total: bid.times(n).expect("fits").amount,
        };
        assert!(serving(&c, Utc::now(), spend(2)));
        assert!(!serving(&c, Utc::now(), spend(3)), "at the limit");
        assert_eq!(spend(3).today.to_string(), "2.10");
    }

    #[test]
    fn wildcard_campaigns_find_products_through_the_category_index() {
        let mut w = campaign("w", "$1", CampaignType::SponsoredProducts, &[]);
        w.settings.is_wildcard = true;
        let ix = index(&[w], &HashMap::new());
        let (ads, _) = ix.decide(&req(&[&["drinks"]], FilterMode::OrAnd, 10));
        assert_eq!(ads[0].product.product_code, "cola");
        let (ads, _) = ix.decide(&req(&[], FilterMode::OrAnd, 10));
        assert_eq!(ads.len(), 3, "a wildcard advertises the whole catalog");
    }
}
