//! Exact money: a decimal amount ([`rust_decimal::Decimal`], never `f64`) and its
//! ISO 4217 currency, from the request to the report.
//!
//! **String form** (the spec: "Money amounts are strings; a currency symbol prefix
//! appears in most of them and not in `searchTerms[].maxBid`"): an optional currency
//! marker, then a non-negative decimal amount in plain notation (digits, at most one
//! `.`; no sign, exponent, spaces inside or thousands separators): `"$12.50"`,
//! `"€0.5"`, `"12"`, `"EUR 12.50"`, `"12.50 EUR"`. The marker is a symbol or an
//! ISO 4217 code (three ASCII letters, any case, before or after the amount, with or
//! without a space). Symbols ([`SYMBOLS`]):
//!
//! | symbol | code | | symbol | code |
//! |---|---|---|---|---|
//! | `$`, `US$` | USD | | `€` | EUR |
//! | `£` | GBP | | `¥` | JPY |
//! | `₹` | INR | | `₩` | KRW |
//! | `A$` | AUD | | `C$`, `CA$` | CAD |
//! | `NZ$` | NZD | | `HK$` | HKD |
//! | `S$` | SGD | | `R$` | BRL |
//! | `CHF` | CHF (a code) | | `zł` | PLN |
//!
//! A bare `$` is the US dollar. An amount without a marker takes the default its
//! caller gives: a campaign's own currency (that of its other amounts), else the
//! deployment's [`DEFAULT_CURRENCY`] (US dollar). [`Money::parse`] reads the string
//! form; [`Money`]'s `Display` writes it back in one stable form, `<code> <amount>`
//! (`"USD 12.50"`), and [`Money::amount_text`] the amount alone.
//!
//! **Amount text.** At least the currency's minor units as decimals (2 for most, 0 for
//! JPY and KRW, 3 for BHD, JOD, KWD, OMR and TND), more when the amount has them,
//! never trailing zeros beyond that: `12.5` USD is `"12.50"`, `0.105` USD `"0.105"`,
//! `1200` JPY `"1200"`. Amounts have at most [`MAX_SCALE`] decimals and are at most
//! [`MAX_AMOUNT`]; sums and products are exact or fail ([`MoneyError::Overflow`]),
//! never rounded (the arithmetic is on the integer mantissas).
//!
//! **Currencies never mix.** [`Money::checked_add`] of two currencies is
//! [`MoneyError::MixedCurrencies`]; sums over many amounts group by currency
//! ([`sum_by_currency`]). ROAS ([`roas`]) is a ratio of two amounts of one currency,
//! rounded half away from zero to [`ROAS_SCALE`] decimals, `None` across currencies
//! or over a zero spend.
//!
//! **Serde.** [`Currency`] is its code string; [`decimal_text`] writes a `Decimal` as
//! its plain text (`"59.97"`), so JSON reports carry money as strings, and reads it
//! back from a string (postcard and JSON alike).

use std::fmt;
use std::str::FromStr;

pub use rust_decimal::Decimal;
use rust_decimal::RoundingStrategy;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Most decimals of an amount (a price of `0.12345678` is fine, `0.123456789` not).
pub const MAX_SCALE: u32 = 8;
/// Largest amount of one price, bid or limit (10^12, the bound prices had before).
pub const MAX_AMOUNT: Decimal = Decimal::from_parts(3_567_587_328, 232, 0, false, 0);
/// Decimals of a ROAS.
pub const ROAS_SCALE: u32 = 6;

/// An ISO 4217 alphabetic code: three upper-case ASCII letters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Currency([u8; 3]);

/// The deployment's currency of amounts that name none (orders without `currency`,
/// campaigns whose amounts carry no symbol or code): the US dollar.
pub const DEFAULT_CURRENCY: Currency = Currency(*b"USD");

/// The currency symbols the string form reads, longest first where one is the end of
/// another (`US$` before `$`).
pub const SYMBOLS: [(&str, &str); 16] = [
    ("US$", "USD"),
    ("CA$", "CAD"),
    ("NZ$", "NZD"),
    ("HK$", "HKD"),
    ("A$", "AUD"),
    ("C$", "CAD"),
    ("S$", "SGD"),
    ("R$", "BRL"),
    ("$", "USD"),
    ("€", "EUR"),
    ("£", "GBP"),
    ("¥", "JPY"),
    ("₹", "INR"),
    ("₩", "KRW"),
    ("zł", "PLN"),
    ("CHF", "CHF"),
];

impl Currency {
    /// The currency of an ISO 4217 code (three ASCII letters, any case).
    pub fn from_code(code: &str) -> Option<Self> {
        let b = code.as_bytes();
        (b.len() == 3 && b.iter().all(u8::is_ascii_alphabetic)).then(|| {
            Self([
                b[0].to_ascii_uppercase(),
                b[1].to_ascii_uppercase(),
                b[2].to_ascii_uppercase(),
            ])
        })
    }

    /// The currency of a symbol of [`SYMBOLS`] or of a code.
    pub fn from_marker(marker: &str) -> Option<Self> {
        SYMBOLS
            .iter()
            .find(|(s, _)| *s == marker)
            .and_then(|(_, code)| Self::from_code(code))
            .or_else(|| Self::from_code(marker))
    }

    /// The code, like `USD`.
    pub fn code(&self) -> &str {
        // Built only from ASCII letters.
        std::str::from_utf8(&self.0).unwrap_or("XXX")
    }

    /// Decimals the currency's amounts are written with at least (ISO 4217 minor
    /// units: 0 for JPY and KRW, 3 for BHD, JOD, KWD, OMR, TND, else 2).
    pub fn minor_units(&self) -> u32 {
        match &self.0 {
            b"JPY" | b"KRW" => 0,
            b"BHD" | b"JOD" | b"KWD" | b"OMR" | b"TND" => 3,
            _ => 2,
        }
    }
}

impl Default for Currency {
    fn default() -> Self {
        DEFAULT_CURRENCY
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl Serialize for Currency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::from_code(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("'{s}' is not an ISO 4217 code")))
    }
}

/// What is wrong with an amount or a sum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    /// Not the string form (or not a plain decimal number).
    #[error("'{0}' is not a money amount (a currency symbol or code, then a decimal number like $12.50)")]
    Syntax(String),
    /// A currency marker that is neither a known symbol nor a code.
    #[error("'{0}' is not a currency symbol or ISO 4217 code")]
    UnknownCurrency(String),
    /// Below zero.
    #[error("'{0}' is negative; amounts are at least 0")]
    Negative(String),
    /// Above [`MAX_AMOUNT`].
    #[error("'{0}' is out of range: 0 to 1000000000000")]
    TooLarge(String),
    /// More than [`MAX_SCALE`] decimals.
    #[error("'{0}' has more than 8 decimals")]
    TooPrecise(String),
    /// Two currencies in one sum.
    #[error("cannot add {left} and {right}: amounts of two currencies never add")]
    MixedCurrencies {
        /// The first amount's currency.
        left: Currency,
        /// The other's.
        right: Currency,
    },
    /// A sum or product beyond what an exact decimal holds.
    #[error("the amount overflows an exact decimal")]
    Overflow,
}

/// An exact amount in a currency.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Money {
    /// The amount, exact.
    #[serde(with = "decimal_text")]
    pub amount: Decimal,
    /// Its currency.
    pub currency: Currency,
}

impl Money {
    /// `amount` of `currency`.
    pub fn new(amount: Decimal, currency: Currency) -> Self {
        Self { amount, currency }
    }

    /// Zero of `currency`.
    pub fn zero(currency: Currency) -> Self {
        Self::new(Decimal::ZERO, currency)
    }

    /// Reads the string form (module header); amounts without a marker are in
    /// `default`. `Ok(None)` for an empty (or blank) string.
    pub fn parse(s: &str, default: Currency) -> Result<Option<Self>, MoneyError> {
        let t = s.trim();
        if t.is_empty() {
            return Ok(None);
        }
        let digit = |c: char| c.is_ascii_digit() || c == '.';
        let start = t.find(digit).ok_or_else(|| MoneyError::Syntax(t.into()))?;
        let end = t.rfind(digit).map_or(t.len(), |i| i + 1);
        let (prefix, amount, suffix) = (t[..start].trim(), &t[start..end], t[end..].trim());
        let currency = match (prefix.is_empty(), suffix.is_empty()) {
            (true, true) => default,
            (false, true) => marker(prefix, t)?,
            (true, false) => marker(suffix, t)?,
            (false, false) => return Err(MoneyError::Syntax(t.into())),
        };
        let plain = amount.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && amount.bytes().filter(|&b| b == b'.').count() <= 1;
        if !plain {
            return Err(MoneyError::Syntax(t.into()));
        }
        amount_of(amount, t).map(|a| Some(Self::new(a, currency)))
    }

    /// An amount from a JSON number's text (plain or with an exponent, like `4.5`,
    /// `8`, `1e3`), in `currency`, checked like the string form.
    pub fn from_number_text(text: &str, currency: Currency) -> Result<Self, MoneyError> {
        let t = text.trim();
        if t.starts_with('-') {
            return Err(MoneyError::Negative(t.into()));
        }
        let a = if t.bytes().any(|b| b == b'e' || b == b'E') {
            Decimal::from_scientific(t).map_err(|_| MoneyError::Syntax(t.into()))?
        } else {
            return amount_of(t, t).map(|a| Self::new(a, currency));
        };
        check(a.normalize(), t).map(|a| Self::new(a, currency))
    }

    /// An amount the previous version held as `f64` (a price parsed from JSON, then
    /// written back with the shortest text that reads back the same): that text,
    /// rounded to [`MAX_SCALE`] decimals. Non-finite or negative values are `None`.
    pub fn from_legacy_f64(v: f64, currency: Currency) -> Option<Self> {
        if v < 0.0 {
            return None;
        }
        decimal_of_f64(v).map(|a| Self::new(a, currency))
    }

    /// The sum, exact; two currencies are [`MoneyError::MixedCurrencies`].
    pub fn checked_add(self, other: Self) -> Result<Self, MoneyError> {
        if self.currency != other.currency {
            return Err(MoneyError::MixedCurrencies {
                left: self.currency,
                right: other.currency,
            });
        }
        exact_add(self.amount, other.amount)
            .map(|a| Self::new(a, self.currency))
            .ok_or(MoneyError::Overflow)
    }

    /// The amount `n` times (spend = clicks x bid), exact.
    pub fn times(self, n: u64) -> Result<Self, MoneyError> {
        let m = self
            .amount
            .mantissa()
            .checked_mul(i128::from(n))
            .ok_or(MoneyError::Overflow)?;
        Decimal::try_from_i128_with_scale(m, self.amount.scale())
            .map(|a| Self::new(a, self.currency))
            .map_err(|_| MoneyError::Overflow)
    }

    /// The amount alone in its stable text (module header): `"12.50"`.
    pub fn amount_text(&self) -> String {
        amount_text(self.amount, self.currency)
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.currency, self.amount_text())
    }
}

impl fmt::Debug for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn marker(m: &str, whole: &str) -> Result<Currency, MoneyError> {
    Currency::from_marker(m).ok_or_else(|| {
        if m.chars().any(|c| c == '-' || c == '+') {
            MoneyError::Negative(whole.into())
        } else {
            MoneyError::UnknownCurrency(m.into())
        }
    })
}

/// A plain decimal text (digits and at most one `.`, checked by the caller), bounded.
fn amount_of(amount: &str, whole: &str) -> Result<Decimal, MoneyError> {
    if !amount.bytes().any(|b| b.is_ascii_digit()) {
        return Err(MoneyError::Syntax(whole.into()));
    }
    let fraction = amount.split_once('.').map_or("", |(_, f)| f);
    if fraction.trim_end_matches('0').len() > MAX_SCALE as usize {
        return Err(MoneyError::TooPrecise(whole.into()));
    }
    let int = amount
        .split('.')
        .next()
        .unwrap_or("")
        .trim_start_matches('0');
    if int.len() > 13 {
        return Err(MoneyError::TooLarge(whole.into()));
    }
    // Trailing zeros beyond MAX_SCALE carry nothing: drop them so the text fits.
    let fraction = &fraction[..fraction.len().min(MAX_SCALE as usize)];
    let text = format!("{}.{}", if int.is_empty() { "0" } else { int }, fraction);
    let a = Decimal::from_str_exact(text.trim_end_matches('.'))
        .map_err(|_| MoneyError::Syntax(whole.into()))?;
    check(a, whole)
}

fn check(a: Decimal, whole: &str) -> Result<Decimal, MoneyError> {
    if a.is_sign_negative() && !a.is_zero() {
        return Err(MoneyError::Negative(whole.into()));
    }
    if a > MAX_AMOUNT {
        return Err(MoneyError::TooLarge(whole.into()));
    }
    if a.normalize().scale() > MAX_SCALE {
        return Err(MoneyError::TooPrecise(whole.into()));
    }
    let mut a = a;
    a.set_sign_positive(true);
    Ok(a)
}

/// The decimal of an `f64`'s shortest round-trip text (`12.5`, `0.3` for
/// `0.30000000000000004` after rounding), rounded half away from zero to
/// [`MAX_SCALE`] decimals; `None` when not finite or beyond a decimal. For amounts
/// that travel as `f64` (cart conversion values in the log, order lines stored
/// before exact money): a number sent with at most 15 significant digits comes back
/// as exactly the decimal sent.
pub fn decimal_of_f64(v: f64) -> Option<Decimal> {
    if !v.is_finite() {
        return None;
    }
    // `Display` of an f64 is its shortest round-trip text, in plain notation.
    let a = Decimal::from_str(&v.to_string())
        .or_else(|_| Decimal::from_scientific(&format!("{v:e}")))
        .ok()?;
    Some(a.round_dp_with_strategy(MAX_SCALE, RoundingStrategy::MidpointAwayFromZero))
}

/// `a + b` on the integer mantissas at the larger scale: exact, or `None`.
pub fn exact_add(a: Decimal, b: Decimal) -> Option<Decimal> {
    let scale = a.scale().max(b.scale());
    let up = |d: Decimal| {
        10i128
            .checked_pow(scale - d.scale())
            .and_then(|p| d.mantissa().checked_mul(p))
    };
    let sum = up(a)?.checked_add(up(b)?)?;
    Decimal::try_from_i128_with_scale(sum, scale).ok()
}

/// `amount` as text with at least `currency`'s minor units of decimals.
pub fn amount_text(amount: Decimal, currency: Currency) -> String {
    stable(amount, currency).to_string()
}

/// `amount` at the scale of its stable text (module header): no trailing zeros
/// beyond `currency`'s minor units, at least those. The same value.
pub fn stable(amount: Decimal, currency: Currency) -> Decimal {
    let mut a = amount.normalize();
    if a.scale() < currency.minor_units() {
        a.rescale(currency.minor_units());
    }
    a
}

/// Sums amounts per currency (in currency order); `Err` only on overflow.
pub fn sum_by_currency(amounts: impl IntoIterator<Item = Money>) -> Result<Vec<Money>, MoneyError> {
    let mut sums: std::collections::BTreeMap<Currency, Money> = Default::default();
    for m in amounts {
        let acc = sums.entry(m.currency).or_insert(Money::zero(m.currency));
        *acc = acc.checked_add(m)?;
    }
    Ok(sums.into_values().collect())
}

/// Return on ad spend: `revenue / spend` rounded half away from zero to
/// [`ROAS_SCALE`] decimals; `None` when the currencies differ or spend is 0.
pub fn roas(revenue: Money, spend: Money) -> Option<Decimal> {
    if revenue.currency != spend.currency || spend.amount.is_zero() {
        return None;
    }
    revenue
        .amount
        .checked_div(spend.amount)
        .map(|r| r.round_dp_with_strategy(ROAS_SCALE, RoundingStrategy::MidpointAwayFromZero))
        .map(|r| r.normalize())
}

/// Serde of a `Decimal` as its plain text (`"59.97"`), read back from a string.
pub mod decimal_text {
    use super::*;

    /// Writes the decimal's text.
    pub fn serialize<S: Serializer>(d: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&d.to_string())
    }

    /// Reads a decimal from its text.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        let s = String::deserialize(d)?;
        Decimal::from_str_exact(&s).map_err(serde::de::Error::custom)
    }
}

/// Serde of an optional `Decimal` as its plain text, or `null`.
pub mod optional_decimal_text {
    use super::*;

    /// Writes the decimal's text, or `null`.
    pub fn serialize<S: Serializer>(d: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.to_string()),
            None => s.serialize_none(),
        }
    }

    /// Reads a decimal from its text, or `null`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|s| Decimal::from_str_exact(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// Serde of an optional ratio (a ROAS) as a JSON number whose text is the decimal's
/// (`2.5`, `11.994`; `null` for `None`): a ratio is no amount, and a number keeps
/// reports' readers that compare it as one. At most 15 significant digits (a ROAS
/// under 10^9 at [`ROAS_SCALE`]), so the number's shortest text is the decimal's.
pub mod ratio_number {
    use super::*;

    /// Writes the ratio as a number.
    pub fn serialize<S: Serializer>(d: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_f64(f64::from_str(&d.to_string()).unwrap_or(f64::NAN)),
            None => s.serialize_none(),
        }
    }

    /// Reads a ratio back from a number.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
        let v = Option::<f64>::deserialize(d)?;
        v.map(|x| Decimal::from_str(&x.to_string()).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests;
