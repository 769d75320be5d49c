//! Tests of exact money: the string form, exact sums and products, currencies that
//! never mix, ROAS to its scale.

use super::*;
use proptest::prelude::*;

fn usd(s: &str) -> Money {
    Money::parse(s, DEFAULT_CURRENCY)
        .expect("valid")
        .expect("non-empty")
}

fn dec(s: &str) -> Decimal {
    Decimal::from_str_exact(s).expect("decimal")
}

#[test]
fn the_string_form_reads_symbols_codes_and_bare_amounts() {
    let eur = Currency::from_code("eur").expect("code");
    assert_eq!(usd("$12.50"), Money::new(dec("12.50"), DEFAULT_CURRENCY));
    assert_eq!(usd("€0.5"), Money::new(dec("0.5"), eur));
    assert_eq!(usd("EUR 12"), Money::new(dec("12"), eur));
    assert_eq!(usd("12.50 eur"), Money::new(dec("12.50"), eur));
    assert_eq!(usd("£3").currency.code(), "GBP");
    assert_eq!(usd("US$3").currency.code(), "USD");
    assert_eq!(usd("A$3").currency.code(), "AUD");
    assert_eq!(usd("¥300").amount_text(), "300");
    assert_eq!(
        usd("12").currency,
        DEFAULT_CURRENCY,
        "no marker: the default"
    );
    assert_eq!(
        Money::parse("12", eur).expect("ok").expect("some").currency,
        eur,
        "no marker: the caller's default"
    );
    assert_eq!(usd(".5").amount_text(), "0.50");
    assert_eq!(usd("5.").amount_text(), "5.00");
    assert_eq!(usd("0.10000000000").amount_text(), "0.10", "trailing zeros");
    assert_eq!(Money::parse("", DEFAULT_CURRENCY), Ok(None));
    assert_eq!(Money::parse("  ", DEFAULT_CURRENCY), Ok(None));
    for bad in [
        "$", "-5", "$-5", "1.2.3", "abcd5", "5 $ 5", "$1,000", "1e3", "€5 EUR",
    ] {
        assert!(Money::parse(bad, DEFAULT_CURRENCY).is_err(), "{bad}");
    }
    assert!(matches!(
        Money::parse("-5", DEFAULT_CURRENCY),
        Err(MoneyError::Negative(_))
    ));
    assert!(matches!(
        Money::parse("XY5", DEFAULT_CURRENCY),
        Err(MoneyError::UnknownCurrency(_))
    ));
    assert!(matches!(
        Money::parse("0.123456789", DEFAULT_CURRENCY),
        Err(MoneyError::TooPrecise(_))
    ));
    assert!(matches!(
        Money::parse("1000000000000.01", DEFAULT_CURRENCY),
        Err(MoneyError::TooLarge(_))
    ));
    assert_eq!(usd("1000000000000").amount, MAX_AMOUNT);
}

#[test]
fn the_stable_form_has_the_currencys_minor_units() {
    assert_eq!(usd("$12.5").to_string(), "USD 12.50");
    assert_eq!(usd("$0.105").amount_text(), "0.105");
    assert_eq!(usd("JPY 1200.0").to_string(), "JPY 1200");
    assert_eq!(usd("KWD 1.5").amount_text(), "1.500");
    assert_eq!(
        serde_json::to_string(&usd("€1.5")).expect("json"),
        r#"{"amount":"1.5","currency":"EUR"}"#
    );
    let back: Money = serde_json::from_str(r#"{"amount":"1.5","currency":"EUR"}"#).expect("json");
    assert_eq!(back, usd("€1.5"));
    let bytes = postcard::to_allocvec(&usd("€1.5")).expect("postcard");
    assert_eq!(
        postcard::from_bytes::<Money>(&bytes).expect("postcard"),
        usd("€1.5")
    );
}

#[test]
fn json_number_texts_are_read_exactly() {
    let n = |t: &str| Money::from_number_text(t, DEFAULT_CURRENCY);
    assert_eq!(n("19.99").expect("ok").amount, dec("19.99"));
    assert_eq!(n("8.0").expect("ok").amount_text(), "8.00");
    assert_eq!(n("1e3").expect("ok").amount, dec("1000"));
    assert_eq!(n("4.5E-1").expect("ok").amount, dec("0.45"));
    assert_eq!(
        n("0.1000000000000000001").expect_err("too precise"),
        MoneyError::TooPrecise("0.1000000000000000001".into())
    );
    assert!(matches!(n("-1"), Err(MoneyError::Negative(_))));
    assert!(matches!(n("1e13"), Err(MoneyError::TooLarge(_))));
}

#[test]
fn legacy_floats_read_as_their_shortest_text() {
    let l = |v: f64| Money::from_legacy_f64(v, DEFAULT_CURRENCY).expect("finite");
    assert_eq!(l(19.99).amount, dec("19.99"));
    assert_eq!(l(8.0).amount_text(), "8.00");
    assert_eq!(l(0.1 + 0.2).amount, dec("0.3"), "rounded to 8 decimals");
    assert_eq!(Money::from_legacy_f64(f64::NAN, DEFAULT_CURRENCY), None);
    assert_eq!(Money::from_legacy_f64(-1.0, DEFAULT_CURRENCY), None);
    assert_eq!(decimal_of_f64(-2.5), Some(dec("-2.5")), "signed values too");
    assert_eq!(decimal_of_f64(0.1 * 3.0), Some(dec("0.3")));
    assert_eq!(decimal_of_f64(f64::INFINITY), None);
}

#[test]
fn sums_are_exact_and_never_mix_currencies() {
    let dime = usd("0.1");
    let mut sum = Money::zero(DEFAULT_CURRENCY);
    for _ in 0..10 {
        sum = sum.checked_add(dime).expect("one currency");
    }
    assert_eq!(sum.amount_text(), "1.00");
    assert_eq!(sum, usd("1"));
    let three = [usd("19.99"), usd("19.99"), usd("19.99")];
    let total = sum_by_currency(three).expect("no overflow");
    assert_eq!(total.len(), 1);
    assert_eq!(total[0].amount_text(), "59.97");
    assert_eq!(usd("19.99").times(3).expect("fits").amount_text(), "59.97");
    assert_eq!(
        usd("$1").checked_add(usd("1 EUR")),
        Err(MoneyError::MixedCurrencies {
            left: DEFAULT_CURRENCY,
            right: Currency::from_code("EUR").expect("eur")
        })
    );
    let e = usd("$1").checked_add(usd("1 EUR")).expect_err("mixed");
    assert_eq!(
        e.to_string(),
        "cannot add USD and EUR: amounts of two currencies never add"
    );
    let by = sum_by_currency([usd("$1"), usd("1 EUR"), usd("$2.5")]).expect("sums");
    assert_eq!(
        by.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["EUR 1.00", "USD 3.50"]
    );
    let huge = Money::new(Decimal::MAX, DEFAULT_CURRENCY);
    assert_eq!(huge.checked_add(usd("1")), Err(MoneyError::Overflow));
    assert_eq!(huge.times(2), Err(MoneyError::Overflow));
}

#[test]
fn roas_is_a_ratio_of_one_currency() {
    assert_eq!(roas(usd("59.97"), usd("5")), Some(dec("11.994")));
    assert_eq!(roas(usd("1"), usd("3")), Some(dec("0.333333")));
    assert_eq!(roas(usd("2"), usd("3")), Some(dec("0.666667")));
    assert_eq!(roas(usd("1"), usd("0")), None, "no spend");
    assert_eq!(roas(usd("1"), usd("1 EUR")), None, "two currencies");
    let json = |r: Option<Decimal>| {
        #[derive(Serialize)]
        struct Row {
            #[serde(with = "ratio_number")]
            roas: Option<Decimal>,
        }
        serde_json::to_string(&Row { roas: r }).expect("json")
    };
    assert_eq!(json(Some(dec("11.994"))), r#"{"roas":11.994}"#);
    assert_eq!(json(Some(dec("2.5"))), r#"{"roas":2.5}"#);
    assert_eq!(json(None), r#"{"roas":null}"#);
}

fn cents() -> impl Strategy<Value = Decimal> {
    (0i64..100_000_000, 0u32..=4).prop_map(|(m, s)| Decimal::new(m, s))
}

fn currency() -> impl Strategy<Value = Currency> {
    prop_oneof![
        Just("USD"),
        Just("EUR"),
        Just("GBP"),
        Just("JPY"),
        Just("CHF")
    ]
    .prop_map(|c| Currency::from_code(c).expect("code"))
}

proptest! {
    #[test]
    fn the_string_form_round_trips(a in cents(), c in currency()) {
        let m = Money::new(a, c);
        let back = Money::parse(&m.to_string(), DEFAULT_CURRENCY).expect("parses").expect("some");
        prop_assert_eq!(back, m);
        let bare = Money::parse(&m.amount_text(), c).expect("parses").expect("some");
        prop_assert_eq!(bare, m);
    }

    #[test]
    fn repeated_sums_equal_the_product_exactly(a in cents(), n in 0u64..200) {
        let m = Money::new(a, DEFAULT_CURRENCY);
        let mut sum = Money::zero(DEFAULT_CURRENCY);
        for _ in 0..n {
            sum = sum.checked_add(m).expect("fits");
        }
        prop_assert_eq!(sum.amount, m.times(n).expect("fits").amount);
        // The same sum on integers of the smallest unit: nothing was rounded.
        let units = a.mantissa() * i128::from(n);
        prop_assert_eq!(sum.amount, Decimal::from_i128_with_scale(units, a.scale()));
    }

    #[test]
    fn sums_by_currency_are_the_exact_sums_of_each(
        amounts in proptest::collection::vec((cents(), currency()), 0..40),
    ) {
        let sums = sum_by_currency(amounts.iter().map(|(a, c)| Money::new(*a, *c))).expect("fits");
        let mut currencies: Vec<Currency> = amounts.iter().map(|(_, c)| *c).collect();
        currencies.sort();
        currencies.dedup();
        prop_assert_eq!(sums.iter().map(|m| m.currency).collect::<Vec<_>>(), currencies);
        for s in &sums {
            // Integer arithmetic at scale 4 (every amount fits): the exact sum.
            let exact: i128 = amounts
                .iter()
                .filter(|(_, c)| *c == s.currency)
                .map(|(a, _)| a.mantissa() * 10i128.pow(4 - a.scale()))
                .sum();
            prop_assert_eq!(s.amount, Decimal::from_i128_with_scale(exact, 4));
        }
    }

    #[test]
    fn two_currencies_never_add(a in cents(), b in cents(), c in currency(), d in currency()) {
        let r = Money::new(a, c).checked_add(Money::new(b, d));
        if c == d {
            prop_assert_eq!(r.expect("one currency").currency, c);
        } else {
            prop_assert_eq!(r, Err(MoneyError::MixedCurrencies { left: c, right: d }));
            prop_assert_eq!(roas(Money::new(a, c), Money::new(b, d)), None);
        }
    }

    #[test]
    fn roas_is_the_quotient_to_its_scale(revenue in cents(), spend in cents()) {
        let (rev, sp) = (Money::new(revenue, DEFAULT_CURRENCY), Money::new(spend, DEFAULT_CURRENCY));
        match roas(rev, sp) {
            None => prop_assert!(spend.is_zero()),
            Some(r) => {
                prop_assert!(r.scale() <= ROAS_SCALE);
                // |r x spend - revenue| <= half a unit of the last place, x spend:
                // r is the quotient correctly rounded to ROAS_SCALE decimals.
                let half = Decimal::new(5, ROAS_SCALE + 1);
                let low = exact_add(r, -half).expect("fits") * spend;
                let high = exact_add(r, half).expect("fits") * spend;
                prop_assert!(low <= revenue && revenue <= high, "{} {} {}", r, revenue, spend);
            }
        }
    }

    #[test]
    fn parsing_never_panics(s in ".{0,16}") {
        let _ = Money::parse(&s, DEFAULT_CURRENCY);
        let _ = Money::from_number_text(&s, DEFAULT_CURRENCY);
    }
}
