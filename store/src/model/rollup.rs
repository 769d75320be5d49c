//! The products and ads reports read from the tallies (issue 26): one row per
//! campaign, creative (the ad the ad server served, not each served ad's id), catalog
//! and product (products) and period, the tallies of the buckets in the period summed.
//! A report costs the rows it returns times the buckets in its range, whatever the
//! events behind them. A drill-down by served ad id (`adId`) reads the stored facts
//! instead, over a short range ([`ProductRow::served`], [`AdRow::served`]).

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};

use super::ad_id_campaign::creative_of;
use super::ads::AdReportRow;
use super::campaigns::CartAddsRow;
use super::funnel::FunnelReportRow;
use super::periods::{Period, Periods};
use super::products::ProductReportRow;
use super::rate;
use super::status::AdIdStatus;
use super::tallies::views::ViewField;
use super::tallies::{Grain, Kind, Metric, Place, SummedTally};
use super::traffic::InvalidCounts;
use crate::model::FastMap;

/// One row of the products report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProductRow {
    /// Campaign.
    pub campaign_id: String,
    /// The creative the ad id names (`p:<code>` for a product ad, `banner`, a video's
    /// id; empty when the id names none).
    pub creative_id: String,
    /// The served ad id, in a drill-down (`adId`); empty in rows of the tallies.
    pub ad_id: String,
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
    /// The period's first local date, `YYYY-MM-DD`.
    pub day: String,
    /// The period's first local instant, RFC 3339 with the zone's offset.
    pub period_start: String,
    /// Valid impressions.
    pub impressions: u64,
    /// Valid clicks.
    pub clicks: u64,
    /// clicks / impressions (0 without impressions).
    pub ctr: f64,
    /// The worst ad id status among the row's events.
    pub ad_id_status: AdIdStatus,
    /// Invalid impressions by reason.
    pub invalid_impressions: InvalidCounts,
    /// Invalid clicks by reason.
    pub invalid_clicks: InvalidCounts,
}

/// One row of the ads report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdRow {
    /// Campaign.
    pub campaign_id: String,
    /// The creative the ad id names.
    pub creative_id: String,
    /// The served ad id, in a drill-down (`adId`); empty in rows of the tallies.
    pub ad_id: String,
    /// The period's first local date, `YYYY-MM-DD`.
    pub day: String,
    /// The period's first local instant, RFC 3339 with the zone's offset.
    pub period_start: String,
    /// Billable impressions.
    pub impressions: u64,
    /// Billable clicks.
    pub clicks: u64,
    /// clicks / impressions, billable only (0 without impressions).
    pub ctr: f64,
    /// Impressions that are not billable (every reason).
    pub not_billable_impressions: u64,
    /// Clicks that are not billable (every reason).
    pub not_billable_clicks: u64,
    /// The worst ad id status among the row's events.
    pub ad_id_status: AdIdStatus,
    /// Invalid impressions by reason.
    pub invalid_impressions: InvalidCounts,
    /// Invalid clicks by reason.
    pub invalid_clicks: InvalidCounts,
}

/// The counts of one row as its tallies add up.
#[derive(Debug, Default, Clone)]
struct Acc {
    impressions: u64,
    clicks: u64,
    invalid_impressions: InvalidCounts,
    invalid_clicks: InvalidCounts,
    worst: AdIdStatus,
}

impl Acc {
    fn add(&mut self, metric: Metric, n: u64) {
        match metric {
            Metric::Events(k, None) if is_impression(k) => self.impressions += n,
            Metric::Events(_, None) => self.clicks += n,
            Metric::Events(k, Some(why)) if is_impression(k) => {
                self.invalid_impressions.add(why, n)
            }
            Metric::Events(_, Some(why)) => self.invalid_clicks.add(why, n),
            Metric::Status(_, s) if n > 0 => self.worst = self.worst.max(s),
            Metric::Status(..)
            | Metric::View(_)
            | Metric::Cart(_)
            | Metric::Sale(_)
            | Metric::Backfilled
            | Metric::SalesBackfilled
            | Metric::CartsBackfilled
            | Metric::LinesBackfilled
            | Metric::ZonesBackfilled
            | Metric::HoursBackfilled
            | Metric::Progress => {}
        }
    }

    fn is_empty(&self) -> bool {
        self.impressions
            + self.clicks
            + self.invalid_impressions.total()
            + self.invalid_clicks.total()
            == 0
    }
}

fn is_impression(k: Kind) -> bool {
    matches!(k, Kind::AdImpression | Kind::ProductImpression)
}

/// Each bucket's period, and each period's label, looked up once.
pub(crate) struct PeriodOf<'a> {
    periods: &'a Periods,
    seen: FastMap<(Grain, i32), Option<NaiveDateTime>>,
    labels: FastMap<NaiveDateTime, Period>,
}

impl<'a> PeriodOf<'a> {
    pub(crate) fn new(periods: &'a Periods) -> Self {
        Self {
            periods,
            seen: FastMap::default(),
            labels: FastMap::default(),
        }
    }

    /// How a period is shown ([`Periods::label`]).
    pub(crate) fn label(&mut self, period: NaiveDateTime) -> Period {
        let periods = self.periods;
        self.labels
            .entry(period)
            .or_insert_with(|| periods.label(period))
            .clone()
    }

    /// The period of a place's bucket (`None`: outside the range).
    pub(crate) fn of(&mut self, p: &Place) -> Option<NaiveDateTime> {
        let periods = self.periods;
        *self
            .seen
            .entry((p.grain, p.bucket))
            .or_insert_with(|| periods.period_of_bucket(p.grain, p.bucket))
    }
}

/// Row key: campaign, creative, catalog, product (borrowed from the tallies), the
/// period's local start.
type RowKey<'s> = (&'s str, &'s str, &'s str, &'s str, NaiveDateTime);

/// Sums tallies (of one scope and grain, as [`Periods::plan`] says) into rows per
/// place and period, for events of `kinds`; rows with nothing counted are left out.
fn sum_rows<'s>(
    summed: &'s [SummedTally],
    period_of: &mut PeriodOf<'_>,
    kinds: &[Kind],
) -> BTreeMap<RowKey<'s>, Acc> {
    // In key order: the rows come out sorted (a period's start follows its local start).
    let mut rows: BTreeMap<RowKey<'s>, Acc> = BTreeMap::new();
    for s in summed {
        let Some(kind) = s.metric.kind() else {
            continue;
        };
        if !kinds.contains(&kind) {
            continue;
        }
        let p = &s.place;
        let Some(period) = period_of.of(p) else {
            continue;
        };
        let n = u64::try_from(s.value).unwrap_or(0);
        rows.entry((
            p.campaign_id.as_str(),
            p.creative.as_str(),
            p.catalog_id.as_str(),
            p.product_code.as_str(),
            period,
        ))
        .or_default()
        .add(s.metric, n);
    }
    rows.retain(|_, a| !a.is_empty());
    rows
}

/// Orders rows by key, then period start (a period's label sorts as its start).
fn in_order<R>(mut rows: Vec<(RowKey<'_>, i64, R)>) -> Vec<R> {
    rows.sort_by(|a, b| {
        (&a.0 .0, &a.0 .1, &a.0 .2, &a.0 .3, a.1).cmp(&(&b.0 .0, &b.0 .1, &b.0 .2, &b.0 .3, b.1))
    });
    rows.into_iter().map(|(_, _, r)| r).collect()
}

/// The products report's rows from creative tallies of product events.
pub fn product_rows(summed: &[SummedTally], periods: &Periods) -> Vec<ProductRow> {
    let mut period_of = PeriodOf::new(periods);
    let rows = sum_rows(
        summed,
        &mut period_of,
        &[Kind::ProductImpression, Kind::ProductClick],
    );
    in_order(
        rows.into_iter()
            .map(|(k, a)| {
                let label = period_of.label(k.4);
                let row = ProductRow {
                    campaign_id: k.0.to_owned(),
                    creative_id: k.1.to_owned(),
                    ad_id: String::new(),
                    catalog_id: k.2.to_owned(),
                    product_code: k.3.to_owned(),
                    day: label.day,
                    period_start: label.start,
                    impressions: a.impressions,
                    clicks: a.clicks,
                    ctr: rate(a.clicks, a.impressions),
                    ad_id_status: a.worst,
                    invalid_impressions: a.invalid_impressions,
                    invalid_clicks: a.invalid_clicks,
                };
                (k, label.start_ms, row)
            })
            .collect(),
    )
}

/// The ads report's rows from creative tallies of ad events.
pub fn ad_rows(summed: &[SummedTally], periods: &Periods) -> Vec<AdRow> {
    let mut period_of = PeriodOf::new(periods);
    let rows = sum_rows(summed, &mut period_of, &[Kind::AdImpression, Kind::AdClick]);
    in_order(
        rows.into_iter()
            .map(|(k, a)| {
                let label = period_of.label(k.4);
                let row = AdRow {
                    campaign_id: k.0.to_owned(),
                    creative_id: k.1.to_owned(),
                    ad_id: String::new(),
                    day: label.day,
                    period_start: label.start,
                    impressions: a.impressions,
                    clicks: a.clicks,
                    ctr: rate(a.clicks, a.impressions),
                    not_billable_impressions: a.invalid_impressions.total(),
                    not_billable_clicks: a.invalid_clicks.total(),
                    ad_id_status: a.worst,
                    invalid_impressions: a.invalid_impressions,
                    invalid_clicks: a.invalid_clicks,
                };
                (k, label.start_ms, row)
            })
            .collect(),
    )
}

/// The video funnel's rows from the views' tallies (campaign or video scope): one
/// row per campaign, creative (the video id; empty at campaign scope) and period, its
/// `adId` empty; `impressions` is left 0 (the caller sets it from the ad tallies).
pub fn funnel_rows(summed: &[SummedTally], periods: &Periods) -> Vec<FunnelReportRow> {
    let mut period_of = PeriodOf::new(periods);
    let mut rows: FastMap<(&str, &str, NaiveDateTime), FunnelReportRow> = FastMap::default();
    for s in summed {
        let Metric::View(field) = s.metric else {
            continue;
        };
        let p = &s.place;
        let Some(period) = period_of.of(p) else {
            continue;
        };
        let n = u64::try_from(s.value).unwrap_or(0);
        if n == 0 {
            continue;
        }
        let row = rows
            .entry((p.campaign_id.as_str(), p.creative.as_str(), period))
            .or_insert_with(|| {
                let mut r = FunnelReportRow::new(
                    p.campaign_id.to_string(),
                    String::new(),
                    p.creative.to_string(),
                    0,
                );
                let label = period_of.label(period);
                r.day = label.day;
                r.period_start = label.start;
                r
            });
        add_view_count(row, field, n);
    }
    let mut out: Vec<(i64, FunnelReportRow)> = rows
        .into_iter()
        .map(|((_, _, period), r)| (period_of.label(period).start_ms, r.finish()))
        .collect();
    out.sort_by(|a, b| {
        (&a.1.campaign_id, &a.1.video_id, a.0).cmp(&(&b.1.campaign_id, &b.1.video_id, b.0))
    });
    out.into_iter().map(|(_, r)| r).collect()
}

/// Adds `n` of a view count to a funnel row.
fn add_view_count(r: &mut FunnelReportRow, field: ViewField, n: u64) {
    let slot = match field {
        ViewField::Views => &mut r.views,
        ViewField::CreativeViews => &mut r.creative_views,
        ViewField::Plays => &mut r.plays,
        ViewField::FirstQuartiles => &mut r.first_quartiles,
        ViewField::Midpoints => &mut r.midpoints,
        ViewField::ThirdQuartiles => &mut r.third_quartiles,
        ViewField::Completes => &mut r.completes,
        ViewField::Skips => &mut r.skips,
        ViewField::Pauses => &mut r.pauses,
        ViewField::Resumes => &mut r.resumes,
        ViewField::Mutes => &mut r.mutes,
        ViewField::Unmutes => &mut r.unmutes,
        ViewField::FunnelGaps => &mut r.funnel_gap_violations,
        ViewField::RepeatedMilestones => &mut r.repeated_milestone_violations,
        ViewField::InvalidViews => &mut r.invalid_views,
        ViewField::InvalidPlays => &mut r.invalid_plays,
        ViewField::Expired | ViewField::BadSignature | ViewField::Foreign => {
            if let Some(s) = field.status() {
                r.ad_id_status = r.ad_id_status.max(s);
            }
            return;
        }
    };
    *slot += n;
}

/// What a row of a period carries in its `day`: the period's first local day, or
/// its first instant (RFC 3339 with the zone's offset: distinct per period, and in
/// the periods' order as text), which the campaign summary groups its parts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// `YYYY-MM-DD`.
    Day,
    /// The period's start.
    Start,
}

impl Label {
    /// The part of a period's label this one is.
    pub fn of(self, l: Period) -> String {
        match self {
            Self::Day => l.day,
            Self::Start => l.start,
        }
    }
}

/// The campaign summary's cart adds from the campaign tallies: one row per campaign
/// and period (`day` its label).
pub fn cart_adds_rows(summed: &[SummedTally], periods: &Periods) -> Vec<CartAddsRow> {
    cart_adds_labelled(summed, periods, Label::Day)
}

/// As [`cart_adds_rows`], `day` labelled by `label`.
pub fn cart_adds_labelled(
    summed: &[SummedTally],
    periods: &Periods,
    label: Label,
) -> Vec<CartAddsRow> {
    let mut period_of = PeriodOf::new(periods);
    let mut rows: FastMap<(&str, NaiveDateTime), [u64; 2]> = FastMap::default();
    for s in summed {
        let Metric::Cart(field) = s.metric else {
            continue;
        };
        let p = &s.place;
        let Some(period) = period_of.of(p) else {
            continue;
        };
        rows.entry((p.campaign_id.as_str(), period)).or_default()[field.index()] +=
            u64::try_from(s.value).unwrap_or(0);
    }
    let mut rows: Vec<_> = rows
        .into_iter()
        .filter(|(_, n)| n.iter().any(|n| *n > 0))
        .collect();
    rows.sort_unstable_by_key(|(key, _)| *key);
    rows.into_iter()
        .map(|((campaign_id, period), n)| CartAddsRow {
            campaign_id: campaign_id.to_owned(),
            day: label.of(period_of.label(period)),
            carts_added: n[0],
            invalid_carts_added: n[1],
        })
        .collect()
}

/// The campaign summary's ads and products parts from campaign tallies: one row per
/// campaign and period, `day` the period's start ([`Label::Start`], so the summary
/// groups by period, hours apart).
pub fn campaign_parts(
    summed: &[SummedTally],
    periods: &Periods,
) -> (Vec<AdReportRow>, Vec<ProductReportRow>) {
    let ads = ad_rows(summed, periods)
        .into_iter()
        .map(|r| AdReportRow {
            campaign_id: r.campaign_id,
            ad_id: String::new(),
            day: r.period_start,
            impressions: r.impressions,
            clicks: r.clicks,
            ctr: r.ctr,
            not_billable_impressions: r.not_billable_impressions,
            not_billable_clicks: r.not_billable_clicks,
            ad_id_status: r.ad_id_status,
            invalid_impressions: r.invalid_impressions,
            invalid_clicks: r.invalid_clicks,
        })
        .collect();
    let products = product_rows(summed, periods)
        .into_iter()
        .map(|r| ProductReportRow {
            campaign_id: r.campaign_id,
            ad_id: String::new(),
            catalog_id: r.catalog_id,
            product_code: r.product_code,
            day: r.period_start,
            impressions: r.impressions,
            clicks: r.clicks,
            ctr: r.ctr,
            ad_id_status: r.ad_id_status,
            invalid_impressions: r.invalid_impressions,
            invalid_clicks: r.invalid_clicks,
        })
        .collect();
    (ads, products)
}

/// The UTC-midnight RFC 3339 start of a fact row's day.
fn utc_start(day: &str) -> String {
    format!("{day}T00:00:00Z")
}

impl ProductRow {
    /// A drill-down row: the stored facts' row of one served ad and UTC day.
    pub fn served(r: ProductReportRow) -> Self {
        Self {
            creative_id: creative_of(&r.ad_id),
            period_start: utc_start(&r.day),
            campaign_id: r.campaign_id,
            ad_id: r.ad_id,
            catalog_id: r.catalog_id,
            product_code: r.product_code,
            day: r.day,
            impressions: r.impressions,
            clicks: r.clicks,
            ctr: r.ctr,
            ad_id_status: r.ad_id_status,
            invalid_impressions: r.invalid_impressions,
            invalid_clicks: r.invalid_clicks,
        }
    }
}

impl AdRow {
    /// A drill-down row: the stored facts' row of one served ad and UTC day.
    pub fn served(r: AdReportRow) -> Self {
        Self {
            creative_id: creative_of(&r.ad_id),
            period_start: utc_start(&r.day),
            campaign_id: r.campaign_id,
            ad_id: r.ad_id,
            day: r.day,
            impressions: r.impressions,
            clicks: r.clicks,
            ctr: r.ctr,
            not_billable_impressions: r.not_billable_impressions,
            not_billable_clicks: r.not_billable_clicks,
            ad_id_status: r.ad_id_status,
            invalid_impressions: r.invalid_impressions,
            invalid_clicks: r.invalid_clicks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::periods::{zone, Granularity};
    use crate::model::tallies::{Grain, Place, Scope};
    use crate::model::traffic::Invalid;

    fn tally(grain: Grain, bucket: i32, metric: Metric, value: i64) -> SummedTally {
        SummedTally {
            place: Place {
                campaign_id: "c".into(),
                scope: Scope::Creative,
                grain,
                bucket,
                creative: "p:sku".into(),
                catalog_id: "cat".into(),
                product_code: "sku".into(),
                partition: 0,
            },
            metric,
            value,
        }
    }

    #[test]
    fn quarters_sum_into_local_days_and_statuses_into_the_worst() {
        let day = crate::model::parse_day("2026-11-26").expect("day");
        let q0 = day * 96;
        let rows = [
            // 18:15 UTC on the 25th: the 25th in Kolkata (+05:30 makes it 23:45).
            tally(
                Grain::Quarter,
                q0 - 23,
                Metric::Events(Kind::ProductImpression, None),
                2,
            ),
            // 18:30 UTC: midnight of the 26th in Kolkata.
            tally(
                Grain::Quarter,
                q0 - 22,
                Metric::Events(Kind::ProductImpression, None),
                3,
            ),
            tally(
                Grain::Quarter,
                q0 + 40,
                Metric::Events(Kind::ProductClick, None),
                1,
            ),
            tally(
                Grain::Quarter,
                q0 + 41,
                Metric::Events(Kind::ProductClick, Some(Invalid::ServedAdRepeat)),
                4,
            ),
            tally(
                Grain::Quarter,
                q0 + 41,
                Metric::Status(Kind::ProductClick, AdIdStatus::Expired),
                0,
            ),
            tally(
                Grain::Quarter,
                q0 + 41,
                Metric::Events(Kind::AdClick, None),
                9,
            ),
        ];
        let kolkata = zone("Asia/Kolkata").expect("zone");
        let p = Periods::new(kolkata, Granularity::Day, day - 1, day);
        let got = product_rows(&rows, &p);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!((got[0].day.as_str(), got[0].impressions), ("2026-11-25", 2));
        assert_eq!(
            (got[1].day.as_str(), got[1].impressions, got[1].clicks),
            ("2026-11-26", 3, 1)
        );
        assert_eq!(got[1].invalid_clicks.served_ad_repeat, 4);
        assert_eq!(
            got[1].ad_id_status,
            AdIdStatus::Verified,
            "a zero status counts nothing"
        );
        assert_eq!(got[1].period_start, "2026-11-26T00:00:00+05:30");
        assert_eq!(got[1].ctr, 1.0 / 3.0);
        let summary = Periods::new(kolkata, Granularity::Summary, day - 1, day);
        let one = product_rows(&rows, &summary);
        assert_eq!((one.len(), one[0].impressions), (1, 5));
        assert_eq!(ad_rows(&rows, &summary)[0].clicks, 9);
    }
}
