//! The campaign summary: one row per campaign and day, rolled up from the other
//! reports (pure; `GET /v1/reports/campaigns`).
//!
//! | column | from |
//! |---|---|
//! | `impressions`, `clicks`, `ctr` | the ad report's billable counts ([`super::ads`]) |
//! | `videoPlays`, `completionRate` | the video funnel: plays, completes / plays |
//! | `productImpressions`, `productClicks` | the product report |
//! | `cartsAdded` | cart adds caused by the campaign's ads, on the day of the add |
//! | `attributedOrders`, `revenue` | sales attribution: distinct orders with a line credited to the campaign, by the order's day, and those lines' revenue (exact, a decimal string) |
//! | `currency` | the currency of `revenue` and `spend` (ISO 4217): the campaign's (its `maxBid`'s) |
//! | `spend` | billable clicks x the campaign's `maxBid`, exact, a decimal string; `null` when the bid is unknown |
//! | `roas` | revenue / spend to 6 decimals (`rm_schemas::money::roas`); `null` when spend is `null` or 0, or in another currency |
//!
//! A campaign appears on a day when any part has a row for it that day. Rows are
//! sorted by campaign and day.
//!
//! **Currencies.** Amounts of two currencies never add. A row is in the campaign's
//! currency (its bid's; without a known bid, that of its sales, USD without either).
//! Credited sales in another currency (an order in EUR credited to a USD campaign)
//! are on a row of their own after it: same campaign and day, that `currency`, its
//! `attributedOrders` and `revenue`, every count 0 and `spend`/`roas` `null` (the
//! spend is in the campaign's currency, so no ROAS can be taken against it).

use std::collections::BTreeMap;

use rm_schemas::money::{self, Currency, Money};
use rust_decimal::Decimal;
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
    /// Adds (a cart line going from 0 units to more) by events of verified ad ids.
    pub carts_added: u64,
    /// Adds by events whose ad id did not verify (not in `carts_added`).
    #[serde(default)]
    pub invalid_carts_added: u64,
}

/// Attributed sales per credited campaign, order day and currency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CampaignSalesRow {
    /// Campaign credited.
    pub campaign_id: String,
    /// UTC day of the orders, `YYYY-MM-DD`.
    pub day: String,
    /// Distinct orders with at least one line credited to the campaign.
    pub orders: u64,
    /// Revenue of those lines, exact.
    #[serde(with = "money::decimal_text")]
    pub revenue: Decimal,
    /// The orders' currency.
    pub currency: Currency,
}

/// One row of the campaign summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CampaignReportRow {
    /// Campaign.
    pub campaign_id: String,
    /// The period's first local day, `YYYY-MM-DD`.
    pub day: String,
    /// The period's first instant, RFC 3339 with the zone's offset.
    #[serde(default)]
    pub period_start: String,
    /// Billable ad impressions.
    pub impressions: u64,
    /// Billable ad clicks.
    pub clicks: u64,
    /// clicks / impressions (0 without impressions).
    pub ctr: f64,
    /// Ad impressions that are not billable (every invalid reason: the ads report's).
    #[serde(default)]
    pub not_billable_impressions: u64,
    /// Ad clicks that are not billable.
    #[serde(default)]
    pub not_billable_clicks: u64,
    /// Video views that reached play, of verified ad ids.
    pub video_plays: u64,
    /// Video views that reached play whose ad id did not verify (not in
    /// `videoPlays` nor in `completionRate`).
    #[serde(default)]
    pub invalid_video_plays: u64,
    /// Completes / plays (0 without plays).
    pub completion_rate: f64,
    /// Product impressions.
    pub product_impressions: u64,
    /// Product clicks.
    pub product_clicks: u64,
    /// Carts added by events of verified ad ids.
    pub carts_added: u64,
    /// Carts added by events whose ad id did not verify (not in `cartsAdded`).
    #[serde(default)]
    pub invalid_carts_added: u64,
    /// Distinct orders credited to the campaign (in the row's currency).
    pub attributed_orders: u64,
    /// Revenue of the credited lines in the row's currency, exact (`"59.97"`).
    #[serde(with = "money::decimal_text")]
    pub revenue: Decimal,
    /// The currency of `revenue` and `spend`.
    pub currency: Currency,
    /// clicks x maxBid, exact; `None` when the bid is unknown (or on a row of sales
    /// in another currency than the campaign's).
    #[serde(with = "money::optional_decimal_text")]
    pub spend: Option<Decimal>,
    /// revenue / spend to 6 decimals, a JSON number; `None` when spend is `None` or 0.
    #[serde(with = "money::ratio_number")]
    pub roas: Option<Decimal>,
}

#[derive(Default)]
struct Acc {
    impressions: u64,
    clicks: u64,
    not_billable_impressions: u64,
    not_billable_clicks: u64,
    invalid_carts_added: u64,
    plays: u64,
    invalid_plays: u64,
    completes: u64,
    product_impressions: u64,
    product_clicks: u64,
    carts_added: u64,
    /// Orders and revenue per currency.
    sales: BTreeMap<Currency, (u64, Decimal)>,
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

/// Rolls the parts up per campaign and day (and currency, module header); `max_bid`
/// gives a campaign's bid per click.
pub fn report(
    parts: &CampaignParts,
    max_bid: impl Fn(&str) -> Option<Money>,
) -> Vec<CampaignReportRow> {
    let mut groups: BTreeMap<(String, String), Acc> = BTreeMap::new();
    fn entry<'m>(g: &'m mut BTreeMap<(String, String), Acc>, c: &str, d: &str) -> &'m mut Acc {
        g.entry((c.to_owned(), d.to_owned())).or_default()
    }
    for r in &parts.ads {
        let a = entry(&mut groups, &r.campaign_id, &r.day);
        a.impressions += r.impressions;
        a.clicks += r.clicks;
        a.not_billable_impressions += r.not_billable_impressions;
        a.not_billable_clicks += r.not_billable_clicks;
    }
    for r in &parts.funnel {
        let a = entry(&mut groups, &r.campaign_id, &r.day);
        // The funnel counts views of verified ad ids only (anyone can fire one of an
        // id that is not ours with `curl`); the others beside.
        a.plays += r.plays;
        a.completes += r.completes;
        a.invalid_plays += r.invalid_plays;
    }
    for r in &parts.products {
        let a = entry(&mut groups, &r.campaign_id, &r.day);
        a.product_impressions += r.impressions;
        a.product_clicks += r.clicks;
    }
    for r in &parts.cart_adds {
        let a = entry(&mut groups, &r.campaign_id, &r.day);
        a.carts_added += r.carts_added;
        a.invalid_carts_added += r.invalid_carts_added;
    }
    for r in &parts.sales {
        let a = entry(&mut groups, &r.campaign_id, &r.day);
        let s = a.sales.entry(r.currency).or_default();
        s.0 += r.orders;
        s.1 = super::attribution::add(s.1, r.revenue);
    }
    let mut out = Vec::with_capacity(groups.len());
    for ((campaign_id, day), mut a) in groups {
        let bid = max_bid(&campaign_id);
        let currency = bid
            .map(|b| b.currency)
            .or_else(|| a.sales.keys().next().copied())
            .unwrap_or(money::DEFAULT_CURRENCY);
        let (orders, revenue) = a.sales.remove(&currency).unwrap_or_default();
        let revenue = money::stable(revenue, currency);
        // Exact, or unknown beyond an exact decimal (never a real spend).
        let spend = bid.and_then(|b| b.times(a.clicks).ok());
        let roas = spend.and_then(|s| money::roas(Money::new(revenue, currency), s));
        let row = CampaignReportRow {
            campaign_id,
            period_start: format!("{day}T00:00:00Z"),
            day,
            impressions: a.impressions,
            clicks: a.clicks,
            ctr: rate(a.clicks, a.impressions),
            not_billable_impressions: a.not_billable_impressions,
            not_billable_clicks: a.not_billable_clicks,
            video_plays: a.plays,
            invalid_video_plays: a.invalid_plays,
            completion_rate: rate(a.completes, a.plays),
            product_impressions: a.product_impressions,
            product_clicks: a.product_clicks,
            carts_added: a.carts_added,
            invalid_carts_added: a.invalid_carts_added,
            attributed_orders: orders,
            revenue,
            currency,
            spend: spend.map(|s| money::stable(s.amount, currency)),
            roas,
        };
        // Sales in other currencies: rows of their own, never added to this one.
        let others: Vec<CampaignReportRow> = a
            .sales
            .into_iter()
            .map(|(currency, (orders, revenue))| CampaignReportRow {
                impressions: 0,
                clicks: 0,
                ctr: 0.0,
                not_billable_impressions: 0,
                not_billable_clicks: 0,
                video_plays: 0,
                invalid_video_plays: 0,
                completion_rate: 0.0,
                product_impressions: 0,
                product_clicks: 0,
                carts_added: 0,
                invalid_carts_added: 0,
                attributed_orders: orders,
                revenue: money::stable(revenue, currency),
                currency,
                spend: None,
                roas: None,
                ..row.clone()
            })
            .collect();
        out.push(row);
        out.extend(others);
    }
    out
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
                invalid_carts_added: 2,
            }],
            sales: vec![
                CampaignSalesRow {
                    campaign_id: "a".into(),
                    day: "2026-11-18".into(),
                    orders: 2,
                    revenue: dec("12.0"),
                    currency: USD,
                },
                CampaignSalesRow {
                    campaign_id: "b".into(),
                    day: "2026-11-18".into(),
                    orders: 1,
                    revenue: dec("4"),
                    currency: USD,
                },
            ],
            ..CampaignParts::default()
        };
        let bid = |c: &str| match c {
            "a" => Some(usd("$1.5")),
            "b" => Some(usd("$2")),
            _ => None,
        };
        let r = report(&parts, bid);
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].impressions, r[0].clicks, r[0].ctr), (20, 4, 0.2));
        assert_eq!((r[0].spend, r[0].roas), (Some(dec("6.0")), Some(dec("2"))));
        assert_eq!(
            (r[1].spend, r[1].roas),
            (Some(dec("0")), None),
            "no division by 0"
        );
        assert_eq!((r[2].campaign_id.as_str(), r[2].carts_added), ("c", 3));
        assert_eq!(r[2].invalid_carts_added, 2, "beside, not in, cartsAdded");
        // The ads rows' not billable events, beside the billable ones: 7 per row.
        assert_eq!(
            (r[0].not_billable_impressions, r[0].not_billable_clicks),
            (14, 14)
        );
        assert_eq!((r[2].spend, r[2].roas), (None, None), "unknown bid");
        let json = serde_json::to_value(&r[0]).expect("json");
        assert_eq!(
            (
                &json["revenue"],
                &json["currency"],
                &json["spend"],
                &json["roas"]
            ),
            (
                &serde_json::json!("12.00"),
                &serde_json::json!("USD"),
                &serde_json::json!("6.00"),
                &serde_json::json!(2.0)
            )
        );
        assert_eq!(
            serde_json::to_value(&r[2]).expect("json")["spend"],
            serde_json::Value::Null
        );
    }

    fn dec(s: &str) -> Decimal {
        Decimal::from_str_exact(s).expect("decimal")
    }

    fn usd(s: &str) -> Money {
        Money::parse(s, USD).expect("money").expect("amount")
    }

    const USD: Currency = money::DEFAULT_CURRENCY;

    #[test]
    fn sales_in_another_currency_are_a_row_of_their_own() {
        let eur = Currency::from_code("EUR").expect("eur");
        let sale = |orders: u64, revenue: &str, currency| CampaignSalesRow {
            campaign_id: "a".into(),
            day: "2026-11-18".into(),
            orders,
            revenue: dec(revenue),
            currency,
        };
        let parts = CampaignParts {
            ads: vec![ad("a", "2026-11-18", 100, 3)],
            sales: vec![sale(3, "59.97", USD), sale(1, "10", eur)],
            ..CampaignParts::default()
        };
        let r = report(&parts, |_| Some(usd("$0.10")));
        assert_eq!(r.len(), 2, "{r:?}");
        let (own, other) = (&r[0], &r[1]);
        assert_eq!(
            (own.currency, own.revenue, own.spend, own.roas, own.clicks),
            (USD, dec("59.97"), Some(dec("0.30")), Some(dec("199.9")), 3)
        );
        assert_eq!(
            (other.currency, other.revenue, other.spend, other.roas),
            (eur, dec("10"), None, None)
        );
        assert_eq!(
            (other.clicks, other.attributed_orders),
            (0, 1),
            "counts once"
        );
        // A EUR campaign: its ROAS is over its EUR revenue only.
        let r = report(&parts, |_| Some(usd("EUR 1")));
        assert_eq!(
            (r[0].currency, r[0].revenue, r[0].roas),
            (eur, dec("10"), Some(dec("3.333333")))
        );
        assert_eq!(
            (r[1].currency, r[1].revenue, r[1].roas),
            (USD, dec("59.97"), None)
        );
    }
}
