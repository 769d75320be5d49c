//! The banner X campaign record (spec: "Banner X campaign" and `bannerXConfig`), the
//! approval request, and the rules around them.
//!
//! Shape: every member of the spec's tables, camelCase; money amounts are strings
//! (an optional currency symbol or ISO 4217 code, then a decimal amount: `"$12.50"`,
//! `"12.50"`, `"EUR 12.50"`; `rm_schemas::money` has the form and the symbols); times
//! are RFC 3339 in UTC; enums are their full names (`CAMPAIGN_STATE_ACTIVE`). Members
//! left out of a create body take their empty value. Two members extend the spec for
//! video: `bannerXConfig.primaryVideoConfig` carries, beside the spec's `fileId`, what
//! a VAST `MediaFile` needs, and `bannerXConfig.additionalVideoConfigs` lists further
//! video creatives (one VAST `Creative` each).
//!
//! Campaign ids travel inside realised ad ids, so they are restricted to
//! `[A-Za-z0-9_-]{1,64}`.
//!
//! **Money.** A campaign's amounts are in one currency, the campaign's
//! ([`BannerXCampaign::currency`]): the one its symbols or codes name (the spec
//! shows a symbol on most amounts, none on `searchTerms[].maxBid`); amounts without
//! one take it; a campaign that names none is in the deployment's default (USD,
//! `rm_schemas::money::DEFAULT_CURRENCY`). Two currencies in one campaign are a 400
//! naming the field. Bids, spend limits and costs are exact decimals
//! ([`BannerXCampaign::max_bid`], [`BannerXCampaign::spend_limits`],
//! [`BannerXCampaign::known_cost`]); the strings are stored as sent.
//!
//! Approval: any of the three states may be set from any state (the spec shows no
//! restriction). `APPROVAL_STATE_REJECTED` needs a non-empty `rejectionReason`; the
//! other states clear it. Every approval moves `updateTime`.
//!
//! No I/O (the api stores campaigns and decodes their bodies); validation fails with
//! [`crate::AdsError::Invalid`] naming the member at fault.

use chrono::{DateTime, Utc};
use rm_schemas::money::{self, Currency, Money};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{check_id, check_text};
use crate::AdsError;

/// Longest campaign id.
pub const MAX_CAMPAIGN_ID_LEN: usize = 64;
/// Most entries in any list member of a campaign.
pub const MAX_LIST: usize = 10_000;

/// Campaign state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CampaignState {
    /// Serving.
    #[serde(rename = "CAMPAIGN_STATE_ACTIVE")]
    Active,
    /// Temporarily not serving.
    #[serde(rename = "CAMPAIGN_STATE_PAUSED")]
    Paused,
    /// Being prepared; not serving.
    #[default]
    #[serde(rename = "CAMPAIGN_STATE_DRAFT")]
    Draft,
    /// Ended for good.
    #[serde(rename = "CAMPAIGN_STATE_ARCHIVED")]
    Archived,
}

/// Approval state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ApprovalState {
    /// Waiting for review.
    #[default]
    #[serde(rename = "APPROVAL_STATE_PENDING")]
    Pending,
    /// Approved: may serve while active.
    #[serde(rename = "APPROVAL_STATE_APPROVED")]
    Approved,
    /// Rejected, with a reason.
    #[serde(rename = "APPROVAL_STATE_REJECTED")]
    Rejected,
}

/// Campaign type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CampaignType {
    /// Banner X (display and video banners).
    #[default]
    #[serde(rename = "CAMPAIGN_TYPE_BANNERX")]
    BannerX,
    /// Sponsored products (product ads).
    #[serde(rename = "CAMPAIGN_TYPE_SPONSORED_PRODUCTS")]
    SponsoredProducts,
}

/// Search-term match type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MatchType {
    /// Exact match.
    #[default]
    #[serde(rename = "MATCH_TYPE_EXACT_MATCH")]
    Exact,
    /// Phrase match.
    #[serde(rename = "MATCH_TYPE_PHRASE_MATCH")]
    Phrase,
    /// Broad match.
    #[serde(rename = "MATCH_TYPE_BROAD_MATCH")]
    Broad,
}

/// Banner slot type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SlotType {
    /// A banner slot.
    #[default]
    #[serde(rename = "BANNER_X_SLOT_TYPE_BANNER")]
    Banner,
    /// A video slot.
    #[serde(rename = "BANNER_X_SLOT_TYPE_VIDEO")]
    Video,
}

/// How a background image is laid out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BackgroundImagePosition {
    /// Tiled.
    #[default]
    #[serde(rename = "BANNER_X_BACKGROUND_IMAGE_POSITION_REPEATING")]
    Repeating,
    /// Scaled to cover.
    #[serde(rename = "BANNER_X_BACKGROUND_IMAGE_POSITION_COVER")]
    Cover,
    /// Centred once.
    #[serde(rename = "BANNER_X_BACKGROUND_IMAGE_POSITION_CENTER")]
    Center,
}

/// How a hero image is shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum HeroMode {
    /// As a block.
    #[default]
    #[serde(rename = "BANNER_X_HERO_IMAGE_MODE_BLOCK")]
    Block,
    /// Bleeding to the edges.
    #[serde(rename = "BANNER_X_HERO_IMAGE_MODE_BLEED")]
    Bleed,
}

/// Third-party verification tag provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TrackingTagProviderKind {
    /// DoubleVerify.
    #[default]
    #[serde(rename = "TRACKING_TAG_PROVIDER_DV")]
    Dv,
    /// Integral Ad Science.
    #[serde(rename = "TRACKING_TAG_PROVIDER_IAS")]
    Ias,
}

/// A product key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ProductKey {
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
    /// Seller.
    pub seller_id: String,
}

/// `advertisedProducts`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct AdvertisedProducts {
    /// Products the campaign advertises.
    pub products_by_key: Vec<ProductKey>,
}

/// `approval`, in the record and in the approve request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Approval {
    /// Approval state.
    pub state: ApprovalState,
    /// Reason, given when rejecting.
    pub rejection_reason: String,
}

/// `settings`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Settings {
    /// Campaign type.
    pub campaign_type: CampaignType,
    /// Start of serving.
    pub from_time: Option<DateTime<Utc>>,
    /// End of serving.
    pub to_time: Option<DateTime<Utc>>,
    /// Advertises every product of its catalogs.
    pub is_wildcard: bool,
}

/// `fixedCosts`: money strings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct FixedCosts {
    /// Creative cost.
    pub creative_cost: String,
    /// Data cost.
    pub data_cost: String,
    /// Other cost.
    pub other_cost: String,
}

/// A custom field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct CustomField {
    /// Field id.
    pub custom_field_id: String,
    /// Content.
    pub content: String,
}

/// A custom question.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct CustomQuestion {
    /// Question id.
    pub custom_question_id: String,
    /// Answers.
    pub answers: Vec<String>,
}

/// `strategy.auction.spendLimit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SpendLimit {
    /// Daily limit (money).
    pub daily: String,
    /// Total limit (money).
    pub total: String,
}

/// `strategy.auction`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Auction {
    /// Highest bid (money).
    pub max_bid: String,
    /// Spend limits.
    pub spend_limit: SpendLimit,
}

/// A catalog's share of a fixed tenancy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct CatalogCost {
    /// Catalog.
    pub catalog_id: String,
    /// Percentage of the cost.
    pub catalog_cost_percentage: f64,
}

/// `strategy.fixedTenancy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct FixedTenancy {
    /// Cost (money).
    pub cost: String,
    /// Positions held.
    pub positions: Vec<i32>,
    /// Cost split per catalog.
    pub catalog_costs: Vec<CatalogCost>,
}

/// `strategy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Strategy {
    /// Auction bidding.
    pub auction: Auction,
    /// Fixed tenancy.
    pub fixed_tenancy: FixedTenancy,
}

/// A list of target products.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct TargetProducts {
    /// Target products.
    pub target_products_by_key: Vec<ProductKey>,
}

/// An include or exclude filter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct CatalogFilter {
    /// Catalog.
    pub catalog_id: String,
    /// Filter, e.g. `category:food/snacks`.
    pub filter: String,
}

/// A negative search term.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct NegativeSearchTerm {
    /// Phrase.
    pub phrase: String,
    /// Match type.
    pub match_type: MatchType,
}

/// A search term.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SearchTerm {
    /// Phrase.
    pub phrase: String,
    /// Collection.
    pub collection_name: String,
    /// Match type.
    pub match_type: MatchType,
    /// Highest bid (money, no currency symbol).
    pub max_bid: String,
    /// Suggested by the platform.
    pub suggested: bool,
    /// Treated as custom.
    pub treat_as_custom: bool,
    /// Products excluded for this term.
    pub excluded_products: Vec<ProductKey>,
}

/// `targeting`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Targeting {
    /// Cross-sell targets.
    pub cross_sell: TargetProducts,
    /// Upsell targets.
    pub upsell: TargetProducts,
    /// Include filters.
    pub include_filters: Vec<CatalogFilter>,
    /// Exclude filters.
    pub exclude_filters: Vec<CatalogFilter>,
    /// Negative search terms.
    pub negative_search_terms: Vec<NegativeSearchTerm>,
    /// Search terms.
    pub search_terms: Vec<SearchTerm>,
}

/// A video creative: the spec's `primaryVideoConfig.fileId` plus what VAST needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct VideoConfig {
    /// The video file's id.
    pub file_id: String,
    /// The creative's UniversalAdId idValue (the `videoId` of its beacons); unique
    /// across the campaign's videos. Defaults to `fileId`.
    pub universal_ad_id: String,
    /// Where players fetch the media.
    pub media_url: String,
    /// MIME type of the media.
    pub mime_type: String,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Duration in seconds.
    pub duration_seconds: u32,
}

impl VideoConfig {
    /// The creative's UniversalAdId idValue.
    pub fn ad_id_value(&self) -> &str {
        if self.universal_ad_id.is_empty() {
            &self.file_id
        } else {
            &self.universal_ad_id
        }
    }
}

/// `additionalFields` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct AdditionalField {
    /// Field id.
    pub id: String,
    /// Value.
    pub value: String,
}

/// `trackingTagProvider` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct TrackingTagProvider {
    /// Provider.
    pub provider: TrackingTagProviderKind,
    /// Tag content.
    pub content: String,
}

/// `bannerXConfig`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct BannerXConfig {
    /// Slot id.
    pub slot_id: String,
    /// Slot type.
    pub slot_type: SlotType,
    /// Banner text.
    pub banner_text: String,
    /// Heading text.
    pub heading_text: String,
    /// Banner text colour, `#rrggbb`.
    pub banner_text_colour_hex: String,
    /// Background colour, `#rrggbb`.
    pub background_colour_hex: String,
    /// Background image.
    pub background_image_id: String,
    /// Second background image.
    pub secondary_background_image_id: String,
    /// Background image layout.
    pub background_image_position: BackgroundImagePosition,
    /// Second background image layout.
    pub secondary_background_image_position: BackgroundImagePosition,
    /// Hero image.
    pub hero_image_id: String,
    /// Second hero image.
    pub secondary_hero_image_id: String,
    /// Hero image alt text.
    pub hero_image_alt_text: String,
    /// Second hero image alt text.
    pub secondary_hero_image_alt_text: String,
    /// Hero image mode.
    pub hero_mode: HeroMode,
    /// Second hero image mode.
    pub secondary_hero_mode: HeroMode,
    /// Shows a call to action.
    pub cta_flag: bool,
    /// Call-to-action destination.
    pub cta_link: String,
    /// Call-to-action text.
    pub cta_text: String,
    /// Call-to-action accessible text.
    pub cta_text_accessibility: String,
    /// Content standard.
    pub content_standard_id: String,
    /// The primary video; empty `fileId` for a banner without video.
    pub primary_video_config: VideoConfig,
    /// Further video creatives (extension of the spec).
    pub additional_video_configs: Vec<VideoConfig>,
    /// Companion products shown as hotspots (rule 11).
    pub companion_products: Vec<ProductKey>,
    /// Additional fields.
    pub additional_fields: Vec<AdditionalField>,
    /// Third-party tracking tags.
    pub tracking_tag_provider: Vec<TrackingTagProvider>,
}

impl BannerXConfig {
    /// The video creatives in serving order (primary first); empty for a banner
    /// without video.
    pub fn videos(&self) -> Vec<&VideoConfig> {
        let mut v = Vec::new();
        if !self.primary_video_config.file_id.is_empty() {
            v.push(&self.primary_video_config);
        }
        v.extend(
            self.additional_video_configs
                .iter()
                .filter(|c| !c.file_id.is_empty()),
        );
        v
    }
}

/// The banner X campaign record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct BannerXCampaign {
    /// Identifier, `[A-Za-z0-9_-]{1,64}`; generated when a create body leaves it out.
    pub id: String,
    /// Name.
    pub name: String,
    /// The namespace (tenant) the campaign belongs to: the creating client's when
    /// left out; another namespace's is refused (403) unless an operator creates it.
    pub namespace_id: String,
    /// Managing team.
    pub manager_team_id: String,
    /// Owning team.
    pub team_id: String,
    /// Seller.
    pub seller_id: String,
    /// Wallet paying for it.
    pub wallet_id: String,
    /// Template.
    pub template_id: String,
    /// Placement it serves in (e.g. `category`).
    pub placement_id: String,
    /// Campaign state.
    pub campaign_state: CampaignState,
    /// Start.
    pub start_time: Option<DateTime<Utc>>,
    /// End.
    pub end_time: Option<DateTime<Utc>>,
    /// Last change (read-only; set by the service).
    pub update_time: Option<DateTime<Utc>>,
    /// Catalogs it serves in.
    pub catalog_ids: Vec<String>,
    /// Advertised products.
    pub advertised_products: AdvertisedProducts,
    /// Approval.
    pub approval: Approval,
    /// Settings.
    pub settings: Settings,
    /// Fixed costs.
    pub fixed_costs: FixedCosts,
    /// Custom fields.
    pub custom_fields: Vec<CustomField>,
    /// Custom questions.
    pub custom_questions: Vec<CustomQuestion>,
    /// Bidding strategy.
    pub strategy: Strategy,
    /// Targeting.
    pub targeting: Targeting,
    /// Banner X creative configuration.
    pub banner_x_config: BannerXConfig,
}

/// `{bannerXCampaign: ...}`: create body and every response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CampaignBody {
    /// The campaign.
    pub banner_x_campaign: BannerXCampaign,
}

/// `{approval: {state, rejectionReason}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApproveBody {
    /// The approval to set.
    pub approval: ApprovalRequest,
}

/// The approval of an approve request: `state` is required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// State to set.
    pub state: ApprovalState,
    /// Reason; required when rejecting.
    #[serde(default)]
    pub rejection_reason: String,
}

/// Whether `id` is a valid campaign id.
pub fn valid_campaign_id(id: &str) -> bool {
    (1..=MAX_CAMPAIGN_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Parses a money string (`rm_schemas::money`): optional currency symbol or code,
/// then a non-negative decimal amount; without a marker it is in `default`. `None`
/// for an empty string.
pub fn parse_money(s: &str, default: Currency) -> Result<Option<Money>, String> {
    Money::parse(s, default).map_err(|e| e.to_string())
}

/// Whether a money string names its currency (a symbol or a code).
fn names_currency(s: &str) -> bool {
    s.chars()
        .any(|c| !(c.is_ascii_digit() || c == '.' || c.is_whitespace()))
}

fn colour(field: &str, v: &str) -> Result<(), AdsError> {
    let ok = v.is_empty()
        || (v.len() == 7 && v.starts_with('#') && v[1..].bytes().all(|b| b.is_ascii_hexdigit()));
    if ok {
        Ok(())
    } else {
        Err(AdsError::invalid(field, format!("'{v}' is not #rrggbb")))
    }
}

fn list<T>(field: &str, v: &[T]) -> Result<(), AdsError> {
    if v.len() > MAX_LIST {
        return Err(AdsError::invalid(
            field,
            format!("more than {MAX_LIST} entries"),
        ));
    }
    Ok(())
}

impl BannerXCampaign {
    /// Checks what serde cannot: id syntax, money strings, colours, time order,
    /// list bounds, video creatives' unique UniversalAdIds.
    pub fn validate(&self) -> Result<(), AdsError> {
        let p = "bannerXCampaign";
        if !valid_campaign_id(&self.id) {
            return Err(AdsError::invalid(
                format!("{p}.id"),
                "must match [A-Za-z0-9_-]{1,64}",
            ));
        }
        if !rm_schemas::namespace::valid(&self.namespace_id) {
            return Err(AdsError::invalid(
                format!("{p}.namespaceId"),
                "must match [a-z0-9_-]{1,64} (it is the campaign's namespace)",
            ));
        }
        check_text(&format!("{p}.name"), &self.name)?;
        for (i, c) in self.catalog_ids.iter().enumerate() {
            check_id(&format!("{p}.catalogIds[{i}]"), c)?;
        }
        list(&format!("{p}.catalogIds"), &self.catalog_ids)?;
        list(
            &format!("{p}.advertisedProducts.productsByKey"),
            &self.advertised_products.products_by_key,
        )?;
        if let (Some(a), Some(b)) = (self.start_time, self.end_time) {
            if b < a {
                return Err(AdsError::invalid(
                    format!("{p}.endTime"),
                    "is before startTime",
                ));
            }
        }
        // Every amount parses, and those that name a currency name one currency.
        let mut named: Option<(Currency, String)> = None;
        for (field, v) in self.money_fields() {
            let field = format!("{p}.{field}");
            let m = parse_money(v, money::DEFAULT_CURRENCY)
                .map_err(|e| AdsError::invalid(&field, e))?;
            let Some(m) = m.filter(|_| names_currency(v)) else {
                continue;
            };
            match &named {
                None => named = Some((m.currency, field)),
                Some((c, first)) if *c != m.currency => {
                    return Err(AdsError::invalid(
                        field,
                        format!(
                        "is in {} but {first} is in {c}: a campaign's amounts are in one currency",
                        m.currency
                    ),
                    ))
                }
                Some(_) => {}
            }
        }
        let c = &self.banner_x_config;
        colour(
            &format!("{p}.bannerXConfig.bannerTextColourHex"),
            &c.banner_text_colour_hex,
        )?;
        colour(
            &format!("{p}.bannerXConfig.backgroundColourHex"),
            &c.background_colour_hex,
        )?;
        list(
            &format!("{p}.bannerXConfig.additionalVideoConfigs"),
            &c.additional_video_configs,
        )?;
        list(
            &format!("{p}.bannerXConfig.companionProducts"),
            &c.companion_products,
        )?;
        let link = c.cta_link.as_str();
        if !link.is_empty() {
            let ok = (link.starts_with("https://") || link.starts_with("http://"))
                && link
                    .split("://")
                    .nth(1)
                    .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
                && !link
                    .chars()
                    .any(|ch| ch.is_whitespace() || ch.is_control() || ch == '\\');
            if !ok {
                return Err(AdsError::invalid(
                    format!("{p}.bannerXConfig.ctaLink"),
                    format!("'{link}' is not an absolute http(s) URL without spaces (it becomes a signed click redirect)"),
                ));
            }
        }
        let videos = c.videos();
        for (i, v) in videos.iter().enumerate() {
            let field = format!("{p}.bannerXConfig.videos[{i}]");
            check_id(&format!("{field}.universalAdId"), v.ad_id_value())?;
            if videos[..i]
                .iter()
                .any(|w| w.ad_id_value() == v.ad_id_value())
            {
                return Err(AdsError::invalid(
                    format!("{field}.universalAdId"),
                    "is shared with another video creative (spec rule 4)",
                ));
            }
        }
        Ok(())
    }

    /// The money strings of the campaign, with their paths under `bannerXCampaign`.
    fn money_fields(&self) -> Vec<(String, &str)> {
        let f = &self.fixed_costs;
        let a = &self.strategy.auction;
        let mut out = vec![
            (
                "fixedCosts.creativeCost".to_owned(),
                f.creative_cost.as_str(),
            ),
            ("fixedCosts.dataCost".to_owned(), f.data_cost.as_str()),
            ("fixedCosts.otherCost".to_owned(), f.other_cost.as_str()),
            ("strategy.auction.maxBid".to_owned(), a.max_bid.as_str()),
            (
                "strategy.auction.spendLimit.daily".to_owned(),
                a.spend_limit.daily.as_str(),
            ),
            (
                "strategy.auction.spendLimit.total".to_owned(),
                a.spend_limit.total.as_str(),
            ),
            (
                "strategy.fixedTenancy.cost".to_owned(),
                self.strategy.fixed_tenancy.cost.as_str(),
            ),
        ];
        for (i, t) in self.targeting.search_terms.iter().enumerate() {
            out.push((
                format!("targeting.searchTerms[{i}].maxBid"),
                t.max_bid.as_str(),
            ));
        }
        out
    }

    /// The campaign's currency (module header): the first one its amounts name,
    /// else the deployment's default.
    pub fn currency(&self) -> Currency {
        self.money_fields()
            .into_iter()
            .filter(|(_, v)| names_currency(v))
            .find_map(|(_, v)| Money::parse(v, money::DEFAULT_CURRENCY).ok().flatten())
            .map_or(money::DEFAULT_CURRENCY, |m| m.currency)
    }

    /// One of the campaign's amounts, in the campaign's currency; `None` when empty
    /// or not an amount (a stored campaign validated when written always is).
    fn amount(&self, s: &str) -> Option<Money> {
        parse_money(s, self.currency()).ok().flatten()
    }

    /// The bid per click (`strategy.auction.maxBid`), exact, when set.
    pub fn max_bid(&self) -> Option<Money> {
        self.amount(&self.strategy.auction.max_bid)
    }

    /// The spend limits (`strategy.auction.spendLimit`): daily and total, when set.
    pub fn spend_limits(&self) -> (Option<Money>, Option<Money>) {
        let l = &self.strategy.auction.spend_limit;
        (self.amount(&l.daily), self.amount(&l.total))
    }

    /// The campaign's known cost: fixed costs plus the fixed tenancy cost, exact, in
    /// the campaign's currency; `None` when none is set.
    pub fn known_cost(&self) -> Option<Money> {
        let f = &self.fixed_costs;
        let parts = [
            &f.creative_cost,
            &f.data_cost,
            &f.other_cost,
            &self.strategy.fixed_tenancy.cost,
        ];
        let mut sum: Option<Money> = None;
        for m in parts.iter().filter_map(|s| self.amount(s)) {
            sum = Some(match sum {
                None => m,
                Some(s) => s.checked_add(m).ok()?,
            });
        }
        sum
    }

    /// Sets the approval, enforcing the rejection-reason rule, and moves
    /// `updateTime` to `now`.
    pub fn approve(&mut self, req: ApprovalRequest, now: DateTime<Utc>) -> Result<(), AdsError> {
        check_text("approval.rejectionReason", &req.rejection_reason)?;
        let reason = req.rejection_reason.trim();
        if req.state == ApprovalState::Rejected && reason.is_empty() {
            return Err(AdsError::invalid(
                "approval.rejectionReason",
                "is required when the state is APPROVAL_STATE_REJECTED",
            ));
        }
        self.approval = Approval {
            state: req.state,
            rejection_reason: if req.state == ApprovalState::Rejected {
                reason.to_owned()
            } else {
                String::new()
            },
        };
        self.update_time = Some(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn money_strings() {
        let usd = money::DEFAULT_CURRENCY;
        let m = |s: &str| parse_money(s, usd).map(|m| m.map(|m| m.to_string()));
        assert_eq!(m("$12.50"), Ok(Some("USD 12.50".into())));
        assert_eq!(m("12"), Ok(Some("USD 12.00".into())));
        assert_eq!(m("€0.5"), Ok(Some("EUR 0.50".into())));
        assert_eq!(m("1 EUR"), Ok(Some("EUR 1.00".into())));
        assert_eq!(m(""), Ok(None));
        assert!(m("$").is_err());
        assert!(m("-5").is_err());
        assert!(m("1.2.3").is_err());
        assert!(m("abcd5").is_err());
    }

    #[test]
    fn approval_rules() {
        let mut c = BannerXCampaign {
            id: "c1".into(),
            namespace_id: "acme".into(),
            ..Default::default()
        };
        let now = Utc::now();
        let reject = |r: &str| ApprovalRequest {
            state: ApprovalState::Rejected,
            rejection_reason: r.into(),
        };
        assert!(c.approve(reject("  "), now).is_err());
        c.approve(reject("bad art"), now).unwrap();
        assert_eq!(c.approval.rejection_reason, "bad art");
        c.approve(
            ApprovalRequest {
                state: ApprovalState::Approved,
                rejection_reason: "ignored".into(),
            },
            now,
        )
        .unwrap();
        assert_eq!(c.approval.state, ApprovalState::Approved);
        assert_eq!(c.approval.rejection_reason, "");
        assert_eq!(c.update_time, Some(now));
    }

    #[test]
    fn enums_are_full_names_and_unknown_ones_fail() {
        let v = serde_json::to_value(BannerXCampaign::default()).unwrap();
        assert_eq!(v["campaignState"], "CAMPAIGN_STATE_DRAFT");
        assert_eq!(v["approval"]["state"], "APPROVAL_STATE_PENDING");
        assert_eq!(v["settings"]["campaignType"], "CAMPAIGN_TYPE_BANNERX");
        // The api decodes bodies with serde_path_to_error too (`api::error::parse_json`).
        let de = &mut serde_json::Deserializer::from_slice(br#"{"approval":{"state":"YES"}}"#);
        let e = serde_path_to_error::deserialize::<_, ApproveBody>(de).unwrap_err();
        assert!(e.to_string().contains("approval.state"), "{e}");
    }

    #[test]
    fn a_campaigns_amounts_are_in_one_currency() {
        let mut c = BannerXCampaign {
            id: "c1".into(),
            namespace_id: "acme".into(),
            ..Default::default()
        };
        assert_eq!(c.currency(), money::DEFAULT_CURRENCY, "names none");
        assert_eq!((c.max_bid(), c.known_cost()), (None, None));
        c.strategy.auction.max_bid = "€0.10".into();
        c.strategy.auction.spend_limit.daily = "5".into();
        c.fixed_costs.creative_cost = "EUR 100.10".into();
        c.strategy.fixed_tenancy.cost = "0.2".into();
        c.targeting.search_terms.push(SearchTerm {
            max_bid: "0.25".into(),
            ..Default::default()
        });
        assert!(c.validate().is_ok());
        assert_eq!(c.currency().code(), "EUR");
        let show = |m: Option<Money>| m.map(|m| m.to_string());
        assert_eq!(show(c.max_bid()), Some("EUR 0.10".into()));
        assert_eq!(
            show(c.spend_limits().0),
            Some("EUR 5.00".into()),
            "bare: the campaign's"
        );
        assert_eq!(show(c.spend_limits().1), None);
        assert_eq!(show(c.known_cost()), Some("EUR 100.30".into()), "exact sum");
        c.strategy.auction.spend_limit.total = "$50".into();
        let e = c.validate().expect_err("two currencies");
        assert!(
            e.to_string()
                .contains("bannerXCampaign.strategy.auction.spendLimit.total")
                && e.to_string()
                    .contains("is in USD but bannerXCampaign.fixedCosts.creativeCost is in EUR"),
            "{e}"
        );
    }

    #[test]
    fn shared_universal_ad_ids_are_refused() {
        let mut c = BannerXCampaign {
            id: "c1".into(),
            namespace_id: "acme".into(),
            ..Default::default()
        };
        c.banner_x_config.primary_video_config.file_id = "v1".into();
        c.banner_x_config
            .additional_video_configs
            .push(VideoConfig {
                file_id: "v1".into(),
                ..Default::default()
            });
        assert!(c.validate().is_err());
        c.banner_x_config.additional_video_configs[0].universal_ad_id = "v2".into();
        assert!(c.validate().is_ok());
        c.namespace_id = "Not A Namespace".into();
        assert!(c.validate().is_err(), "the namespace is checked");
    }

    #[test]
    fn cta_links_must_be_absolute_http_urls() {
        let mut c = BannerXCampaign {
            id: "c1".into(),
            namespace_id: "acme".into(),
            ..Default::default()
        };
        for bad in [
            "javascript:alert(1)",
            "shop.example/x",
            "https://",
            "https://a b",
            "http:///x",
        ] {
            c.banner_x_config.cta_link = bad.into();
            assert!(c.validate().is_err(), "{bad}");
        }
        c.banner_x_config.cta_link = "https://shop.example/snacks?x=1".into();
        assert!(c.validate().is_ok());
    }

    proptest! {
        #[test]
        fn record_round_trips(id in "[A-Za-z0-9_-]{1,64}", name in ".{0,40}", state in 0..3u8) {
            let mut c = BannerXCampaign { id, name, ..Default::default() };
            c.approval.state = [ApprovalState::Pending, ApprovalState::Approved, ApprovalState::Rejected][state as usize];
            c.update_time = Some(Utc::now());
            let json = serde_json::to_vec(&CampaignBody { banner_x_campaign: c.clone() }).unwrap();
            let back: CampaignBody = serde_json::from_slice(&json).unwrap();
            prop_assert_eq!(back.banner_x_campaign, c);
        }

        #[test]
        fn money_never_panics(s in ".{0,12}") {
            let _ = parse_money(&s, money::DEFAULT_CURRENCY);
        }
    }
}
