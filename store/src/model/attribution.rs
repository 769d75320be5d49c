//! Sales attribution: which ad an order line is credited to (pure, no I/O).
//!
//! **Rule.** An order line is credited to the **last click** on its product by the
//! same shopper within the click window before the order (`orderDate - click window
//! <= click time <= orderDate`): a `productClick` on the line's catalog and product,
//! or a `creativeClick` of an ad the order names for it (the line's `adId` or one of
//! the order's `adIds`; a creative click carries no product, so the order must say
//! which ad advertised it). Without such a click, the **last `productImpression`** of
//! the product by the shopper within the view window. Else the line is unattributed.
//! The latest touch wins; equal times are broken by the larger dedup key, so the
//! choice never depends on the order the touches are given in.
//!
//! **Same shopper.** Orders carry a `customerId` and/or a `sessionId`, events their
//! tracking ids. An event is a touch of every shopper id it carries, namespaced
//! ([`shopper`]: `customer:<id>`, `session:<id>`), and an order line matches the
//! touches of its own customer and session ids; a customer id never matches a
//! session id that happens to be spelled the same. Events with only a `dtmToken`
//! cannot be joined to an order and are not touches.
//!
//! **Why arrival order cannot change the result.** Attribution is computed when the
//! report is read, from two stored sets: the distinct touches (by shopper and dedup
//! key) and the distinct order lines (by order id and line). Both are written
//! idempotently by the aggregator whatever topic a record came from and whenever it
//! arrived, so an order stored before its click, or a click that arrives late, gives
//! the same report as soon as both are stored; a crash or a replay adds nothing to
//! either set. The windows are applied at read time too: changing them re-attributes
//! history consistently. The store bounds the read by the report's filter (orders of
//! the filtered days and catalog, touches of their shoppers in
//! [`touch_range`]), so the cost is that of the orders reported, not of all history.
//!
//! **Money.** A line's revenue is exact ([`Money`]: a decimal and the order's
//! currency). Report rows group by currency as well as by campaign, product and day,
//! so amounts of two currencies never add: a product sold in USD and in EUR on one
//! day is two rows. Sums are exact (integer mantissas, `rm_schemas::money`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use rm_schemas::money::{self, Currency, Money};
use rm_schemas::order::Order;
use rm_schemas::{InteractionEvent, InteractionType};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::campaigns::CampaignSalesRow;
use super::{day_of, format_day, DAY_MS};

/// Default click window, days (`--attribution-click-window-days`).
pub const DEFAULT_CLICK_WINDOW_DAYS: i64 = 30;
/// Default view window, days (`--attribution-view-window-days`).
pub const DEFAULT_VIEW_WINDOW_DAYS: i64 = 1;

/// Attribution windows, in milliseconds before the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    /// How long before an order a click still earns the credit.
    pub click_ms: i64,
    /// How long before an order an impression still earns the credit.
    pub view_ms: i64,
    /// Not an attribution window: the billable click window the reports apply to
    /// repeated clicks ([`super::traffic`]), carried here because every report
    /// reader already takes these windows.
    pub billable_clicks: super::traffic::ClickWindow,
}

impl Windows {
    /// Windows of whole days (negative values count as 0).
    pub fn days(click: i64, view: i64) -> Self {
        Self {
            click_ms: click.max(0).saturating_mul(DAY_MS),
            view_ms: view.max(0).saturating_mul(DAY_MS),
            billable_clicks: super::traffic::ClickWindow::default(),
        }
    }
}

impl Default for Windows {
    /// 30 days for clicks, 1 day for impressions.
    fn default() -> Self {
        Self::days(DEFAULT_CLICK_WINDOW_DAYS, DEFAULT_VIEW_WINDOW_DAYS)
    }
}

/// What kind of touch an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TouchKind {
    /// `productClick`: a click on a product.
    ProductClick,
    /// `creativeClick`: a click on an ad's creative (no product).
    CreativeClick,
    /// `productImpression`: a product was seen.
    ProductImpression,
}

impl TouchKind {
    /// The touch kind of an interaction type, if it is one.
    pub fn of(t: InteractionType) -> Option<Self> {
        match t {
            InteractionType::ProductClick => Some(Self::ProductClick),
            InteractionType::CreativeClick => Some(Self::CreativeClick),
            InteractionType::ProductImpression => Some(Self::ProductImpression),
            _ => None,
        }
    }

    /// Stable name, as stored (the interaction type's wire name).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProductClick => InteractionType::ProductClick.as_str(),
            Self::CreativeClick => InteractionType::CreativeClick.as_str(),
            Self::ProductImpression => InteractionType::ProductImpression.as_str(),
        }
    }

    /// Reads a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        InteractionType::from_wire(s).and_then(Self::of)
    }
}

/// The namespaced shopper id a touch or an order line is matched by.
pub fn shopper(kind: ShopperId, id: &str) -> String {
    format!("{}{id}", kind.prefix())
}

/// Which id of a shopper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShopperId {
    /// `customerId`.
    Customer,
    /// `sessionId`.
    Session,
}

impl ShopperId {
    /// What starts a namespaced shopper id of this kind ([`shopper`]).
    pub const fn prefix(self) -> &'static str {
        match self {
            Self::Customer => "customer:",
            Self::Session => "session:",
        }
    }
}

/// One touch of one shopper: a distinct product impression, product click or creative
/// click, stored once per shopper id the event carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Touch {
    /// Namespaced shopper id ([`shopper`]).
    pub shopper: String,
    /// Dedup key of the event.
    pub dedup_key: u128,
    /// Kind of touch.
    pub kind: TouchKind,
    /// Realised ad id.
    pub ad_id: String,
    /// Campaign of the ad.
    pub campaign_id: String,
    /// Catalog ("" for a creative click).
    pub catalog_id: String,
    /// Product ("" for a creative click).
    pub product_code: String,
    /// Event time, ms since the epoch.
    pub time_ms: i64,
}

impl Touch {
    /// The namespace of the touch: the one its ad id names (`default` for ids of the
    /// `rm1` form and for ids that are not ours).
    pub fn namespace(&self) -> &str {
        crate::model::ad_id_campaign::namespace_str(&self.ad_id)
    }
}

/// The touches of an event (none when it is not a touch or names no customer or session).
pub fn touches_of(
    e: &InteractionEvent,
    dedup_key: u128,
    campaign_id: &str,
    time_ms: i64,
) -> Vec<Touch> {
    let Some(kind) = TouchKind::of(e.interaction_type) else {
        return Vec::new();
    };
    let ids = [
        (ShopperId::Customer, &e.customer_id),
        (ShopperId::Session, &e.session_id),
    ];
    ids.into_iter()
        .filter_map(|(k, id)| id.as_deref().map(|id| shopper(k, id)))
        .map(|s| Touch {
            shopper: s,
            dedup_key,
            kind,
            ad_id: e.ad_id.clone(),
            campaign_id: campaign_id.to_owned(),
            catalog_id: e.catalog_id.clone().unwrap_or_default(),
            product_code: e.product_code.clone().unwrap_or_default(),
            time_ms,
        })
        .collect()
}

/// One line of a stored order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderLine {
    /// Order id.
    pub order_id: String,
    /// Position of the line in the order, from 0.
    pub line: u32,
    /// The order's `customerId` ("" when absent).
    pub customer_id: String,
    /// The order's `sessionId` ("" when absent).
    pub session_id: String,
    /// `orderDate`, ms since the epoch.
    pub time_ms: i64,
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
    /// Units.
    pub quantity: u64,
    /// `totalOrderItemPriceAfterDiscounts`, exact, in the order's currency.
    pub revenue: Money,
    /// The line's `adId` ("" when absent).
    pub ad_id: String,
    /// The order's `adIds`.
    pub order_ad_ids: Vec<String>,
}

impl OrderLine {
    /// The namespaced shopper ids of the order.
    pub fn shoppers(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(2);
        if !self.customer_id.is_empty() {
            out.push(shopper(ShopperId::Customer, &self.customer_id));
        }
        if !self.session_id.is_empty() {
            out.push(shopper(ShopperId::Session, &self.session_id));
        }
        out
    }

    /// The namespace of the order: of the API key that sent it (the stored order id
    /// is scoped, `rm_schemas::namespace::scoped`).
    pub fn namespace(&self) -> &str {
        rm_schemas::namespace::split(&self.order_id).0
    }

    /// UTC day of the order.
    pub fn day(&self) -> i32 {
        day_of(self.time_ms)
    }

    /// Whether the line or its order names ad id `ad`.
    pub fn names_ad(&self, ad: &str) -> bool {
        self.ad_id == ad || self.order_ad_ids.iter().any(|a| a == ad)
    }
}

/// The lines of an order.
pub fn lines_of(order: &Order) -> Vec<OrderLine> {
    let time_ms = order.order_date.timestamp_millis();
    order
        .order_items
        .iter()
        .enumerate()
        .map(|(i, item)| OrderLine {
            order_id: order.id.clone(),
            line: i as u32,
            customer_id: order.customer_id.clone().unwrap_or_default(),
            session_id: order.session_id.clone().unwrap_or_default(),
            time_ms,
            catalog_id: order.catalog_id.clone(),
            product_code: item.product_code.clone(),
            quantity: item.quantity,
            revenue: order.line_revenue(item),
            ad_id: item.ad_id.clone().unwrap_or_default(),
            order_ad_ids: order.ad_ids.clone(),
        })
        .collect()
}

/// How a line earned its credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Credit {
    /// A click in the click window.
    Click,
    /// An impression in the view window.
    View,
}

/// How `t` could credit `line` (`None`: it cannot: another shopper or namespace, a
/// touch after the order or outside its window, another product, a creative click
/// of an ad the order does not name).
pub fn eligible(line: &OrderLine, t: &Touch, w: &Windows) -> Option<Credit> {
    // An order is credited only to its own namespace's ads, even when the same
    // shopper saw another namespace's ads.
    if t.time_ms > line.time_ms || t.namespace() != line.namespace() {
        return None;
    }
    // `shopper(kind, id)`, compared without building it.
    let is = |kind: ShopperId, id: &str| {
        !id.is_empty() && t.shopper.strip_prefix(kind.prefix()) == Some(id)
    };
    if !is(ShopperId::Customer, &line.customer_id) && !is(ShopperId::Session, &line.session_id) {
        return None;
    }
    let age = line.time_ms - t.time_ms;
    let same_product = t.catalog_id == line.catalog_id && t.product_code == line.product_code;
    let (credit, window) = match t.kind {
        TouchKind::ProductClick if same_product => (Credit::Click, w.click_ms),
        TouchKind::CreativeClick if line.names_ad(&t.ad_id) => (Credit::Click, w.click_ms),
        TouchKind::ProductImpression if same_product => (Credit::View, w.view_ms),
        _ => return None,
    };
    (age <= window).then_some(credit)
}

/// Whether credit `a` beats credit `b` (`None`: no credit yet): a click beats any
/// impression; then the later touch; equal times fall to the dedup key, then to the
/// ad and the shopper, so the choice never depends on the order the touches come in.
/// (Touches of one dedup key are one event, so they name one ad; only the shopper id
/// may differ, and either copy credits the same campaign and ad.) A total order: the
/// credit of a line is the best of its touches, whatever order they are offered in.
pub fn beats(a: (&Touch, Credit), b: Option<(&Touch, Credit)>) -> bool {
    fn rank((t, c): (&Touch, Credit)) -> (bool, i64, u128, &str, &str) {
        (
            c == Credit::Click,
            t.time_ms,
            t.dedup_key,
            t.ad_id.as_str(),
            t.shopper.as_str(),
        )
    }
    b.is_none_or(|b| rank(a) > rank(b))
}

/// The touch `line` is credited to, and how; `None` when unattributed. `touches` may
/// hold touches of other shoppers and copies: only the line's shoppers count.
pub fn attribute<'a>(
    line: &OrderLine,
    touches: impl IntoIterator<Item = &'a Touch>,
    w: &Windows,
) -> Option<(&'a Touch, Credit)> {
    let mut best: Option<(&Touch, Credit)> = None;
    for t in touches {
        if let Some(c) = eligible(line, t, w) {
            if beats((t, c), best) {
                best = Some((t, c));
            }
        }
    }
    best
}

/// The span of touch times that can matter for `lines`: from the earliest order
/// minus the longer window to the latest order. `None` without lines.
pub fn touch_range(lines: &[OrderLine], w: &Windows) -> Option<(i64, i64)> {
    let min = lines.iter().map(|l| l.time_ms).min()?;
    let max = lines.iter().map(|l| l.time_ms).max()?;
    Some((min.saturating_sub(w.click_ms.max(w.view_ms)), max))
}

/// One row of the sales report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SalesReportRow {
    /// Campaign credited ("" for unattributed sales).
    pub campaign_id: String,
    /// Catalog.
    pub catalog_id: String,
    /// Product.
    pub product_code: String,
    /// UTC day of the orders, `YYYY-MM-DD`.
    pub day: String,
    /// Distinct orders with at least one line in this row.
    pub orders: u64,
    /// Units of the lines.
    pub units: u64,
    /// Revenue of the lines (`totalOrderItemPriceAfterDiscounts`), exact, as a decimal
    /// string (`"59.97"`).
    #[serde(with = "money::decimal_text")]
    pub revenue: Decimal,
    /// The currency of `revenue` (ISO 4217): the orders'.
    pub currency: Currency,
    /// Lines credited to a click.
    pub click_attributions: u64,
    /// Lines credited to an impression.
    pub view_attributions: u64,
}

#[derive(Default)]
struct Acc<'a> {
    orders: BTreeSet<&'a str>,
    units: u64,
    revenue: Decimal,
    clicks: u64,
    views: u64,
}

/// `a + b`, exact ([`money::exact_add`]); beyond an exact decimal (2^96 units of
/// the smallest decimal place, 10^20 at 8 decimals: never a real sum) it saturates.
pub(crate) fn add(a: Decimal, b: Decimal) -> Decimal {
    money::exact_add(a, b).unwrap_or(Decimal::MAX)
}

/// Attributes every line and rolls up per campaign, currency, catalog, product and
/// order day, keeping the lines whose credited campaign and ad (both "" when unattributed) pass
/// `keep`. Copies of lines (same order id and line) and of touches count once; lines
/// are summed in (order id, line) order, so the revenue is the same float whatever
/// order the store returned them in. Rows are sorted by their group.
pub fn sales_report(
    lines: &[OrderLine],
    touches: &[Touch],
    w: &Windows,
    keep: impl Fn(&str, &str) -> bool,
) -> Vec<SalesReportRow> {
    // In the sales tallies' place order (`tallies::sales::keyed_rows`): campaign,
    // currency, catalog, product, day.
    type Group<'a> = (&'a str, Currency, &'a str, &'a str, i32);
    let mut groups: BTreeMap<Group<'_>, Acc<'_>> = BTreeMap::new();
    for (l, credit) in credited(lines, touches, w) {
        let (campaign, ad) = credit.map_or(("", ""), |(t, _)| (&t.campaign_id, &t.ad_id));
        if !keep(campaign, ad) {
            continue;
        }
        let acc = groups
            .entry((
                campaign,
                l.revenue.currency,
                &l.catalog_id,
                &l.product_code,
                l.day(),
            ))
            .or_default();
        acc.orders.insert(&l.order_id);
        acc.units += l.quantity;
        acc.revenue = add(acc.revenue, l.revenue.amount);
        match credit.map(|(_, c)| c) {
            Some(Credit::Click) => acc.clicks += 1,
            Some(Credit::View) => acc.views += 1,
            None => {}
        }
    }
    groups
        .into_iter()
        .map(
            |((campaign, currency, catalog, product, day), a)| SalesReportRow {
                campaign_id: campaign.to_owned(),
                catalog_id: catalog.to_owned(),
                product_code: product.to_owned(),
                day: format_day(day),
                orders: a.orders.len() as u64,
                units: a.units,
                revenue: money::stable(a.revenue, currency),
                currency,
                click_attributions: a.clicks,
                view_attributions: a.views,
            },
        )
        .collect()
}

/// Attributed sales per credited campaign, order day and currency (the campaign
/// summary): distinct orders with a line credited to the campaign, and those lines'
/// revenue.
/// Unattributed lines are left out; `keep` selects credited campaigns. Copies count
/// once and lines are summed in (order id, line) order, as in [`sales_report`].
pub fn campaign_sales(
    lines: &[OrderLine],
    touches: &[Touch],
    w: &Windows,
    keep: impl Fn(&str) -> bool,
) -> Vec<CampaignSalesRow> {
    let mut groups: BTreeMap<(&str, i32, Currency), (BTreeSet<&str>, Decimal)> = BTreeMap::new();
    for (l, credit) in credited(lines, touches, w) {
        let Some((t, _)) = credit else { continue };
        if !keep(&t.campaign_id) {
            continue;
        }
        let acc = groups
            .entry((&t.campaign_id, l.day(), l.revenue.currency))
            .or_default();
        acc.0.insert(&l.order_id);
        acc.1 = add(acc.1, l.revenue.amount);
    }
    groups
        .into_iter()
        .map(
            |((campaign, day, currency), (orders, revenue))| CampaignSalesRow {
                campaign_id: campaign.to_owned(),
                day: format_day(day),
                orders: orders.len() as u64,
                revenue,
                currency,
            },
        )
        .collect()
}

/// Every distinct line (by order id and line, in that order) with its credit.
fn credited<'a>(
    lines: &'a [OrderLine],
    touches: &'a [Touch],
    w: &Windows,
) -> Vec<(&'a OrderLine, Option<(&'a Touch, Credit)>)> {
    let mut by_shopper: HashMap<&str, Vec<&Touch>> = HashMap::new();
    for t in touches {
        by_shopper.entry(&t.shopper).or_default().push(t);
    }
    let mut sorted: Vec<&OrderLine> = lines.iter().collect();
    sorted.sort_by(|a, b| (&a.order_id, a.line).cmp(&(&b.order_id, b.line)));
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(sorted.len());
    for l in sorted {
        if !seen.insert((&l.order_id, l.line)) {
            continue;
        }
        let shoppers = l.shoppers();
        let candidates = shoppers
            .iter()
            .filter_map(|s| by_shopper.get(s.as_str()))
            .flatten()
            .copied();
        out.push((l, attribute(l, candidates, w)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOUR: i64 = 3_600_000;
    const ORDER_AT: i64 = 1_795_000_000_000;

    fn usd(s: &str) -> Money {
        Money::parse(s, money::DEFAULT_CURRENCY)
            .expect("money")
            .expect("amount")
    }

    fn line(product: &str, ad: &str) -> OrderLine {
        OrderLine {
            order_id: "o1".into(),
            line: 0,
            customer_id: "c1".into(),
            session_id: String::new(),
            time_ms: ORDER_AT,
            catalog_id: "cat".into(),
            product_code: product.into(),
            quantity: 2,
            revenue: usd("9.5"),
            ad_id: ad.into(),
            order_ad_ids: Vec::new(),
        }
    }

    fn touch(kind: TouchKind, ad: &str, product: &str, hours_before: i64, key: u128) -> Touch {
        Touch {
            shopper: shopper(ShopperId::Customer, "c1"),
            dedup_key: key,
            kind,
            ad_id: ad.into(),
            campaign_id: crate::model::ad_id_campaign::campaign_of(ad),
            catalog_id: if kind == TouchKind::CreativeClick {
                String::new()
            } else {
                "cat".into()
            },
            product_code: if kind == TouchKind::CreativeClick {
                String::new()
            } else {
                product.into()
            },
            time_ms: ORDER_AT - hours_before * HOUR,
        }
    }

    use TouchKind::{CreativeClick as CC, ProductClick as PC, ProductImpression as PI};

    #[test]
    fn the_documented_rule() {
        let w = Windows::default();
        let l = line("p1", "");
        let ts = vec![
            touch(PI, "rm1.a.x", "p1", 1, 1),
            touch(PC, "rm1.b.x", "p1", 48, 2),
            touch(PC, "rm1.c.x", "p2", 2, 3), // another product
            touch(CC, "rm1.d.x", "", 3, 4),   // an ad the order does not name
        ];
        let (t, c) = attribute(&l, &ts, &w).expect("credited");
        assert_eq!((t.campaign_id.as_str(), c), ("b", Credit::Click));
        // The creative click counts once the order names its ad, and is later.
        let named = OrderLine {
            order_ad_ids: vec!["rm1.d.x".into()],
            ..l.clone()
        };
        assert_eq!(
            attribute(&named, &ts, &w).expect("credited").0.campaign_id,
            "d"
        );
        // Without clicks, the last impression in the view window.
        let (t, c) = attribute(&l, &ts[..1], &w).expect("credited");
        assert_eq!((t.campaign_id.as_str(), c), ("a", Credit::View));
        let old = [touch(PI, "rm1.a.x", "p1", 25, 1)];
        assert!(
            attribute(&l, &old, &w).is_none(),
            "outside the 1-day view window"
        );
        let too_old = [touch(PC, "rm1.a.x", "p1", 30 * 24 + 1, 1)];
        assert!(
            attribute(&l, &too_old, &w).is_none(),
            "outside the click window"
        );
        let after = [touch(PC, "rm1.a.x", "p1", -1, 1)];
        assert!(
            attribute(&l, &after, &w).is_none(),
            "a click after the order"
        );
        let other = [Touch {
            shopper: shopper(ShopperId::Session, "c1"),
            ..touch(PC, "rm1.a.x", "p1", 1, 1)
        }];
        assert!(
            attribute(&l, &other, &w).is_none(),
            "a session id is not a customer id"
        );
    }

    #[test]
    fn events_touch_each_shopper_id_they_carry() {
        let e = InteractionEvent {
            ad_id: "rm1.c.x".into(),
            interaction_type: InteractionType::ProductClick,
            timestamp: chrono::DateTime::from_timestamp_millis(ORDER_AT)
                .expect("t")
                .fixed_offset(),
            session_id: Some("s".into()),
            customer_id: Some("c".into()),
            dtm_token: Some("d".into()),
            video_id: None,
            product_code: Some("p".into()),
            catalog_id: Some("cat".into()),
            creative_id: None,
            units: None,
            conversion_value: None,
            iab_consent_string: None,
        };
        let ts = touches_of(&e, 7, "c", ORDER_AT);
        let who: Vec<&str> = ts.iter().map(|t| t.shopper.as_str()).collect();
        assert_eq!(who, ["customer:c", "session:s"]);
        let dtm_only = InteractionEvent {
            session_id: None,
            customer_id: None,
            ..e.clone()
        };
        assert!(touches_of(&dtm_only, 7, "c", ORDER_AT).is_empty());
        let video = InteractionEvent {
            interaction_type: InteractionType::VideoPlay,
            ..e
        };
        assert!(touches_of(&video, 7, "c", ORDER_AT).is_empty());
    }

    fn arb_touch() -> impl Strategy<Value = Touch> {
        (
            prop_oneof![Just(PC), Just(CC), Just(PI)],
            0u8..3,
            0u8..2,
            -5i64..800,
            0u128..40,
        )
            .prop_map(|(k, ad, p, h, key)| {
                touch(
                    k,
                    &format!("rm1.camp{ad}.x"),
                    &format!("p{p}"),
                    h,
                    key * 3 + k as u128,
                )
            })
    }

    fn the_line() -> OrderLine {
        OrderLine {
            order_ad_ids: vec!["rm1.camp1.x".into()],
            ..line("p0", "rm1.camp2.x")
        }
    }

    #[test]
    fn an_order_is_credited_only_to_its_own_namespace() {
        let w = Windows::default();
        let acme = OrderLine {
            order_id: rm_schemas::namespace::scoped("acme", "o1"),
            ..line("p1", "")
        };
        // The same shopper clicked an ad of namespace `other` last, and one of acme
        // before: acme's order goes to acme's ad.
        let ts = [
            touch(PC, "rm2.acme.camp-a.x.1.n.s", "p1", 5, 1),
            touch(PC, "rm2.other.camp-b.x.1.n.s", "p1", 1, 2),
            touch(PC, "rm1.camp-d.x", "p1", 2, 3),
        ];
        let (t, _) = attribute(&acme, &ts, &w).expect("credited");
        assert_eq!(t.campaign_id, "camp-a");
        // The default namespace's order (an id without a namespace) only sees rm1 ads.
        let (t, _) = attribute(&line("p1", ""), &ts, &w).expect("credited");
        assert_eq!(t.campaign_id, "camp-d");
        // A namespace none of the shopper's ads belongs to: nothing.
        let lone = OrderLine {
            order_id: rm_schemas::namespace::scoped("lone", "o1"),
            ..line("p1", "")
        };
        assert!(attribute(&lone, &ts, &w).is_none());
    }

    proptest! {
        #[test]
        fn input_order_and_copies_do_not_matter(
            ts in proptest::collection::vec(arb_touch(), 0..30),
            seed in any::<usize>(),
        ) {
            let w = Windows::default();
            let l = the_line();
            let base = attribute(&l, &ts, &w).map(|(t, c)| (t.clone(), c));
            let mut again = ts.clone();
            again.extend(ts.iter().cloned());
            let n = again.len().max(1);
            again.rotate_left(seed % n);
            again.reverse();
            prop_assert_eq!(attribute(&l, &again, &w).map(|(t, c)| (t.clone(), c)), base);
        }

        #[test]
        fn the_last_click_wins_over_impressions_and_outside_windows_nothing_counts(
            ts in proptest::collection::vec(arb_touch(), 0..30),
            click_days in 0i64..40,
            view_days in 0i64..3,
        ) {
            let w = Windows::days(click_days, view_days);
            let l = the_line();
            let eligible_click = |t: &Touch| t.time_ms <= l.time_ms
                && l.time_ms - t.time_ms <= w.click_ms
                && match t.kind {
                    PC => t.product_code == l.product_code,
                    CC => l.names_ad(&t.ad_id),
                    PI => false,
                };
            let eligible_view = |t: &Touch| t.kind == PI && t.product_code == l.product_code
                && t.time_ms <= l.time_ms && l.time_ms - t.time_ms <= w.view_ms;
            match attribute(&l, &ts, &w) {
                Some((t, Credit::Click)) => {
                    prop_assert!(eligible_click(t));
                    prop_assert!(ts.iter().filter(|x| eligible_click(x)).all(|x| x.time_ms <= t.time_ms));
                }
                Some((t, Credit::View)) => {
                    prop_assert!(eligible_view(t));
                    prop_assert!(!ts.iter().any(eligible_click), "a click in the window beats any impression");
                    prop_assert!(ts.iter().filter(|x| eligible_view(x)).all(|x| x.time_ms <= t.time_ms));
                }
                None => prop_assert!(!ts.iter().any(|x| eligible_click(x) || eligible_view(x))),
            }
        }

        #[test]
        fn no_order_is_ever_credited_to_another_namespace(
            ts in proptest::collection::vec((arb_touch(), 0u8..3), 0..30),
            order_ns in 0u8..3,
        ) {
            let names = ["default", "acme", "brand"];
            let ts: Vec<Touch> = ts
                .into_iter()
                .map(|(t, ns)| match names[ns as usize] {
                    "default" => t,
                    n => {
                        let ad_id = t.ad_id.replacen("rm1.", &format!("rm2.{n}."), 1);
                        Touch { ad_id, ..t }
                    }
                })
                .collect();
            let ns = names[order_ns as usize];
            let l = OrderLine {
                order_id: rm_schemas::namespace::scoped(ns, "o1"),
                ..the_line()
            };
            if let Some((t, _)) = attribute(&l, &ts, &Windows::default()) {
                prop_assert_eq!(t.namespace(), ns);
            }
        }

        #[test]
        fn every_line_is_reported_once_attributed_or_not(
            ts in proptest::collection::vec(arb_touch(), 0..30),
            lines in proptest::collection::vec((0u8..6, 0u32..3, 0u8..2, 1u64..5, 0u32..1000, 0i64..72), 0..20),
        ) {
            let w = Windows::default();
            let ls: Vec<OrderLine> = lines
                .iter()
                .map(|(o, n, p, q, cents, h)| OrderLine {
                    order_id: format!("o{o}"),
                    line: *n,
                    quantity: *q,
                    revenue: Money::new(Decimal::new(i64::from(*cents), 2), money::DEFAULT_CURRENCY),
                    time_ms: ORDER_AT + h * HOUR,
                    ..line(&format!("p{p}"), "")
                })
                .collect();
            let report = sales_report(&ls, &ts, &w, |_, _| true);
            let mut distinct: HashMap<(String, u32), u64> = HashMap::new();
            for l in &ls {
                distinct.entry((l.order_id.clone(), l.line)).or_insert(l.quantity);
            }
            prop_assert_eq!(report.iter().map(|r| r.units).sum::<u64>(), distinct.values().sum::<u64>());
            let credited: u64 = report.iter().map(|r| r.click_attributions + r.view_attributions).sum();
            let unattributed = report.iter().filter(|r| r.campaign_id.is_empty()).map(|r| r.click_attributions + r.view_attributions).sum::<u64>();
            prop_assert_eq!(unattributed, 0);
            prop_assert!(credited <= distinct.len() as u64);
            let mut twice = ls.clone();
            twice.extend(ls.iter().rev().cloned());
            let mut ts2 = ts.clone();
            ts2.reverse();
            prop_assert_eq!(sales_report(&twice, &ts2, &w, |_, _| true), report);
        }

        #[test]
        fn revenue_sums_exactly_per_currency_and_never_across(
            ts in proptest::collection::vec(arb_touch(), 0..10),
            lines in proptest::collection::vec((0u8..4, 0u32..12, 0i64..100_000, 0u32..=3, 0u8..3), 0..40),
        ) {
            let codes = ["USD", "EUR", "JPY"];
            let w = Windows::default();
            let ls: Vec<OrderLine> = lines
                .iter()
                .map(|(o, n, m, scale, c)| OrderLine {
                    order_id: format!("o{o}"),
                    line: *n,
                    revenue: Money::new(
                        Decimal::new(*m, *scale),
                        Currency::from_code(codes[usize::from(*c)]).expect("code"),
                    ),
                    ..line("p", "")
                })
                .collect();
            let report = sales_report(&ls, &ts, &w, |_, _| true);
            // The exact sum per currency of the distinct lines, on integers at scale 3.
            let mut seen = HashSet::new();
            let mut exact: BTreeMap<Currency, i128> = BTreeMap::new();
            for l in &ls {
                if seen.insert((l.order_id.clone(), l.line)) {
                    let a = l.revenue.amount;
                    *exact.entry(l.revenue.currency).or_default() += a.mantissa() * 10i128.pow(3 - a.scale());
                }
            }
            let mut got: BTreeMap<Currency, Decimal> = BTreeMap::new();
            for r in &report {
                let e = got.entry(r.currency).or_default();
                *e = add(*e, r.revenue);
            }
            prop_assert_eq!(got.len(), exact.len());
            for (c, units) in exact {
                prop_assert_eq!(got[&c], Decimal::from_i128_with_scale(units, 3), "{}", c);
            }
            let mut keys: Vec<_> = report.iter().map(|r| (&r.campaign_id, &r.product_code, &r.day, r.currency)).collect();
            let n = keys.len();
            keys.dedup();
            prop_assert_eq!(keys.len(), n, "one row per currency of a group");
        }
    }

    #[test]
    fn three_lines_of_19_99_are_59_97_and_currencies_stay_apart() {
        let ls: Vec<OrderLine> = (0..4)
            .map(|i| OrderLine {
                line: i,
                revenue: if i < 3 { usd("19.99") } else { usd("EUR 5") },
                ..line("p", "")
            })
            .collect();
        let r = sales_report(&ls, &[], &Windows::default(), |_, _| true);
        assert_eq!(r.len(), 2);
        let eur = &r[0];
        let usd_row = &r[1];
        assert_eq!(
            (eur.currency.code(), eur.revenue.to_string()),
            ("EUR", "5.00".into())
        );
        assert_eq!(
            (usd_row.currency.code(), usd_row.revenue.to_string()),
            ("USD", "59.97".into())
        );
        let json = serde_json::to_value(usd_row).expect("json");
        assert_eq!(json["revenue"], "59.97");
        assert_eq!(json["currency"], "USD");
    }
}
