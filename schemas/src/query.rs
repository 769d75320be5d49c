//! Strict decoding of a beacon's raw query string, with the one percent-decoder
//! ([`crate::percent`], preset [`Rules::BEACON_QUERY`]).
//!
//! Decoding follows `application/x-www-form-urlencoded` as `serde_urlencoded` (and
//! `form_urlencoded`) do it: pairs split on `&`, empty pieces skipped, key and value
//! split on the first `=`, `+` decodes to a space, `%HH` to a byte. Where those
//! crates are lenient we are strict, because the spec requires the query string to be
//! "URL-encoded as a whole". A query is **not URL-encoded** when:
//!
//! 1. it holds a byte RFC 3986 does not allow raw in a query: anything outside
//!    `unreserved` (`A-Z a-z 0-9 - . _ ~`), `sub-delims` (`! $ & ' ( ) * + , ; =`),
//!    `:` `@` `/` `?` and `%` (so space, `"`, `<`, `>`, `[`, `]`, `{`, `}`, `|`, `\`,
//!    `^`, `` ` ``, control bytes and every non-ASCII byte are refused);
//! 2. a `%` is not followed by two hex digits;
//! 3. a decoded key or value is not valid UTF-8.
//!
//! The one exception: a value that is exactly a VAST macro (`[TIMESTAMP]`,
//! `[CACHEBUSTING]`, raw or percent-encoded) is reported as an unexpanded macro,
//! which says more to the integrator than "not encoded".

use std::borrow::Cow;

use crate::percent::{self, Rules};
use crate::rejection::{RejectReason, Rejection};

/// One decoded `key=value` pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair<'a> {
    /// Decoded key.
    pub key: Cow<'a, str>,
    /// Decoded value (empty when the piece had no `=`).
    pub value: Cow<'a, str>,
    /// True when the value is a VAST macro left unexpanded (`[NAME]`).
    pub is_macro: bool,
}

/// True when `s` is a VAST macro such as `[TIMESTAMP]`: brackets around upper-case
/// letters, digits and underscores.
pub fn is_vast_macro(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 3
        && b[0] == b'['
        && b[b.len() - 1] == b']'
        && b[1..b.len() - 1]
            .iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
}

/// Decodes one component with [`Rules::BEACON_QUERY`]; `field` names the component
/// in the rejection.
fn decode_component<'a>(raw: &'a str, field: &str) -> Result<Cow<'a, str>, Rejection> {
    percent::decode(raw, Rules::BEACON_QUERY)
        .map_err(|e| Rejection::new(RejectReason::UrlNotEncoded, field.to_owned(), e.to_string()))
}

/// Decodes a raw query string (without the leading `?`) into pairs, strictly.
pub fn decode_query(query: &str) -> Result<Vec<Pair<'_>>, Rejection> {
    let mut pairs = Vec::with_capacity(8);
    for (raw_key, raw_value) in percent::pairs(query) {
        let key = decode_component(raw_key, "query")?;
        if is_vast_macro(raw_value) {
            pairs.push(Pair {
                key,
                value: Cow::Borrowed(raw_value),
                is_macro: true,
            });
            continue;
        }
        let value = decode_component(raw_value, &key)?;
        let is_macro = is_vast_macro(&value);
        pairs.push(Pair {
            key,
            value,
            is_macro,
        });
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decoded(q: &str) -> Vec<(String, String)> {
        decode_query(q)
            .expect("valid")
            .into_iter()
            .map(|p| (p.key.into_owned(), p.value.into_owned()))
            .collect()
    }

    #[test]
    fn decodes_like_form_urlencoded() {
        assert_eq!(
            decoded("a=1&b=x%20y&c=p+q&&d&e="),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "x y".into()),
                ("c".into(), "p q".into()),
                ("d".into(), "".into()),
                ("e".into(), "".into())
            ]
        );
        assert_eq!(decoded("k=%C3%A9t%C3%A9"), vec![("k".into(), "été".into())]);
        assert_eq!(decoded("k=a=b"), vec![("k".into(), "a=b".into())]);
    }

    #[test]
    fn refuses_raw_bytes_outside_rfc3986() {
        for q in [
            "a=b c", "a=\"x\"", "a=<b>", "a=b|c", "a={x}", "a=\\", "a=^", "a=`", "a=\u{e9}",
            "a=\t", "a=[x",
        ] {
            let r = decode_query(q).expect_err(q);
            assert_eq!(r.reason, RejectReason::UrlNotEncoded, "{q}");
            assert_eq!(r.field, "a", "{q}");
        }
    }

    #[test]
    fn refuses_malformed_escapes_and_bad_utf8() {
        for q in ["a=%", "a=%4", "a=%zz", "a=%4g", "a=%C3", "a=%FF%FE"] {
            assert_eq!(
                decode_query(q).expect_err(q).reason,
                RejectReason::UrlNotEncoded,
                "{q}"
            );
        }
    }

    #[test]
    fn recognises_macros_raw_and_encoded() {
        for q in [
            "timestamp=[TIMESTAMP]",
            "timestamp=%5BTIMESTAMP%5D",
            "timestamp=%5bTIMESTAMP%5d",
        ] {
            let p = &decode_query(q).expect(q)[0];
            assert!(p.is_macro, "{q}");
            assert_eq!(p.value.to_ascii_uppercase(), "[TIMESTAMP]");
        }
        assert!(!is_vast_macro("[]"));
        assert!(!is_vast_macro("[lower]"));
        assert!(is_vast_macro("[CACHEBUSTING]"));
    }

    #[test]
    fn plus_is_a_space_so_raw_offsets_break() {
        let p = &decode_query("timestamp=2026-01-01T00:00:00+01:00").expect("decodes")[0];
        assert_eq!(p.value, "2026-01-01T00:00:00 01:00");
    }

    proptest! {
        /// On every well-encoded query, our decoding equals serde_urlencoded's.
        #[test]
        fn agrees_with_serde_urlencoded(pairs in proptest::collection::vec(("[a-zA-Z]{1,8}", "\\PC{0,12}"), 0..6)) {
            let q = serde_urlencoded::to_string(&pairs).expect("encode");
            let theirs: Vec<(String, String)> = serde_urlencoded::from_str(&q).expect("decode");
            let ours: Vec<(String, String)> = decode_query(&q)
                .expect("ours decodes what serde_urlencoded encodes")
                .into_iter()
                .map(|p| (p.key.into_owned(), p.value.into_owned()))
                .collect();
            prop_assert_eq!(ours, theirs);
        }

        /// Arbitrary bytes never panic; when accepted, every raw byte was allowed.
        #[test]
        fn never_panics(s in "\\PC{0,64}") {
            if decode_query(&s).is_ok() {
                prop_assert!(s.bytes().filter(|b| !b"[]".contains(b)).all(percent::allowed_in_query));
            }
        }
    }
}
