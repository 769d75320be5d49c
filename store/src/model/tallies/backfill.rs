//! Counting stored facts into tallies: the backfill of a store written before
//! tallies, and `retail-media rebuild`. Each distinct fact counts once, as the fact
//! reports count it (its best copy's reason and status, its earliest copy's time,
//! clicks through the click window as those reports apply it: facts stored before
//! the served-ad rules were never judged by them), in its three places under
//! [`BACKFILL_PARTITION`]; each stored view's row counts as the funnel report counts
//! it, and the cart adds as the campaign summary's fact report counted them. The
//! quarter hours of campaigns and videos are the zones' backfill's
//! ([`super::zones`]), which follows this one.

use std::collections::BTreeMap;

use super::carts::{self, CartField};
use super::moves::{places, Event};
use super::views;
use super::{Kind, Metric, Tally, TallyKey, BACKFILL_PARTITION};
use crate::model::ad_id_campaign::creative_of;
use crate::model::ads::{self, AdAction, AdFact, AdGroup};
use crate::model::campaigns::CartAddsRow;
use crate::model::funnel::ViewRow;
use crate::model::products::{self, ProductAction, ProductFact};
use crate::model::status::AdIdStatus;
use crate::model::traffic::{self, ClickFact, ClickWindow, Invalid};

/// Counts per tally, built a store's facts at a time.
#[derive(Debug, Default)]
pub struct Counts(BTreeMap<TallyKey, i64>);

impl Counts {
    fn add(&mut self, e: &Event<'_>, why: Option<Invalid>, status: AdIdStatus, time_ms: i64) {
        let metrics = [
            Some(Metric::Events(e.kind, why)),
            (status != AdIdStatus::Verified).then_some(Metric::Status(e.kind, status)),
        ];
        for place in places(e, time_ms, BACKFILL_PARTITION) {
            for metric in metrics.into_iter().flatten() {
                *self
                    .0
                    .entry(TallyKey {
                        place: place.clone(),
                        metric,
                    })
                    .or_default() += 1;
            }
        }
    }

    /// Counts copies of ad facts (every copy of each fact among them).
    pub fn ads(&mut self, copies: &[AdFact], window: ClickWindow) {
        let resolved = ads::resolve(copies);
        let (clicks, impressions): (Vec<_>, Vec<_>) = resolved
            .into_iter()
            .partition(|f| f.action == AdAction::Click);
        for f in impressions {
            let why = traffic::reason(f.traffic, f.status);
            self.ad(&f.group, Kind::AdImpression, why, f.status, f.time_ms);
        }
        let judged: Vec<ClickFact<AdGroup>> = clicks
            .iter()
            .map(|f| ClickFact {
                group: f.group.clone(),
                shopper: f.shopper,
                dedup_key: f.dedup_key,
                status: f.status,
                traffic: f.traffic,
                received_ms: f.received_ms,
            })
            .collect();
        let verdicts = traffic::click_verdicts(&judged, window);
        for (f, why) in clicks.iter().zip(verdicts) {
            self.ad(&f.group, Kind::AdClick, why, f.status, f.time_ms);
        }
    }

    fn ad(&mut self, g: &AdGroup, kind: Kind, why: Option<Invalid>, s: AdIdStatus, t: i64) {
        let creative = creative_of(&g.ad_id);
        let e = Event {
            kind,
            campaign_id: &g.campaign_id,
            creative: &creative,
            catalog_id: "",
            product_code: "",
        };
        self.add(&e, why, s, t);
    }

    /// Counts copies of product facts (every copy of each fact among them).
    pub fn products(&mut self, copies: &[ProductFact], window: ClickWindow) {
        let distinct = products::distinct(copies);
        let clicks: Vec<&products::DistinctProductFact<'_>> = distinct
            .iter()
            .filter(|d| d.action == ProductAction::Click)
            .collect();
        let judged: Vec<ClickFact<&products::ProductGroup>> = clicks
            .iter()
            .map(|d| ClickFact {
                group: d.group,
                shopper: d.shopper,
                dedup_key: d.dedup_key,
                status: d.status,
                traffic: d.traffic,
                received_ms: d.received_ms,
            })
            .collect();
        let verdicts = traffic::click_verdicts(&judged, window);
        let mut click_why = verdicts.into_iter();
        for d in &distinct {
            let (kind, why) = match d.action {
                ProductAction::Impression => (
                    Kind::ProductImpression,
                    traffic::reason(d.traffic, d.status),
                ),
                ProductAction::Click => (Kind::ProductClick, click_why.next().flatten()),
            };
            let creative = creative_of(&d.group.ad_id);
            let e = Event {
                kind,
                campaign_id: &d.group.campaign_id,
                creative: &creative,
                catalog_id: &d.group.catalog_id,
                product_code: &d.group.product_code,
            };
            self.add(&e, why, d.status, d.time_ms);
        }
    }

    /// Counts stored views' rows (each as the funnel report counts it) on their
    /// days (the zones' backfill counts their quarter hours, [`super::zones`]).
    pub fn views<'a>(&mut self, rows: impl IntoIterator<Item = &'a ViewRow>) {
        for row in rows {
            let first_ms = super::Grain::Day.start_ms(row.day);
            let v = views::Counted { row, first_ms };
            for (key, n) in views::moves(None, v, BACKFILL_PARTITION) {
                *self.0.entry(key).or_default() += n;
            }
        }
    }

    /// Counts stored cart adds per campaign and UTC day (the fact report's rows).
    pub fn cart_adds(&mut self, rows: &[CartAddsRow]) {
        for r in rows {
            let Some(day) = crate::model::parse_day(&r.day) else {
                continue;
            };
            for (field, n) in [
                (CartField::Added, r.carts_added),
                (CartField::InvalidAdded, r.invalid_carts_added),
            ] {
                if n > 0 {
                    let key = TallyKey {
                        place: carts::place(&r.campaign_id, day, BACKFILL_PARTITION),
                        metric: Metric::Cart(field),
                    };
                    *self.0.entry(key).or_default() += i64::try_from(n).unwrap_or(i64::MAX);
                }
            }
        }
    }

    /// The rows to write (stamp 0, under [`BACKFILL_PARTITION`]); the marker is
    /// [`super::marker_row`], written after them. The quarter hours of campaigns and
    /// videos are left to the zones' backfill, which runs after this one
    /// ([`super::zones`]: it counts them from the creatives' quarter hours this one
    /// writes, and from the stored views with their facts' times).
    pub fn rows(self) -> Vec<(TallyKey, Tally)> {
        self.0
            .into_iter()
            .filter(|(k, _)| !super::hours::counted_by_a_later_backfill(&k.place))
            .map(|(k, value)| (k, Tally { value, stamp: 0 }))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tallies::{sum, Grain, Scope};
    use crate::model::traffic::TrafficClass;

    #[test]
    fn facts_count_as_the_reports_count_them() {
        let keys = rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-key".to_vec()])
            .expect("a valid key");
        let ad = keys.mint("c", "banner", 2_000_000_000).expect("an id");
        let copy = |action, key, time_ms, traffic| AdFact {
            campaign_id: "c".into(),
            ad_id: ad.clone(),
            action,
            dedup_key: key,
            time_ms,
            status: AdIdStatus::Verified,
            traffic,
            shopper: 1,
            received_ms: 1_000 + time_ms,
        };
        let copies = [
            copy(AdAction::Impression, 1, 5_000, TrafficClass::Prefetch),
            copy(AdAction::Impression, 1, 9_000, TrafficClass::Valid),
            copy(AdAction::Click, 2, 10_000, TrafficClass::Valid),
            copy(AdAction::Click, 3, 11_000, TrafficClass::Valid), // within the window
        ];
        let mut c = Counts::default();
        c.ads(&copies, ClickWindow::default());
        let rows = c.rows();
        let summed = sum(rows.iter().map(|(k, t)| (k, t)));
        let at = |scope, metric| {
            summed
                .iter()
                .filter(|s| {
                    s.place.scope == scope && s.place.grain == Grain::Day && s.metric == metric
                })
                .map(|s| (s.place.creative.to_string(), s.value))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            at(Scope::Campaign, Metric::Events(Kind::AdImpression, None)),
            [(String::new(), 1)],
            "the best copy is the browser's"
        );
        assert_eq!(
            at(Scope::Creative, Metric::BILLABLE_CLICKS),
            [("banner".to_owned(), 1)]
        );
        assert_eq!(
            at(
                Scope::Creative,
                Metric::Events(Kind::AdClick, Some(Invalid::ClickWindow))
            ),
            [("banner".to_owned(), 1)]
        );
        assert!(rows
            .iter()
            .all(|(k, _)| k.place.partition == BACKFILL_PARTITION));
    }
}
