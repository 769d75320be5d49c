//! Attribution as orders arrive (issue 26, item 4): an order is an entity whose state
//! is its lines and each line's credit ([`OrderCredits`]); the sales sums move as that
//! state changes. Pure: the aggregator's fold and the backfill both count through it.
//!
//! **Decided by one writer, from records alone.** Orders are keyed by order id, so one
//! consumer owns each order's state; touches live on other partitions (events are
//! keyed by ad id). They meet through the log: once a batch's writes land, the
//! aggregator looks up, for each new order, the touches of its shoppers the windows
//! allow, and for each new touch, the stored orders of its shoppers it could credit,
//! and appends an [`Offer`] (this touch, for that order) to the orders topic, keyed by
//! the order's id, before it commits the batch's offsets. The owner applies offers to
//! the state ([`OrderCredits::offer`]): a line's credit is the best eligible touch
//! ([`attribution::beats`], a total order), so applying offers in any order, any
//! number of times, gives the credit [`attribution::attribute`] gives over all of
//! them. Nothing the owner does depends on the store's contents at fold time, so the
//! crash argument of every tally holds unchanged (a replayed record decides as the
//! first time, and is at or below its tallies' stamps).
//!
//! **Why no touch is missed.** Each side writes, then reads the other: the order's
//! lines (and its shoppers' index) are written before its touches are looked up; a
//! touch is written before its shoppers' orders are looked up. With a store that
//! shows a completed write to every later read (both backends), whichever lookup
//! runs second sees the other's write, so every (order, touch) pair that can credit
//! is offered at least once. A lookup the crash interrupted is run again: the batch
//! is replayed, because its offsets are committed after the offers are appended.
//!
//! **What is counted** ([`SaleField`], at [`Scope::Sales`]: per credited campaign
//! ("" unattributed), catalog (scoped by the order's namespace), product, UTC day
//! of the order and currency, kept in the place's `creative` column; and at
//! [`Scope::CampaignSales`]: per credited campaign, UTC day and quarter hour (the
//! campaign summary in any zone) and currency, attributed lines
//! only): distinct orders with a line there, units, revenue (exact: whole units and
//! the eighth-decimal remainder, two integers), and lines credited to a click and to
//! an impression. The windows are applied when the credit is decided: a window
//! change applies to orders decided after it.

use std::collections::BTreeMap;

use rm_schemas::money::{Currency, Decimal};
use serde::{Deserialize, Serialize};

use super::page::PlaceKey;
use super::{Grain, Metric, Place, Scope, SummedTally, TallyKey};
use crate::model::attribution::{self, Credit, OrderLine, Touch, Windows};
use crate::model::campaigns::CampaignSalesRow;

/// A count of the sales sums (stored: [`Metric::Sale`] codes are `224 + index in`
/// [`SaleField::ALL`]; never reorder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SaleField {
    /// Distinct orders with a line at the place.
    Orders,
    /// Units of the lines.
    Units,
    /// Revenue, whole units (floor of the amount).
    RevenueWhole,
    /// Revenue, the remainder in units of 10^-8 (`0..10^8` per line).
    RevenueE8,
    /// Lines credited to a click.
    ClickAttributions,
    /// Lines credited to an impression.
    ViewAttributions,
}

impl SaleField {
    /// Every field, in code order.
    pub const ALL: [SaleField; 6] = [
        Self::Orders,
        Self::Units,
        Self::RevenueWhole,
        Self::RevenueE8,
        Self::ClickAttributions,
        Self::ViewAttributions,
    ];

    /// Its index in [`Self::ALL`].
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|f| *f == self).unwrap_or(0)
    }
}

/// 10^8: revenue's remainder unit ([`rm_schemas::money::MAX_SCALE`] decimals).
const E8: i128 = 100_000_000;

/// An amount as (whole units, remainder in 10^-8), exact for every stored amount.
pub fn split_amount(amount: Decimal) -> (i64, i64) {
    let mut d = amount;
    d.rescale(8);
    let m = d.mantissa();
    (
        i64::try_from(m.div_euclid(E8)).unwrap_or(i64::MAX),
        m.rem_euclid(E8) as i64,
    )
}

/// The amount of summed (whole, remainder) parts.
pub fn join_amount(whole: i64, e8: i64) -> Decimal {
    let m = i128::from(whole) * E8 + i128::from(e8);
    Decimal::try_from_i128_with_scale(m, 8)
        .map(|d| d.normalize())
        .unwrap_or(Decimal::MAX)
}

/// One line of an order with its credit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreditedLine {
    /// The line.
    pub line: OrderLine,
    /// Its best touch so far and how it credits (`None`: unattributed).
    pub credit: Option<(Touch, Credit)>,
}

/// An order's state: its lines and their credits, changed only by [`Self::offer`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderCredits {
    /// Changes applied (a store keeps the highest).
    pub version: u64,
    /// Every line, in line order.
    pub lines: Vec<CreditedLine>,
}

/// Tag of the stored encoding (postcard after it).
const STATE_V1: u8 = 1;

impl OrderCredits {
    /// A new order: every line unattributed.
    pub fn new(lines: &[OrderLine]) -> Self {
        let mut lines: Vec<CreditedLine> = lines
            .iter()
            .map(|l| CreditedLine {
                line: l.clone(),
                credit: None,
            })
            .collect();
        lines.sort_by_key(|l| l.line.line);
        lines.dedup_by_key(|l| l.line.line);
        Self { version: 0, lines }
    }

    /// The scoped order id (empty for an order without lines).
    pub fn order_id(&self) -> &str {
        self.lines.first().map_or("", |l| l.line.order_id.as_str())
    }

    /// Offers touch `t`: each line it beats the credit of takes it. True when a
    /// credit changed.
    pub fn offer(&mut self, t: &Touch, w: &Windows) -> bool {
        let mut changed = false;
        for l in &mut self.lines {
            let Some(c) = attribution::eligible(&l.line, t, w) else {
                continue;
            };
            if attribution::beats((t, c), l.credit.as_ref().map(|(b, bc)| (b, *bc))) {
                l.credit = Some((t.clone(), c));
                changed = true;
            }
        }
        if changed {
            self.version += 1;
        }
        changed
    }

    /// The shoppers of the order (namespaced, [`attribution::shopper`]).
    pub fn shoppers(&self) -> Vec<String> {
        self.lines
            .first()
            .map(|l| l.line.shoppers())
            .unwrap_or_default()
    }

    /// Stored bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_extend(self, vec![STATE_V1]).unwrap_or_default()
    }

    /// Reads stored bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, postcard::Error> {
        match bytes.split_first() {
            Some((&STATE_V1, rest)) => postcard::from_bytes(rest),
            _ => Err(postcard::Error::DeserializeBadEncoding),
        }
    }

    /// What the order counts, per place (partition 0) and field.
    pub fn counts(&self) -> Counts {
        let mut out = Counts::new();
        let mut orders = std::collections::BTreeSet::new();
        for l in &self.lines {
            let line = &l.line;
            let campaign = l
                .credit
                .as_ref()
                .map_or("", |(t, _)| t.campaign_id.as_str());
            let (whole, e8) = split_amount(line.revenue.amount);
            let units = i64::try_from(line.quantity).unwrap_or(i64::MAX);
            let sales = sales_place(campaign, line, line.revenue.currency);
            let mut add = |p: &Place, f: SaleField, v: i64| {
                *out.entry((p.clone(), f)).or_default() += v;
            };
            add(&sales, SaleField::Units, units);
            add(&sales, SaleField::RevenueWhole, whole);
            add(&sales, SaleField::RevenueE8, e8);
            match l.credit.as_ref().map(|(_, c)| *c) {
                Some(Credit::Click) => add(&sales, SaleField::ClickAttributions, 1),
                Some(Credit::View) => add(&sales, SaleField::ViewAttributions, 1),
                None => {}
            }
            orders.insert(sales);
            if !campaign.is_empty() {
                let currency = line.revenue.currency;
                let quarter = Grain::Quarter.bucket(line.time_ms);
                let hour = Grain::Hour.bucket(line.time_ms);
                for p in [
                    campaign_place(campaign, line.day(), currency),
                    campaign_place_at(campaign, Grain::Quarter, quarter, currency),
                    campaign_place_at(campaign, Grain::Hour, hour, currency),
                ] {
                    add(&p, SaleField::Units, units);
                    add(&p, SaleField::RevenueWhole, whole);
                    add(&p, SaleField::RevenueE8, e8);
                    orders.insert(p);
                }
            }
        }
        for p in orders {
            out.insert((p, SaleField::Orders), 1);
        }
        out
    }
}

/// An order's counts per (place, field).
pub type Counts = BTreeMap<(Place, SaleField), i64>;

/// The place of a line's sales (partition 0).
pub fn sales_place(campaign: &str, line: &OrderLine, currency: Currency) -> Place {
    Place {
        campaign_id: campaign.into(),
        scope: Scope::Sales,
        grain: Grain::Day,
        bucket: line.day(),
        creative: currency.code().into(),
        // Always scoped, the default namespace too, so the namespace reads back.
        catalog_id: compact_str::format_compact!(
            "{}{}{}",
            line.namespace(),
            rm_schemas::namespace::SEPARATOR,
            line.catalog_id
        ),
        product_code: line.product_code.as_str().into(),
        partition: 0,
    }
}

/// The place of a campaign's attributed sales on a UTC day (partition 0).
pub fn campaign_place(campaign: &str, day: i32, currency: Currency) -> Place {
    campaign_place_at(campaign, Grain::Day, day, currency)
}

/// The place of a campaign's attributed sales in a bucket of `grain` (partition 0):
/// its UTC day, and its quarter hour (the campaign summary in any zone).
pub fn campaign_place_at(campaign: &str, grain: Grain, bucket: i32, currency: Currency) -> Place {
    Place {
        campaign_id: campaign.into(),
        scope: Scope::CampaignSales,
        grain,
        bucket,
        creative: currency.code().into(),
        catalog_id: Default::default(),
        product_code: Default::default(),
        partition: 0,
    }
}

/// The net moves from counts `old` to `new`, in log `partition`.
pub fn moves(old: &Counts, new: &Counts, partition: i32) -> Vec<(TallyKey, i64)> {
    let mut out = Vec::new();
    for key in old
        .keys()
        .chain(new.keys().filter(|k| !old.contains_key(*k)))
    {
        let d = new.get(key).copied().unwrap_or(0) - old.get(key).copied().unwrap_or(0);
        if d != 0 {
            out.push((
                TallyKey {
                    place: Place {
                        partition,
                        ..key.0.clone()
                    },
                    metric: Metric::Sale(key.1),
                },
                d,
            ));
        }
    }
    out
}

/// A touch offered to an order (a record of the orders topic, keyed by the order's
/// id as the order is: [`Offer::key`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    /// The scoped order id.
    #[serde(rename = "orderId")]
    pub order_id: String,
    /// The touch.
    pub touch: Touch,
    /// The consumer group that looked it up, and alone folds it ("": any; a group
    /// re-reading the log makes its own offers again).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub to: String,
}

/// The record's shape: `{"offer":{...}}` (an order record never starts so).
#[derive(Serialize, Deserialize)]
struct OfferRecord {
    offer: Offer,
}

/// What an offer record starts with.
pub const OFFER_PREFIX: &[u8] = b"{\"offer\":";

impl Offer {
    /// The message key: the order's id, as the order was sent
    /// ([`rm_schemas::order::key`]), so the offer lands on the order's partition.
    pub fn key(&self) -> &[u8] {
        rm_schemas::namespace::split(&self.order_id).1.as_bytes()
    }

    /// The record's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&OfferRecord {
            offer: self.clone(),
        })
        .unwrap_or_default()
    }

    /// Reads a record ([`OFFER_PREFIX`]); `None` when it is not one.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if !bytes.starts_with(OFFER_PREFIX) {
            return None;
        }
        serde_json::from_slice::<OfferRecord>(bytes)
            .ok()
            .map(|r| r.offer)
    }
}

/// The offers for new orders: per line, the best of `touches` (the stored touches of
/// the orders' shoppers in the windows' span; others are ignored).
pub fn offers_for_orders<'a>(
    orders: impl IntoIterator<Item = &'a OrderCredits>,
    touches: &[Touch],
    w: &Windows,
) -> Vec<Offer> {
    let mut by: BTreeMap<&str, Vec<&Touch>> = BTreeMap::new();
    for t in touches {
        by.entry(&t.shopper).or_default().push(t);
    }
    let mut out = Vec::new();
    for o in orders {
        let mut sent = std::collections::HashSet::new();
        for l in &o.lines {
            let shoppers = l.line.shoppers();
            let mine = shoppers
                .iter()
                .filter_map(|s| by.get(s.as_str()))
                .flatten()
                .copied();
            if let Some((t, _)) = attribution::attribute(&l.line, mine, w) {
                if sent.insert((t.shopper.as_str(), t.dedup_key)) {
                    out.push(Offer {
                        order_id: o.order_id().to_owned(),
                        touch: t.clone(),
                        to: String::new(),
                    });
                }
            }
        }
    }
    out
}

/// One stored order of a shopper (the index the touches' side looks orders up in).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ShopperOrder {
    /// Namespaced shopper id.
    pub shopper: String,
    /// `orderDate`, ms.
    pub time_ms: i64,
    /// Scoped order id.
    pub order_id: String,
}

/// The index rows of an order's lines (one per shopper id).
pub fn shopper_orders(lines: &[OrderLine]) -> Vec<ShopperOrder> {
    let mut out: Vec<ShopperOrder> = lines
        .iter()
        .flat_map(|l| {
            l.shoppers().into_iter().map(|s| ShopperOrder {
                shopper: s,
                time_ms: l.time_ms,
                order_id: l.order_id.clone(),
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The offers for new touches: each touch to each stored order of its shopper it
/// could be eligible for by time (the owner decides the rest).
pub fn offers_for_touches(touches: &[Touch], orders: &[ShopperOrder], w: &Windows) -> Vec<Offer> {
    let span = w.click_ms.max(w.view_ms);
    let mut by: BTreeMap<&str, Vec<&ShopperOrder>> = BTreeMap::new();
    for o in orders {
        by.entry(&o.shopper).or_default().push(o);
    }
    let mut out = Vec::new();
    let mut sent = std::collections::HashSet::new();
    for t in touches {
        for o in by.get(t.shopper.as_str()).into_iter().flatten() {
            let age = o.time_ms - t.time_ms;
            if (0..=span).contains(&age) && sent.insert((o.order_id.as_str(), t.dedup_key)) {
                out.push(Offer {
                    order_id: o.order_id.clone(),
                    touch: t.clone(),
                    to: String::new(),
                });
            }
        }
    }
    out
}

/// The sales report's rows from summed [`Scope::Sales`] tallies whose place `keep`
/// selects, each with its place's key, in place order (campaign, currency, scoped
/// catalog, product), then day; places whose orders all moved elsewhere (every count
/// 0) are left out.
pub fn keyed_rows(
    summed: &[SummedTally],
    keep: impl Fn(&Place) -> bool,
) -> Vec<(PlaceKey, attribution::SalesReportRow)> {
    let mut groups: BTreeMap<(PlaceKey, i32), [i64; 6]> = BTreeMap::new();
    for s in summed {
        let (Metric::Sale(f), Scope::Sales) = (s.metric, s.place.scope) else {
            continue;
        };
        if !keep(&s.place) {
            continue;
        }
        let key = (PlaceKey::of(&s.place), s.place.bucket);
        groups.entry(key).or_default()[f.index()] += s.value;
    }
    groups
        .into_iter()
        .filter(|(_, v)| v.iter().any(|n| *n != 0))
        .filter_map(|((place, day), v)| {
            let currency = Currency::from_code(&place.creative)?;
            let count = |f: SaleField| u64::try_from(v[f.index()]).unwrap_or(0);
            let row = attribution::SalesReportRow {
                campaign_id: place.campaign_id.clone(),
                catalog_id: rm_schemas::namespace::bare(&place.catalog_id).to_owned(),
                product_code: place.product_code.clone(),
                day: crate::model::format_day(day),
                orders: count(SaleField::Orders),
                units: count(SaleField::Units),
                revenue: rm_schemas::money::stable(
                    join_amount(
                        v[SaleField::RevenueWhole.index()],
                        v[SaleField::RevenueE8.index()],
                    ),
                    currency,
                ),
                currency,
                click_attributions: count(SaleField::ClickAttributions),
                view_attributions: count(SaleField::ViewAttributions),
            };
            Some((place, row))
        })
        .collect()
}

/// The sales report's rows ([`keyed_rows`] without their keys).
pub fn report_rows(
    summed: &[SummedTally],
    keep: impl Fn(&Place) -> bool,
) -> Vec<attribution::SalesReportRow> {
    keyed_rows(summed, keep)
        .into_iter()
        .map(|(_, r)| r)
        .collect()
}

/// The campaign summary's sales per campaign, period and currency from summed
/// [`Scope::CampaignSales`] tallies (of the grain `periods` plans), in that order;
/// `day` is the period's label.
pub fn campaign_rows(
    summed: &[SummedTally],
    periods: &crate::model::periods::Periods,
) -> Vec<CampaignSalesRow> {
    campaign_rows_labelled(summed, periods, crate::model::rollup::Label::Day)
}

/// As [`campaign_rows`], `day` labelled by `label`.
pub fn campaign_rows_labelled(
    summed: &[SummedTally],
    periods: &crate::model::periods::Periods,
    label: crate::model::rollup::Label,
) -> Vec<CampaignSalesRow> {
    let mut period_of = crate::model::rollup::PeriodOf::new(periods);
    let mut groups: BTreeMap<(&str, chrono::NaiveDateTime, &str), [i64; 6]> = BTreeMap::new();
    for s in summed {
        let (Metric::Sale(f), Scope::CampaignSales) = (s.metric, s.place.scope) else {
            continue;
        };
        let p = &s.place;
        let Some(period) = period_of.of(p) else {
            continue;
        };
        groups
            .entry((p.campaign_id.as_str(), period, p.creative.as_str()))
            .or_default()[f.index()] += s.value;
    }
    groups
        .into_iter()
        .filter(|(_, v)| v[SaleField::Orders.index()] > 0)
        .filter_map(|((campaign, period, currency), v)| {
            Some(CampaignSalesRow {
                campaign_id: campaign.to_owned(),
                day: label.of(period_of.label(period)),
                orders: u64::try_from(v[SaleField::Orders.index()]).unwrap_or(0),
                revenue: join_amount(
                    v[SaleField::RevenueWhole.index()],
                    v[SaleField::RevenueE8.index()],
                ),
                currency: Currency::from_code(currency)?,
            })
        })
        .collect()
}

/// The span of touch times that can credit an order at `time_ms`.
pub fn touch_span(time_ms: i64, w: &Windows) -> (i64, i64) {
    (time_ms.saturating_sub(w.click_ms.max(w.view_ms)), time_ms)
}

#[cfg(test)]
mod tests;
