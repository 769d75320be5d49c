//! `adsbench gen`: a deterministic synthetic catalog and campaign set for the
//! `POST /v1/ads/generate` benchmark, written straight into the api's embedded state.
//!
//! Shape (every value follows from `--seed` and the index, so two runs with the same
//! arguments write the same records):
//!
//! - **Categories**: a 10 x 10 x 10 tree, `d3` / `d3/d3-7` / `d3/d3-7/d3-7-1`; leaf
//!   `L` is `d{L/100}/d{L/100}-{L/10%10}/d{L/100}-{L/10%10}-{L%10}`.
//! - **Products** `p0000000..`: product `i` is in leaf `i % 1000`; one in ten is in a
//!   second, random leaf too.
//! - **Campaigns** `bench-00000..`: 60 % sponsored products (5-50 products each),
//!   40 % banner X (1-10 products; 40 % of those video, half of the videos with two
//!   creatives with distinct UniversalAdIds; up to two companion products). Each
//!   campaign has a home category at depth 2 and takes 80 % of its products from it.
//!   One in 500 sponsored-products and one in 1,000 banner campaigns is a wildcard.
//!   10 % carry an include filter (their home's depth-1 category), 5 % an exclude
//!   filter (one leaf of their home), 30 % spend limits far above any spend.
//!   Placement `category` 50 %, `search` 35 %, empty (every placement) 15 %. Bids
//!   $0.10-$5.00. All active and approved, 2026-01-01 to 2030-12-31.

use chrono::{DateTime, TimeZone, Utc};
use rm_ads::model::campaign::{
    ApprovalState, BannerXCampaign, CampaignState, CampaignType, CatalogFilter, ProductKey,
    SlotType, VideoConfig,
};
use rm_ads::model::catalog::Product;

use super::rng::Rng;

/// Leaves of the category tree (10 x 10 x 10).
pub const LEAVES: u64 = 1000;
/// The namespace the generated catalog and campaigns belong to: the demo client's,
/// which the load run authenticates as.
pub const NAMESPACE: &str = "demo";

/// What to generate.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Catalog id.
    pub catalog: String,
    /// Products.
    pub products: u64,
    /// Seed of every random choice.
    pub seed: u64,
}

/// The category path of `leaf` cut at `depth` (1 to 3).
pub fn category_path(leaf: u64, depth: u32) -> String {
    let (a, b, c) = (leaf / 100 % 10, leaf / 10 % 10, leaf % 10);
    match depth {
        1 => format!("d{a}"),
        2 => format!("d{a}/d{a}-{b}"),
        _ => format!("d{a}/d{a}-{b}/d{a}-{b}-{c}"),
    }
}

/// Product `i` of the catalog.
pub fn product(shape: &Shape, i: u64) -> Product {
    let mut rng = Rng::new(shape.seed ^ i.wrapping_mul(0x2545_F491_4F6C_DD1D));
    let mut categories = vec![category_path(i % LEAVES, 3)];
    if rng.chance(0.1) {
        let other = rng.below(LEAVES);
        if other != i % LEAVES {
            categories.push(category_path(other, 3));
        }
    }
    Product {
        namespace_id: NAMESPACE.into(),
        catalog_id: shape.catalog.clone(),
        product_code: format!("p{i:07}"),
        name: format!("Product {i}"),
        categories,
        seller_id: format!("seller-{}", i % 500),
        price: format!("${}.{:02}", 1 + rng.below(50), rng.below(100)),
    }
}

fn at(y: i32, m: u32, d: u32) -> Option<DateTime<Utc>> {
    Utc.with_ymd_and_hms(y, m, d, 0, 0, 0).single()
}

/// A product index near `home` (a depth-2 category, 0..100) with probability 0.8.
fn pick_product(rng: &mut Rng, shape: &Shape, home: u64) -> u64 {
    let per_leaf = shape.products / LEAVES;
    if per_leaf > 0 && rng.chance(0.8) {
        let leaf = home * 10 + rng.below(10);
        leaf + LEAVES * rng.below(per_leaf)
    } else {
        rng.below(shape.products.max(1))
    }
}

fn video(j: u64, tag: &str, duration: u32) -> VideoConfig {
    VideoConfig {
        file_id: format!("vid-{j}-{tag}"),
        universal_ad_id: format!("bench-{j}-{tag}"),
        media_url: format!("https://cdn.example/bench/{j}-{tag}.mp4"),
        mime_type: "video/mp4".into(),
        width: 1280,
        height: 720,
        duration_seconds: duration,
    }
}

/// Campaign `j`.
pub fn campaign(shape: &Shape, j: u64) -> BannerXCampaign {
    let mut rng = Rng::new(shape.seed ^ 0x5bd1_e995 ^ j.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let sponsored = j % 100 < 60;
    let wildcard = if sponsored {
        j % 500 == 7
    } else {
        j % 1000 == 77
    };
    let home = rng.below(100);
    let home_leaf = home * 10;
    let n = if sponsored {
        5 + rng.below(46)
    } else {
        1 + rng.below(10)
    };
    let mut keys: Vec<ProductKey> = Vec::with_capacity(n as usize);
    if !wildcard {
        for _ in 0..n {
            let i = pick_product(&mut rng, shape, home);
            let code = format!("p{i:07}");
            if keys.iter().all(|k| k.product_code != code) {
                keys.push(ProductKey {
                    catalog_id: shape.catalog.clone(),
                    product_code: code,
                    seller_id: format!("seller-{}", i % 500),
                });
            }
        }
    }
    let mut c = BannerXCampaign {
        id: format!("bench-{j:05}"),
        name: format!("Bench campaign {j}"),
        namespace_id: NAMESPACE.into(),
        manager_team_id: "bench-manager".into(),
        team_id: format!("team-{}", j % 50),
        seller_id: format!("seller-{}", j % 500),
        wallet_id: format!("wallet-{}", j % 200),
        template_id: "bench-template".into(),
        placement_id: match rng.below(100) {
            0..50 => "category".into(),
            50..85 => "search".into(),
            _ => String::new(),
        },
        campaign_state: CampaignState::Active,
        start_time: at(2026, 1, 1),
        end_time: at(2030, 12, 31),
        catalog_ids: vec![shape.catalog.clone()],
        ..Default::default()
    };
    c.advertised_products.products_by_key = keys;
    c.approval.state = ApprovalState::Approved;
    c.settings.campaign_type = if sponsored {
        CampaignType::SponsoredProducts
    } else {
        CampaignType::BannerX
    };
    c.settings.is_wildcard = wildcard;
    c.settings.from_time = c.start_time;
    c.settings.to_time = c.end_time;
    let bid = 10 + rng.below(491);
    c.strategy.auction.max_bid = format!("${}.{:02}", bid / 100, bid % 100);
    if rng.chance(0.3) {
        c.strategy.auction.spend_limit.daily = "$100000.00".into();
        c.strategy.auction.spend_limit.total = "$10000000.00".into();
    }
    if rng.chance(0.1) {
        c.targeting.include_filters.push(CatalogFilter {
            catalog_id: shape.catalog.clone(),
            filter: format!("category:{}", category_path(home_leaf, 1)),
        });
    }
    if rng.chance(0.05) {
        c.targeting.exclude_filters.push(CatalogFilter {
            catalog_id: shape.catalog.clone(),
            filter: format!("category:{}", category_path(home_leaf + rng.below(10), 3)),
        });
    }
    if !sponsored {
        let cfg = &mut c.banner_x_config;
        cfg.slot_id = "category-top".into();
        cfg.banner_text = format!("Offer {j}");
        cfg.heading_text = format!("Bench heading {j}");
        cfg.banner_text_colour_hex = "#ffffff".into();
        cfg.background_colour_hex = format!("#{:06x}", rng.below(0x100_0000));
        cfg.hero_image_id = format!("img-hero-{j}");
        cfg.hero_image_alt_text = format!("Hero image {j}");
        cfg.cta_flag = true;
        cfg.cta_link = format!("https://shop.example/c/{j}");
        cfg.cta_text = "Shop now".into();
        if rng.chance(0.4) {
            cfg.slot_type = SlotType::Video;
            cfg.primary_video_config = video(j, "a", [6, 15, 30][rng.below(3) as usize]);
            if rng.chance(0.5) {
                cfg.additional_video_configs.push(video(
                    j,
                    "b",
                    [6, 15, 30][rng.below(3) as usize],
                ));
            }
        }
        cfg.companion_products = c
            .advertised_products
            .products_by_key
            .iter()
            .take(2)
            .cloned()
            .collect();
    }
    c
}

/// Counts of what a generated set holds, for the summary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Census {
    /// Sponsored-products campaigns.
    pub sponsored: u64,
    /// Banner X campaigns.
    pub banners: u64,
    /// Banner X campaigns with video.
    pub video: u64,
    /// ... of which with two video creatives.
    pub two_videos: u64,
    /// Wildcard campaigns.
    pub wildcard: u64,
    /// With an include filter.
    pub include: u64,
    /// With an exclude filter.
    pub exclude: u64,
    /// With spend limits.
    pub limited: u64,
    /// Placement `category`, `search`, any.
    pub placements: [u64; 3],
    /// Advertised product keys in all.
    pub advertised: u64,
}

impl Census {
    /// Counts `c`.
    pub fn add(&mut self, c: &BannerXCampaign) {
        match c.settings.campaign_type {
            CampaignType::SponsoredProducts => self.sponsored += 1,
            CampaignType::BannerX => self.banners += 1,
        }
        let videos = c.banner_x_config.videos().len() as u64;
        self.video += u64::from(videos > 0);
        self.two_videos += u64::from(videos > 1);
        self.wildcard += u64::from(c.settings.is_wildcard);
        self.include += u64::from(!c.targeting.include_filters.is_empty());
        self.exclude += u64::from(!c.targeting.exclude_filters.is_empty());
        self.limited += u64::from(!c.strategy.auction.spend_limit.daily.is_empty());
        let p = match c.placement_id.as_str() {
            "category" => 0,
            "search" => 1,
            _ => 2,
        };
        self.placements[p] += 1;
        self.advertised += c.advertised_products.products_by_key.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape {
            catalog: "bench-catalog".into(),
            products: 1_000_000,
            seed: 42,
        }
    }

    #[test]
    fn paths_follow_the_tree() {
        assert_eq!(category_path(371, 1), "d3");
        assert_eq!(category_path(371, 2), "d3/d3-7");
        assert_eq!(category_path(371, 3), "d3/d3-7/d3-7-1");
        assert_eq!(category_path(5, 3), "d0/d0-0/d0-0-5");
    }

    #[test]
    fn records_are_deterministic_and_valid() {
        let s = shape();
        assert_eq!(product(&s, 12_345), product(&s, 12_345));
        assert_eq!(campaign(&s, 77), campaign(&s, 77));
        let mut census = Census::default();
        for j in 0..2000 {
            let c = campaign(&s, j);
            c.validate()
                .unwrap_or_else(|e| panic!("campaign {j}: {e:?}"));
            for k in &c.advertised_products.products_by_key {
                let i: u64 = k.product_code[1..].parse().expect("code");
                assert!(i < s.products, "{}", k.product_code);
            }
            census.add(&c);
        }
        for i in (0..s.products).step_by(9973) {
            let p = product(&s, i);
            p.validate("product").expect("valid product");
            assert!(p.in_category(&category_path(i % LEAVES, 2)));
        }
        assert_eq!(census.sponsored + census.banners, 2000);
        assert!((1100..1300).contains(&census.sponsored), "{census:?}");
        assert!(census.video > 100 && census.two_videos > 30, "{census:?}");
        assert!(census.wildcard >= 4 && census.include > 100 && census.exclude > 40);
        assert!(census.placements.iter().all(|&n| n > 200), "{census:?}");
    }

    #[test]
    fn video_banners_have_distinct_creatives() {
        let s = shape();
        let two = (0..10_000)
            .map(|j| campaign(&s, j))
            .find(|c| c.banner_x_config.videos().len() == 2)
            .expect("a two-video banner");
        let v = two.banner_x_config.videos();
        assert_ne!(v[0].universal_ad_id, v[1].universal_ad_id);
        assert_ne!(v[0].media_url, v[1].media_url);
        assert!(v.iter().all(|v| v.duration_seconds > 0));
    }
}
