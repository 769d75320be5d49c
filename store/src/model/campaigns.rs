//! The campaign summary: one row per campaign and day, rolled up from the other
//! reports (pure; `GET /v1/reports/campaigns`).
//!
//! | column | from |
//! |---|---|
//! | `impressions`, `clicks`, `ctr` | the ad report's billable counts ([`super::ads`]) |
//! | `videoPlays`, `completionRate` | the video funnel: plays, completes / plays |
//! | `productImpressions`, `productClicks` | the product report |
//! | `cartsAdded` | cart adds caused by the campaign's ads, on the day of the add |
//! | `attributedOrders`, `revenue` | sales attribution: distinct orders with a line credited to the campaign, by the order's day, and those lines' revenue |
//! | `spend` | billable clicks x the campaign's `maxBid`; `null` when the bid is unknown |
//! | `roas` | revenue / spend; `null` when spend is `null` or 0 |
//!
//! A campaign appears on a day when any part has a row for it that day. Rows are
//! sorted by campaign and day.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ads::AdReportRow;
use super::funnel::FunnelReportRow;
use super::products::ProductReportRow;
use super::rate;

/// Cart adds per campaign and day (the day of the add event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CartAddsRow {
    /// Campaign of the ad of the add event.
    pub campaign_id: String,
    /// UTC day of the add, `YYYY-MM-DD`.
    pub day: String,
    /// Adds (a cart line going from 0 units to more).
    pub carts_added: u64,
}

/// Attributed sales per credited campaign and order day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CampaignSalesRow {
    /// Campaign credited.
    pub campaign_id: String,
    /// UTC day of the orders, `YYYY-MM-DD`.
    pub day: String,
    /// Distinct orders with at least one line credited to the campaign.
    pub orders: u64,
    /// Revenue of those lines.
    pub revenue: f64,
}

/// One row of the campaign summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CampaignReportRow {
    /// Campaign.
    pub campaign_id: String,
    /// UTC day, `YYYY-MM-DD`.
    pub day: String,
    /// Billable ad impressions.
    pub impressions: u64,
    /// Billable ad clicks.
    pub clicks: u64,
    /// clicks / impressions (0 without impressions).
    pub ctr: f64,
    /// Video views that reached play.
    pub video_plays: u64,
    /// Completes / plays (0 without plays).
    pub completion_rate: f64,
    /// Product impressions.
    pub product_impressions: u64,
    /// Product clicks.
    pub product_clicks: u64,
    /// Carts added.
    pub carts_added: u64,
    /// Distinct orders credited to the campaign.
    pub attributed_orders: u64,
    /// Revenue of the credited lines.
    pub revenue: f64,
    /// clicks x maxBid; `None` when the bid is unknown.
    pub spend: Option<f64>,
    /// revenue / spend; `None` when spend is `None` or 0.
    pub roas: Option<f64>,
}

#[derive(Default)]
struct Acc {
    impressions: u64,
    clicks: u64,
    plays: u64,
    completes: u64,
    product_impressions: u64,
    product_clicks: u64,
    carts_added: u64,
    orders: u64,
    revenue: f64,
}

/// The parts of the summary, as the stores return them.
#[derive(Debug, Default, Clone)]
pub struct CampaignParts {
    /// The ad report.
    pub ads: Vec<AdReportRow>,
    /// The video funnel report.
    pub funnel: Vec<FunnelReportRow>,
    /// The product report.
    pub products: Vec<ProductReportRow>,
    /// Cart adds per campaign and day.
    pub cart_adds: Vec<CartAddsRow>,
    /// Attributed sales per campaign and day.
    pub sales: Vec<CampaignSalesRow>,
}

/// Rolls the parts up per campaign and day; `max_bid` gives a campaign's bid per click.
pub fn report(
    parts: &CampaignParts,
    max_bid: impl Fn(&str) -> Option<f64>,
) -> Vec<CampaignReportRow> {
    let mut groups: BTreeMap<(String, String), Acc> = BTreeMap::new();
    fn entry<'m>(g: &'m mut BTreeMap<(String, String), Acc>, c: &str, d: &str) -> &'m mut Acc {
        g.entry((c.to_owned(), d.to_owned())).or_default()
    }
    for r in &parts.ads {
        let a = entry(&mut groups, &r.campaign_id, &r.day);
        a.impressions += r.impressions;
        a.clicks += r.clicks;
    }
    for r in &parts.funnel {
        let a = entry(&mut groups, &r.campaign_id, &r.day);
        a.plays += r.plays;
        a.completes += r.completes;
    }
    for r in &parts.products {
        let a = entry(&mut groups, &r.campaign_id, &r.day);
        a.product_impressions += r.impressions;
        a.product_clicks += r.clicks;
    }
    for r in &parts.cart_adds {
        entry(&mut groups, &r.campaign_id, &r.day).carts_added += r.carts_added;
    }
    for r in &parts.sales {
        let a = entry(&mut groups, &r.campaign_id, &r.day);
        a.orders += r.orders;
        a.revenue += r.revenue;
    }
    groups
        .into_iter()
        .map(|((campaign_id, day), a)| {
            let spend = max_bid(&campaign_id)
                .filter(|b| b.is_finite() && *b >= 0.0)
                .map(|bid| a.clicks as f64 * bid);
            let roas = spend.filter(|s| *s > 0.0).map(|s| a.revenue / s);
            CampaignReportRow {
                campaign_id,
                day,
                impressions: a.impressions,
                clicks: a.clicks,
                ctr: rate(a.clicks, a.impressions),
                video_plays: a.plays,
                completion_rate: rate(a.completes, a.plays),
                product_impressions: a.product_impressions,
                product_clicks: a.product_clicks,
                carts_added: a.carts_added,
                attributed_orders: a.orders,
                revenue: a.revenue,
                spend,
                roas,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ads::AdReportRow;
    use crate::model::status::AdIdStatus;

    fn ad(campaign: &str, day: &str, impressions: u64, clicks: u64) -> AdReportRow {
        AdReportRow {
            campaign_id: campaign.into(),
            ad_id: format!("rm1.{campaign}.x"),
            day: day.into(),
            impressions,
            clicks,
            ctr: rate(clicks, impressions),
            not_billable_impressions: 7,
            not_billable_clicks: 7,
            ad_id_status: AdIdStatus::Foreign,
            ..AdReportRow::default()
        }
    }

    #[test]
    fn spend_is_billable_clicks_times_bid_and_roas_needs_spend() {
        let parts = CampaignParts {
            ads: vec![
                ad("a", "2026-11-18", 10, 2),
                ad("a", "2026-11-18", 10, 2),
                ad("b", "2026-11-18", 5, 0),
            ],
            cart_adds: vec![CartAddsRow {
                campaign_id: "c".into(),
                day: "2026-11-19".into(),
                carts_added: 3,
            }],
            sales: vec![
                CampaignSalesRow {
                    campaign_id: "a".into(),
                    day: "2026-11-18".into(),
                    orders: 2,
                    revenue: 12.0,
                },
                CampaignSalesRow {
                    campaign_id: "b".into(),
                    day: "2026-11-18".into(),
                    orders: 1,
                    revenue: 4.0,
                },
            ],
            ..CampaignParts::default()
        };
        let bid = |c: &str| match c {
            "a" => Some(1.5),
            "b" => Some(2.0),
            _ => None,
        };
        let r = report(&parts, bid);
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].impressions, r[0].clicks, r[0].ctr), (20, 4, 0.2));
        assert_eq!((r[0].spend, r[0].roas), (Some(6.0), Some(2.0)));
        assert_eq!(
            (r[1].spend, r[1].roas),
            (Some(0.0), None),
            "no division by 0"
        );
        assert_eq!((r[2].campaign_id.as_str(), r[2].carts_added), ("c", 3));
        assert_eq!((r[2].spend, r[2].roas), (None, None), "unknown bid");
    }
}
