//! Orders: the `POST /v1/orders` payload and the record written to the `orders` topic.
//!
//! **Payload** (the shape of the public CitrusAd order sync, camelCase; unknown fields
//! are ignored, `null` is the same as absent):
//!
//! ```json
//! {"orders": [{"id": "o-1", "customerId": "c-1", "sessionId": "s-1",
//!   "orderDate": "2026-11-22T10:15:30Z", "catalogId": "cat-1", "teamId": "t-1",
//!   "adIds": ["rm1.camp-1.ad-1"], "currency": "EUR",
//!   "orderItems": [{"productCode": "p-1", "quantity": 2, "regularUnitPrice": 4.5,
//!     "totalOrderItemPriceAfterDiscounts": 8.0, "adId": "rm1.camp-1.ad-1", "sellerId": "s-9"}]}]}
//! ```
//!
//! Required: `id`, `orderDate` (RFC 3339 with an offset), `catalogId`, at least one of
//! `customerId` / `sessionId`, a non-empty `orderItems`, and per item `productCode`,
//! `quantity` (an integer, 1 to [`MAX_QUANTITY`]) and
//! `totalOrderItemPriceAfterDiscounts` (a number, 0 to [`MAX_PRICE`], at most
//! [`money::MAX_SCALE`] decimals); `regularUnitPrice` is optional with the same
//! bounds. Strings are non-empty and at
//! most [`MAX_ID_CHARS`] characters; at most [`MAX_ORDERS`] orders per request,
//! [`MAX_ITEMS`] items per order and [`MAX_AD_IDS`] `adIds`; an order id appears
//! once per request. [`parse_orders`] checks all of it and names the first field at
//! fault as a JSON path (`orders[0].orderItems[1].quantity`); it never panics.
//!
//! **Money.** Prices are exact decimals ([`rust_decimal::Decimal`]) read from the
//! JSON number's own text (`19.99` is 19.99, never the nearest binary fraction): the
//! body is read twice, once as a `serde_json::Value` for validation and once for the
//! prices' texts as `serde_json::value::RawValue` (serde_json's `raw_value` feature,
//! which adds that type and changes nothing else; `arbitrary_precision` would change
//! how every crate of the build parses numbers). The spec shows no currency on
//! orders: `currency` is an optional extension, an ISO 4217 code (`"EUR"`, any case);
//! without it the order is in the deployment's [`money::DEFAULT_CURRENCY`] (USD),
//! as every order written before the field was ([`Order::currency`]).
//!
//! **Log record** (topic `orders`, message key = the order id, see [`key`]), version 1,
//! flat JSON like [`crate::record`]: `v`, the api's `receivedAt` (UTC, RFC 3339 with
//! milliseconds), `namespaceId` (the API key's namespace; absent for `default`, as in
//! records written before namespaces), then the order's own fields as in the payload:
//!
//! ```json
//! {"v":1,"receivedAt":"2026-11-22T10:15:31.002Z","id":"o-1","customerId":"c-1",
//!  "orderDate":"2026-11-22T10:15:30Z","catalogId":"cat-1","orderItems":[...]}
//! ```
//!
//! Prices are written as JSON numbers with their exact decimal text, `currency` only
//! when the order named one. [`parse_record`] reads it back with the same validation
//! as the payload (a record is an order the api accepted), refusing versions it does
//! not know. Records written before exact money hold the shortest text of an `f64`
//! (`2.58`, `8.0`): they read as that decimal (rounded to [`money::MAX_SCALE`]
//! decimals, which only an `f64` of a computed value could exceed), in USD.

use chrono::{DateTime, FixedOffset, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::money::{self, Currency, Money, MoneyError};
use crate::record::{format_received_at, RECORD_VERSION};

/// Most orders in one request.
pub const MAX_ORDERS: usize = 1_000;
/// Most items in one order.
pub const MAX_ITEMS: usize = 1_000;
/// Most `adIds` of one order.
pub const MAX_AD_IDS: usize = 100;
/// Longest id (order, customer, session, catalog, team, product, ad, seller), in characters.
pub const MAX_ID_CHARS: usize = 256;
/// Largest `quantity` of one item.
pub const MAX_QUANTITY: u64 = 1_000_000;
/// Largest price (unit or total) of one item.
pub const MAX_PRICE: Decimal = money::MAX_AMOUNT;

/// One order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Order {
    /// The retailer's order id: the idempotency key.
    pub id: String,
    /// Tracking id: the customer (this or `sessionId` is required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customer_id: Option<String>,
    /// Tracking id: the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// When the order was placed: RFC 3339 with the offset the retailer sent.
    #[cfg_attr(feature = "json-schema", schemars(with = "String"))]
    pub order_date: DateTime<FixedOffset>,
    /// Catalog of the products.
    pub catalog_id: String,
    /// The retailer's team.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_id: Option<String>,
    /// Ads the retailer associates with the whole order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ad_ids: Vec<String>,
    /// The lines (at least one).
    pub order_items: Vec<OrderItem>,
    /// The currency of every price of the order: an ISO 4217 code (`EUR`). An
    /// extension (the spec shows none): without it the order is in the deployment's
    /// default currency, USD ([`Order::currency`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<String>"))]
    pub currency: Option<Currency>,
}

impl Order {
    /// The order's currency: its `currency`, else [`money::DEFAULT_CURRENCY`].
    pub fn currency(&self) -> Currency {
        self.currency.unwrap_or(money::DEFAULT_CURRENCY)
    }

    /// What line `item` cost the shopper, in the order's currency.
    pub fn line_revenue(&self, item: &OrderItem) -> Money {
        Money::new(item.total_order_item_price_after_discounts, self.currency())
    }
}

/// One line of an order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OrderItem {
    /// Product code in the order's catalog.
    pub product_code: String,
    /// Units bought (at least 1).
    pub quantity: u64,
    /// List price of one unit, in the order's currency: a JSON number read exactly as
    /// written (a decimal, at most 8 decimals, 0 to 10^12; never rounded to binary).
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_number"
    )]
    pub regular_unit_price: Option<Decimal>,
    /// What the line cost the shopper: the revenue of the line, in the order's
    /// currency, a JSON number read exactly as written, like `regularUnitPrice`.
    #[cfg_attr(feature = "json-schema", schemars(with = "f64"))]
    #[serde(serialize_with = "number")]
    pub total_order_item_price_after_discounts: Decimal,
    /// The ad the retailer associates with this line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ad_id: Option<String>,
    /// Marketplace seller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seller_id: Option<String>,
}

/// A price as a JSON number whose text is the decimal's (`19.99`, `8.0`).
fn number<S: Serializer>(d: &Decimal, s: S) -> Result<S::Ok, S::Error> {
    let raw = RawValue::from_string(d.to_string()).map_err(serde::ser::Error::custom)?;
    raw.serialize(s)
}

fn optional_number<S: Serializer>(d: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => number(d, s),
        None => s.serialize_none(),
    }
}

/// The texts of an order's prices, read apart from the `Value` (module header).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PriceTexts<'a> {
    #[serde(borrow, default)]
    order_items: Vec<ItemTexts<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ItemTexts<'a> {
    #[serde(borrow, default)]
    regular_unit_price: Option<&'a RawValue>,
    #[serde(borrow, default)]
    total_order_item_price_after_discounts: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct BodyTexts<'a> {
    #[serde(borrow)]
    orders: Vec<PriceTexts<'a>>,
}

/// An order as read back from the log.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderRecord {
    /// Record version ([`RECORD_VERSION`]).
    pub v: u16,
    /// The namespace of the API key that sent the order (`namespaceId` in the
    /// record; records without it, written before namespaces, are `default`).
    pub namespace_id: String,
    /// When the api accepted the order.
    pub received_at: DateTime<Utc>,
    /// The order.
    pub order: Order,
}

/// What is wrong with a payload or a record: the JSON path of the field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct OrderError {
    /// JSON path of the field at fault, like `orders[0].orderItems[1].quantity`
    /// (`body` when the body itself is not a JSON object).
    pub field: String,
    /// What is wrong and what is expected, for the developer who sent it.
    pub message: String,
}

fn fail<T>(field: &str, message: impl Into<String>) -> Result<T, OrderError> {
    Err(OrderError {
        field: field.to_owned(),
        message: message.into(),
    })
}

/// Parses and validates a `POST /v1/orders` body.
pub fn parse_orders(body: &[u8]) -> Result<Vec<Order>, OrderError> {
    // The prices' texts; `None` when the body is not the expected shape, which the
    // validation below then reports field by field.
    let texts: Option<BodyTexts<'_>> = serde_json::from_slice(body).ok();
    let root: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return fail("body", format!("not valid JSON: {e}")),
    };
    let Value::Object(root) = root else {
        return fail(
            "body",
            format!(
                "expected a JSON object {{\"orders\": [...]}}, got {}",
                kind(&root)
            ),
        );
    };
    let list = match root.get("orders") {
        None | Some(Value::Null) => return fail("orders", "required: an array of orders"),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return fail(
                "orders",
                format!("expected an array of orders, got {}", kind(other)),
            )
        }
    };
    if list.is_empty() {
        return fail("orders", "must hold at least one order");
    }
    if list.len() > MAX_ORDERS {
        return fail(
            "orders",
            format!(
                "{} orders; at most {MAX_ORDERS} per request: split the request",
                list.len()
            ),
        );
    }
    let mut out: Vec<Order> = Vec::with_capacity(list.len());
    let mut seen = std::collections::HashMap::new();
    for (i, v) in list.iter().enumerate() {
        let path = format!("orders[{i}]");
        let t = texts.as_ref().and_then(|t| t.orders.get(i));
        let order = order(v, &path, t)?;
        if let Some(first) = seen.insert(order.id.clone(), i) {
            return fail(
                &format!("{path}.id"),
                format!(
                    "order id '{}' already appears at orders[{first}]; an order id appears once per request",
                    order.id
                ),
            );
        }
        out.push(order);
    }
    Ok(out)
}

/// The log record of `order`, received now.
pub fn record(order: &Order) -> Vec<u8> {
    record_at(order, Utc::now())
}

/// The log record of `order` of the `default` namespace, received at `received_at`.
pub fn record_at(order: &Order, received_at: DateTime<Utc>) -> Vec<u8> {
    record_in(crate::namespace::DEFAULT, order, received_at)
}

/// The log record of `order`, sent with a key of namespace `ns`, received at
/// `received_at`. The `default` namespace writes no `namespaceId`, so its records
/// are byte for byte those of the version before namespaces.
pub fn record_in(ns: &str, order: &Order, received_at: DateTime<Utc>) -> Vec<u8> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Wire<'a> {
        v: u16,
        received_at: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace_id: Option<&'a str>,
        #[serde(flatten)]
        order: &'a Order,
    }
    // Strings, integers, finite numbers and a timestamp always serialise.
    serde_json::to_vec(&Wire {
        v: RECORD_VERSION,
        received_at: format_received_at(received_at),
        namespace_id: (ns != crate::namespace::DEFAULT).then_some(ns),
        order,
    })
    .unwrap_or_default()
}

/// The message key of `order`'s record: its id, so every copy of an order lands on
/// one partition, in order.
pub fn key(order: &Order) -> &[u8] {
    order.id.as_bytes()
}

/// Reads an `orders` record, validating the order as [`parse_orders`] does.
pub fn parse_record(bytes: &[u8]) -> Result<OrderRecord, OrderError> {
    let root: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return fail("record", format!("not valid JSON: {e}")),
    };
    let Value::Object(m) = &root else {
        return fail("record", format!("expected an object, got {}", kind(&root)));
    };
    let v = match m.get("v").and_then(Value::as_u64) {
        Some(v) if v == u64::from(RECORD_VERSION) => RECORD_VERSION,
        Some(v) => return fail("v", format!("unsupported record version {v}")),
        None => return fail("v", "required: the record version"),
    };
    let received = string(m, "receivedAt", "receivedAt")?.ok_or_else(|| OrderError {
        field: "receivedAt".into(),
        message: "required".into(),
    })?;
    let received_at = DateTime::parse_from_rfc3339(&received)
        .map_err(|e| OrderError {
            field: "receivedAt".into(),
            message: format!("not an RFC 3339 time: {e}"),
        })?
        .with_timezone(&Utc);
    let namespace_id = match string(m, "namespaceId", "namespaceId")? {
        None => crate::namespace::DEFAULT.to_owned(),
        Some(ns) if crate::namespace::valid(&ns) => ns,
        Some(ns) => return fail("namespaceId", format!("'{ns}' is not a namespace id")),
    };
    Ok(OrderRecord {
        v,
        namespace_id,
        received_at,
        order: order(&root, "", serde_json::from_slice(bytes).ok().as_ref())?,
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// An optional id: absent or `null` is `None`; else a non-empty string of bounded length.
fn string(m: &Map<String, Value>, name: &str, field: &str) -> Result<Option<String>, OrderError> {
    match m.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => id_value(s, field).map(Some),
        Some(other) => fail(field, format!("expected a string, got {}", kind(other))),
    }
}

fn id_value(s: &str, field: &str) -> Result<String, OrderError> {
    if s.trim().is_empty() {
        return fail(field, "must not be empty");
    }
    if s.chars().any(char::is_control) {
        // Namespaced ids are stored as `<namespace>` U+001F `<id>`.
        return fail(field, "must not contain control characters");
    }
    let n = s.chars().count();
    if n > MAX_ID_CHARS {
        return fail(
            field,
            format!("{n} characters; at most {MAX_ID_CHARS} allowed"),
        );
    }
    Ok(s.to_owned())
}

fn required(m: &Map<String, Value>, name: &str, path: &str) -> Result<String, OrderError> {
    let field = join(path, name);
    string(m, name, &field)?.ok_or_else(|| OrderError {
        field,
        message: "required".into(),
    })
}

/// A price: the JSON number's own text (`text`, else the number's shortest text) as
/// an exact decimal. `legacy`: a log record, whose prices may be the shortest text
/// of an `f64` (module header).
fn price(
    m: &Map<String, Value>,
    name: &str,
    field: &str,
    text: Option<&RawValue>,
    legacy: bool,
) -> Result<Option<Decimal>, OrderError> {
    match m.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let shortest = n.to_string();
            let text = text.map_or(shortest.as_str(), RawValue::get);
            let cur = money::DEFAULT_CURRENCY;
            match Money::from_number_text(text, cur) {
                Ok(p) => Ok(Some(p.amount)),
                Err(MoneyError::TooPrecise(_)) if legacy => n
                    .as_f64()
                    .and_then(|x| Money::from_legacy_f64(x, cur))
                    .map(|p| Some(p.amount))
                    .ok_or_else(|| OrderError {
                        field: field.to_owned(),
                        message: format!("{text} is not a price"),
                    }),
                Err(MoneyError::TooPrecise(_)) => fail(
                    field,
                    format!("{text} has more than {} decimals", money::MAX_SCALE),
                ),
                Err(_) => fail(field, format!("{text} is out of range: 0 to {MAX_PRICE}")),
            }
        }
        Some(other) => fail(field, format!("expected a number, got {}", kind(other))),
    }
}

fn order(v: &Value, path: &str, texts: Option<&PriceTexts<'_>>) -> Result<Order, OrderError> {
    let Value::Object(m) = v else {
        let at = if path.is_empty() { "record" } else { path };
        return fail(at, format!("expected an order object, got {}", kind(v)));
    };
    let id = required(m, "id", path)?;
    let customer_id = string(m, "customerId", &join(path, "customerId"))?;
    let session_id = string(m, "sessionId", &join(path, "sessionId"))?;
    if customer_id.is_none() && session_id.is_none() {
        return fail(
            &join(path, "customerId"),
            "customerId or sessionId is required: the shopper's tracking id, as sent on the ad beacons",
        );
    }
    let date_field = join(path, "orderDate");
    let date = required(m, "orderDate", path)?;
    let order_date = DateTime::parse_from_rfc3339(&date).map_err(|e| OrderError {
        field: date_field,
        message: format!(
            "'{date}' is not an RFC 3339 time with an offset, like 2026-11-22T10:15:30Z: {e}"
        ),
    })?;
    let catalog_id = required(m, "catalogId", path)?;
    let team_id = string(m, "teamId", &join(path, "teamId"))?;
    let ads_field = join(path, "adIds");
    let ad_ids = match m.get("adIds") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.len() > MAX_AD_IDS => {
            return fail(
                &ads_field,
                format!("{} ad ids; at most {MAX_AD_IDS}", a.len()),
            )
        }
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let field = format!("{ads_field}[{i}]");
                match v {
                    Value::String(s) => id_value(s, &field),
                    other => fail(&field, format!("expected a string, got {}", kind(other))),
                }
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return fail(
                &ads_field,
                format!("expected an array of ad ids, got {}", kind(other)),
            )
        }
    };
    let items_field = join(path, "orderItems");
    let items = match m.get("orderItems") {
        None | Some(Value::Null) => {
            return fail(&items_field, "required: an array of at least one item")
        }
        Some(Value::Array(a)) => a,
        Some(other) => {
            return fail(
                &items_field,
                format!("expected an array of items, got {}", kind(other)),
            )
        }
    };
    if items.is_empty() {
        return fail(&items_field, "must hold at least one item");
    }
    if items.len() > MAX_ITEMS {
        return fail(
            &items_field,
            format!("{} items; at most {MAX_ITEMS} per order", items.len()),
        );
    }
    let legacy = path.is_empty();
    let order_items = items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let t = texts.and_then(|t| t.order_items.get(i));
            item(v, &format!("{items_field}[{i}]"), t, legacy)
        })
        .collect::<Result<_, _>>()?;
    let cf = join(path, "currency");
    let currency = match m.get("currency") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => match Currency::from_code(c) {
            Some(c) => Some(c),
            None => {
                return fail(
                    &cf,
                    format!("'{c}' is not an ISO 4217 currency code (three letters, like USD)"),
                )
            }
        },
        Some(other) => return fail(&cf, format!("expected a string, got {}", kind(other))),
    };
    Ok(Order {
        id,
        customer_id,
        session_id,
        order_date,
        catalog_id,
        team_id,
        ad_ids,
        order_items,
        currency,
    })
}

fn item(
    v: &Value,
    path: &str,
    texts: Option<&ItemTexts<'_>>,
    legacy: bool,
) -> Result<OrderItem, OrderError> {
    let Value::Object(m) = v else {
        return fail(path, format!("expected an item object, got {}", kind(v)));
    };
    let product_code = required(m, "productCode", path)?;
    let qf = join(path, "quantity");
    let quantity = match m.get("quantity") {
        None | Some(Value::Null) => return fail(&qf, "required: an integer of at least 1"),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(q) if (1..=MAX_QUANTITY).contains(&q) => q,
            Some(_) | None if n.is_u64() || n.is_i64() => {
                return fail(&qf, format!("{n} is out of range: 1 to {MAX_QUANTITY}"))
            }
            _ => return fail(&qf, format!("{n} is not an integer")),
        },
        Some(other) => {
            return fail(
                &qf,
                format!("expected an integer of at least 1, got {}", kind(other)),
            )
        }
    };
    let regular_unit_price = price(
        m,
        "regularUnitPrice",
        &join(path, "regularUnitPrice"),
        texts.and_then(|t| t.regular_unit_price),
        legacy,
    )?;
    let tf = join(path, "totalOrderItemPriceAfterDiscounts");
    let total_text = texts.and_then(|t| t.total_order_item_price_after_discounts);
    let total = price(
        m,
        "totalOrderItemPriceAfterDiscounts",
        &tf,
        total_text,
        legacy,
    )?
    .ok_or_else(|| OrderError {
        field: tf,
        message: "required: the line's price after discounts, a number of at least 0".into(),
    })?;
    Ok(OrderItem {
        product_code,
        quantity,
        regular_unit_price,
        total_order_item_price_after_discounts: total,
        ad_id: string(m, "adId", &join(path, "adId"))?,
        seller_id: string(m, "sellerId", &join(path, "sellerId"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GOOD: &str = r#"{"orders":[{"id":"o-1","customerId":"c-1","sessionId":"s-1",
        "orderDate":"2026-11-22T10:15:30+01:00","catalogId":"cat-1","teamId":"t-1",
        "adIds":["rm1.camp-1.ad-1"],"extra":{"ignored":true},
        "orderItems":[{"productCode":"p-1","quantity":2,"regularUnitPrice":4.5,
          "totalOrderItemPriceAfterDiscounts":8.0,"adId":"rm1.camp-1.ad-1","sellerId":"s-9"},
          {"productCode":"p-2","quantity":1,"totalOrderItemPriceAfterDiscounts":0}]}]}"#;

    fn dec(s: &str) -> Decimal {
        Decimal::from_str_exact(s).expect("decimal")
    }

    fn err(body: &str) -> OrderError {
        parse_orders(body.as_bytes()).expect_err(body)
    }

    fn with(path: &[&str], value: Value) -> String {
        let mut v: Value = serde_json::from_str(GOOD).expect("good json");
        let mut at = &mut v["orders"][0];
        for p in &path[..path.len() - 1] {
            at = match p.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[*p],
            };
        }
        let last = path[path.len() - 1];
        if value.is_null() {
            at.as_object_mut().expect("object").remove(last);
        } else {
            at[last] = value;
        }
        v.to_string()
    }

    #[test]
    fn a_full_order_parses() {
        let o = parse_orders(GOOD.as_bytes()).expect("valid");
        assert_eq!(o.len(), 1);
        let o = &o[0];
        assert_eq!(o.id, "o-1");
        assert_eq!(o.customer_id.as_deref(), Some("c-1"));
        assert_eq!(o.order_date.timestamp(), 1_795_338_930);
        assert_eq!(o.ad_ids, ["rm1.camp-1.ad-1"]);
        assert_eq!(o.order_items.len(), 2);
        assert_eq!(o.order_items[0].quantity, 2);
        assert_eq!(o.order_items[0].regular_unit_price, Some(dec("4.5")));
        assert_eq!(
            o.order_items[1].total_order_item_price_after_discounts,
            Decimal::ZERO
        );
        assert_eq!(o.currency, None);
        assert_eq!(
            o.currency(),
            money::DEFAULT_CURRENCY,
            "the documented default"
        );
        assert_eq!(o.order_items[1].ad_id, None);
        assert_eq!(key(o), b"o-1");
    }

    #[test]
    fn errors_name_the_field() {
        let cases: Vec<(String, &str, &str)> = vec![
            ("{".into(), "body", "not valid JSON"),
            ("[]".into(), "body", "expected a JSON object"),
            ("{}".into(), "orders", "required"),
            (r#"{"orders":{}}"#.into(), "orders", "expected an array"),
            (r#"{"orders":[]}"#.into(), "orders", "at least one"),
            (
                r#"{"orders":[7]}"#.into(),
                "orders[0]",
                "expected an order object",
            ),
            (with(&["id"], Value::Null), "orders[0].id", "required"),
            (
                with(&["id"], 5.into()),
                "orders[0].id",
                "expected a string, got a number",
            ),
            (
                with(&["id"], "".into()),
                "orders[0].id",
                "must not be empty",
            ),
            (
                with(&["id"], "x".repeat(257).into()),
                "orders[0].id",
                "at most 256",
            ),
            (
                with(&["orderDate"], Value::Null),
                "orders[0].orderDate",
                "required",
            ),
            (
                with(&["orderDate"], "2026-11-22 10:00".into()),
                "orders[0].orderDate",
                "RFC 3339",
            ),
            (
                with(&["orderDate"], "2026-11-22T10:00:00".into()),
                "orders[0].orderDate",
                "RFC 3339",
            ),
            (
                with(&["catalogId"], Value::Null),
                "orders[0].catalogId",
                "required",
            ),
            (
                with(&["adIds"], "a".into()),
                "orders[0].adIds",
                "expected an array",
            ),
            (
                with(&["adIds"], serde_json::json!(["a", 1])),
                "orders[0].adIds[1]",
                "expected a string",
            ),
            (
                with(&["orderItems"], Value::Null),
                "orders[0].orderItems",
                "required",
            ),
            (
                with(&["orderItems"], serde_json::json!([])),
                "orders[0].orderItems",
                "at least one",
            ),
            (
                with(&["orderItems", "1", "productCode"], Value::Null),
                "orders[0].orderItems[1].productCode",
                "required",
            ),
            (
                with(&["orderItems", "1", "quantity"], Value::Null),
                "orders[0].orderItems[1].quantity",
                "required",
            ),
            (
                with(&["orderItems", "1", "quantity"], 0.into()),
                "orders[0].orderItems[1].quantity",
                "out of range",
            ),
            (
                with(&["orderItems", "1", "quantity"], (-3).into()),
                "orders[0].orderItems[1].quantity",
                "out of range",
            ),
            (
                with(&["orderItems", "1", "quantity"], 1.5.into()),
                "orders[0].orderItems[1].quantity",
                "not an integer",
            ),
            (
                with(&["orderItems", "1", "quantity"], "2".into()),
                "orders[0].orderItems[1].quantity",
                "got a string",
            ),
            (
                with(&["orderItems", "0", "regularUnitPrice"], (-1.0).into()),
                "orders[0].orderItems[0].regularUnitPrice",
                "out of range",
            ),
            (
                with(
                    &["orderItems", "1", "totalOrderItemPriceAfterDiscounts"],
                    Value::Null,
                ),
                "orders[0].orderItems[1].totalOrderItemPriceAfterDiscounts",
                "required",
            ),
            (
                with(
                    &["orderItems", "1", "totalOrderItemPriceAfterDiscounts"],
                    "9".into(),
                ),
                "orders[0].orderItems[1].totalOrderItemPriceAfterDiscounts",
                "expected a number",
            ),
            (
                with(&["orderItems", "0", "regularUnitPrice"], 1e13.into()),
                "orders[0].orderItems[0].regularUnitPrice",
                "out of range",
            ),
            (
                with(&["currency"], "US".into()),
                "orders[0].currency",
                "ISO 4217",
            ),
            (
                with(&["currency"], 840.into()),
                "orders[0].currency",
                "expected a string",
            ),
            (
                with(&["orderItems", "0", "adId"], serde_json::json!({})),
                "orders[0].orderItems[0].adId",
                "expected a string",
            ),
        ];
        for (body, field, message) in cases {
            let e = err(&body);
            assert_eq!(e.field, field, "{body}: {e}");
            assert!(e.message.contains(message), "{body}: {e}");
        }
        let mut no_ids: Value = serde_json::from_str(GOOD).expect("json");
        let o = no_ids["orders"][0].as_object_mut().expect("object");
        o.remove("customerId");
        o.insert("sessionId".into(), Value::Null);
        let e = err(&no_ids.to_string());
        assert_eq!(e.field, "orders[0].customerId");
        assert!(e.message.contains("customerId or sessionId"));
    }

    #[test]
    fn prices_are_the_exact_decimals_of_their_text_in_the_orders_currency() {
        let body = GOOD
            .replace(
                r#""regularUnitPrice":4.5"#,
                r#""regularUnitPrice":1234567890.12345678"#,
            )
            .replace(
                r#""totalOrderItemPriceAfterDiscounts":8.0"#,
                r#""totalOrderItemPriceAfterDiscounts":19.99"#,
            )
            .replace(r#""teamId":"t-1","#, r#""teamId":"t-1","currency":"eur","#);
        let o = parse_orders(body.as_bytes()).expect("valid").remove(0);
        let item = &o.order_items[0];
        // 18 significant digits: an f64 would hold 1234567890.1234567.
        assert_eq!(item.regular_unit_price, Some(dec("1234567890.12345678")));
        assert_eq!(item.total_order_item_price_after_discounts, dec("19.99"));
        assert_eq!(o.currency().code(), "EUR");
        assert_eq!(o.line_revenue(item).to_string(), "EUR 19.99");
        let at = Utc::now();
        let text = String::from_utf8(record_at(&o, at)).expect("utf-8");
        assert!(
            text.contains(r#""regularUnitPrice":1234567890.12345678,"#),
            "{text}"
        );
        assert!(
            text.contains(r#""totalOrderItemPriceAfterDiscounts":19.99,"#),
            "{text}"
        );
        assert!(text.contains(r#""currency":"EUR""#), "{text}");
        assert_eq!(parse_record(text.as_bytes()).expect("reads back").order, o);
        let three: String = (0..3)
            .map(
                |_| r#"{"productCode":"p","quantity":1,"totalOrderItemPriceAfterDiscounts":19.99}"#,
            )
            .collect::<Vec<_>>()
            .join(",");
        let body = format!(
            r#"{{"orders":[{{"id":"o","customerId":"c","orderDate":"2026-11-22T10:00:00Z","catalogId":"k","orderItems":[{three}]}}]}}"#
        );
        let o = parse_orders(body.as_bytes()).expect("valid").remove(0);
        let sum =
            money::sum_by_currency(o.order_items.iter().map(|i| o.line_revenue(i))).expect("fits");
        assert_eq!(sum[0].to_string(), "USD 59.97");
        let e = err(&GOOD.replace("4.5", "0.123456789"));
        assert_eq!(e.field, "orders[0].orderItems[0].regularUnitPrice");
        assert!(e.message.contains("more than 8 decimals"), "{e}");
    }

    #[test]
    fn records_written_before_exact_money_read_as_before() {
        // A record of the previous version: f64 prices written with their shortest
        // text, no currency.
        let old = r#"{"v":1,"receivedAt":"2026-11-22T10:15:31.002Z","id":"o-1","customerId":"c-1","orderDate":"2026-11-22T10:15:30Z","catalogId":"cat-1","orderItems":[{"productCode":"p-1","quantity":2,"regularUnitPrice":4.5,"totalOrderItemPriceAfterDiscounts":8.0},{"productCode":"p-2","quantity":1,"totalOrderItemPriceAfterDiscounts":0.30000000000000004}]}"#;
        let r = parse_record(old.as_bytes()).expect("an old record reads");
        assert_eq!(r.order.currency(), money::DEFAULT_CURRENCY);
        let items = &r.order.order_items;
        assert_eq!(items[0].regular_unit_price, Some(dec("4.5")));
        assert_eq!(items[0].total_order_item_price_after_discounts, dec("8"));
        assert_eq!(
            items[1].total_order_item_price_after_discounts,
            dec("0.3"),
            "an f64's excess digits, rounded to 8 decimals"
        );
        // The same text as a payload is refused: a request must say what it means.
        assert!(parse_orders(format!(r#"{{"orders":[{old}]}}"#).as_bytes()).is_err());
    }

    #[test]
    fn a_session_id_alone_is_a_tracking_id() {
        let body = with(&["customerId"], Value::Null);
        let o = parse_orders(body.as_bytes()).expect("session id alone is a tracking id");
        assert_eq!(o[0].customer_id, None);
        assert_eq!(o[0].session_id.as_deref(), Some("s-1"));
    }

    #[test]
    fn bounds_and_repeated_ids() {
        let one: Value = serde_json::from_str(GOOD).expect("json");
        let order = one["orders"][0].clone();
        let many = |n: usize| {
            let list: Vec<Value> = (0..n)
                .map(|i| {
                    let mut o = order.clone();
                    o["id"] = format!("o-{i}").into();
                    o
                })
                .collect();
            serde_json::json!({ "orders": list }).to_string()
        };
        assert_eq!(
            parse_orders(many(MAX_ORDERS).as_bytes())
                .expect("max")
                .len(),
            MAX_ORDERS
        );
        let e = err(&many(MAX_ORDERS + 1));
        assert_eq!(e.field, "orders");
        assert!(e.message.contains("at most 1000"), "{e}");
        let twice = serde_json::json!({ "orders": [order.clone(), order] }).to_string();
        let e = err(&twice);
        assert_eq!(e.field, "orders[1].id");
        assert!(e.message.contains("orders[0]"), "{e}");
    }

    #[test]
    fn records_round_trip_and_refuse_unknown_versions() {
        let o = parse_orders(GOOD.as_bytes()).expect("valid").remove(0);
        let at = DateTime::parse_from_rfc3339("2026-11-22T10:15:31.002Z")
            .expect("time")
            .with_timezone(&Utc);
        let bytes = record_at(&o, at);
        let text = String::from_utf8(bytes.clone()).expect("utf-8");
        assert!(
            text.starts_with(r#"{"v":1,"receivedAt":"2026-11-22T10:15:31.002Z","id":"o-1""#),
            "{text}"
        );
        assert!(
            text.contains(r#""orderDate":"2026-11-22T10:15:30+01:00""#),
            "{text}"
        );
        let back = parse_record(&bytes).expect("reads back");
        assert_eq!(back.order, o);
        assert_eq!(back.received_at, at);
        assert_eq!(back.namespace_id, "default", "records before namespaces");
        let acme = record_in("acme", &o, at);
        let text_acme = String::from_utf8(acme.clone()).expect("utf-8");
        assert!(text_acme.contains(r#""namespaceId":"acme""#), "{text_acme}");
        assert_eq!(parse_record(&acme).expect("acme").namespace_id, "acme");
        let bad = text_acme.replace(r#""namespaceId":"acme""#, r#""namespaceId":"A B""#);
        assert_eq!(
            parse_record(bad.as_bytes()).expect_err("bad ns").field,
            "namespaceId"
        );
        let v2 = text.replacen(r#""v":1"#, r#""v":2"#, 1);
        assert_eq!(parse_record(v2.as_bytes()).expect_err("v2").field, "v");
        assert_eq!(parse_record(b"[]").expect_err("array").field, "record");
        assert!(parse_record(&record(&o)).is_ok());
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            "[a-z0-9:T.+-]{0,12}".prop_map(Value::String),
            prop_oneof![
                Just("orders"),
                Just("id"),
                Just("customerId"),
                Just("orderDate"),
                Just("catalogId"),
                Just("orderItems"),
                Just("productCode"),
                Just("quantity"),
                Just("totalOrderItemPriceAfterDiscounts"),
                Just("adIds"),
                Just("2026-11-22T10:15:30Z")
            ]
            .prop_map(|s| Value::String(s.to_owned())),
        ];
        leaf.prop_recursive(5, 64, 8, |inner| {
            let key = prop_oneof![
                Just("orders".to_owned()),
                Just("id".to_owned()),
                Just("customerId".to_owned()),
                Just("sessionId".to_owned()),
                Just("orderDate".to_owned()),
                Just("catalogId".to_owned()),
                Just("orderItems".to_owned()),
                Just("productCode".to_owned()),
                Just("quantity".to_owned()),
                Just("totalOrderItemPriceAfterDiscounts".to_owned()),
                Just("regularUnitPrice".to_owned()),
                Just("adIds".to_owned()),
                Just("adId".to_owned()),
                "[a-z]{1,4}",
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(key, inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = parse_orders(&bytes);
            let _ = parse_record(&bytes);
        }

        #[test]
        fn arbitrary_json_never_panics_and_errors_name_a_field(v in json()) {
            let body = serde_json::json!({ "orders": [v.clone()] }).to_string();
            match parse_orders(body.as_bytes()) {
                Ok(orders) => {
                    prop_assert_eq!(orders.len(), 1);
                    let back = parse_record(&record(&orders[0])).expect("a valid order's record reads back");
                    prop_assert_eq!(&back.order, &orders[0]);
                }
                Err(e) => prop_assert!(e.field.starts_with("orders"), "{}", e),
            }
            let _ = parse_orders(v.to_string().as_bytes());
            let _ = parse_record(v.to_string().as_bytes());
        }

        #[test]
        fn valid_orders_round_trip(
            id in "[a-zA-Z0-9_-]{1,40}",
            customer in proptest::option::of("[a-z0-9]{1,10}"),
            quantities in proptest::collection::vec((1u64..=MAX_QUANTITY, 0i64..100_000_000, 0u32..=4), 1..5),
            secs in 0i64..4_000_000_000,
        ) {
            let items: Vec<Value> = quantities
                .iter()
                .enumerate()
                .map(|(i, (q, m, s))| {
                    let p = Decimal::new(*m, *s);
                    let price: Value = serde_json::from_str(&p.to_string()).expect("a number");
                    serde_json::json!({"productCode": format!("p{i}"), "quantity": q, "totalOrderItemPriceAfterDiscounts": price})
                })
                .collect();
            let date = DateTime::from_timestamp(secs, 0).expect("in range").to_rfc3339();
            let body = serde_json::json!({"orders": [{"id": id, "customerId": customer, "sessionId": "s",
                "orderDate": date, "catalogId": "c", "orderItems": items}]});
            let orders = parse_orders(body.to_string().as_bytes()).expect("valid");
            prop_assert_eq!(orders[0].order_items.len(), quantities.len());
            for (item, (_, m, s)) in orders[0].order_items.iter().zip(&quantities) {
                prop_assert_eq!(item.total_order_item_price_after_discounts, Decimal::new(*m, *s));
            }
            prop_assert_eq!(orders[0].order_date.timestamp(), secs);
            let back = parse_record(&record(&orders[0])).expect("reads back");
            prop_assert_eq!(&back.order, &orders[0]);
        }
    }
}
