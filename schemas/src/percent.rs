//! The one percent-decoder: `%HH` escapes (RFC 3986 2.1) and, in form encoding, `+`
//! for a space (`application/x-www-form-urlencoded`). Every text taken from a URL or
//! a form is decoded by [`decode`]; only the [`Rules`] differ, and their presets name
//! who uses which:
//!
//! | preset | `+` | raw bytes | `%` without two hex digits, decoded bytes not UTF-8 | used by |
//! |---|---|---|---|---|
//! | [`Rules::BEACON_QUERY`] | space | RFC 3986 query set only | refused | the beacon query ([`crate::query`]) |
//! | [`Rules::FORM`] | space | any | refused | the api's token form and Basic client credentials |
//! | [`Rules::PATH_SEGMENT`] | kept | any | refused | the api router's path captures (`{id}`) |
//! | [`Rules::LENIENT_FORM`] | space | any | `%` kept as sent, U+FFFD | the api's report and inspector queries |
//!
//! [`Rules::LENIENT_FORM`] decodes exactly as `serde_urlencoded` (`form_urlencoded`)
//! does, so it never fails. [`pairs`] splits a query or form into raw `key=value`
//! pieces, the same way for every caller: on `&`, empty pieces skipped, key and
//! value split on the first `=` (no `=`: an empty value).

use std::borrow::Cow;

/// How [`decode`] treats its input. Use a preset; the fields say what each means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// `+` decodes to a space (form encoding); otherwise it stays `+` (a path).
    pub plus_is_space: bool,
    /// Refuse any raw byte RFC 3986 does not allow in a query (besides `%`):
    /// anything outside `unreserved`, `sub-delims`, `:` `@` `/` `?`.
    pub query_bytes_only: bool,
    /// Refuse a `%` not followed by two hex digits, and decoded bytes that are not
    /// UTF-8. Otherwise such a `%` is kept as sent and invalid UTF-8 becomes U+FFFD.
    pub refuse_malformed: bool,
}

impl Rules {
    /// The beacon's query string: "URL-encoded as a whole", strictly.
    pub const BEACON_QUERY: Rules = Rules {
        plus_is_space: true,
        query_bytes_only: true,
        refuse_malformed: true,
    };
    /// A form body or form-encoded credentials: any raw byte, well-formed escapes.
    pub const FORM: Rules = Rules {
        plus_is_space: true,
        query_bytes_only: false,
        refuse_malformed: true,
    };
    /// One path segment: `+` is itself, well-formed escapes.
    pub const PATH_SEGMENT: Rules = Rules {
        plus_is_space: false,
        query_bytes_only: false,
        refuse_malformed: true,
    };
    /// A query read the way browsers and `serde_urlencoded` read it: never fails.
    pub const LENIENT_FORM: Rules = Rules {
        plus_is_space: true,
        query_bytes_only: false,
        refuse_malformed: false,
    };
}

/// Why a text does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A byte that must be percent-encoded was sent raw ([`Rules::query_bytes_only`]).
    #[error("byte 0x{0:02x} must be percent-encoded in a query string")]
    RawByte(u8),
    /// A `%` without two hex digits after it.
    #[error("'%' must be followed by two hexadecimal digits")]
    BadEscape,
    /// The decoded bytes are not UTF-8.
    #[error("percent-decoded value is not valid UTF-8")]
    NotUtf8,
}

/// True for bytes RFC 3986 allows raw in a query component (plus `%`).
pub const fn allowed_in_query(b: u8) -> bool {
    matches!(b,
        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9'
        | b'-' | b'.' | b'_' | b'~'
        | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
        | b':' | b'@' | b'/' | b'?' | b'%')
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Per byte: [`RAW`] when RFC 3986 does not allow it raw in a query, [`PERCENT`] for
/// `%`, [`PLUS`] for `+`, 0 otherwise: one table lookup per byte for the scan.
const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = if !allowed_in_query(b as u8) {
            RAW
        } else if b as u8 == b'%' {
            PERCENT
        } else if b as u8 == b'+' {
            PLUS
        } else {
            0
        };
        b += 1;
    }
    t
};
const RAW: u8 = 1;
const PERCENT: u8 = 2;
const PLUS: u8 = 4;

/// Decodes `raw` under `rules`; borrows when there is nothing to decode.
pub fn decode(raw: &str, rules: Rules) -> Result<Cow<'_, str>, DecodeError> {
    let bytes = raw.as_bytes();
    // One pass: the classes seen, and the first byte not allowed raw.
    let mut seen = 0u8;
    let mut first_raw = None;
    for &b in bytes {
        let c = CLASS[usize::from(b)];
        if c == RAW && first_raw.is_none() {
            first_raw = Some(b);
        }
        seen |= c;
    }
    if rules.query_bytes_only {
        if let Some(b) = first_raw {
            return Err(DecodeError::RawByte(b));
        }
    }
    let plus = |b: u8| rules.plus_is_space && b == b'+';
    let escapes = PERCENT | if rules.plus_is_space { PLUS } else { 0 };
    if seen & escapes == 0 {
        return Ok(Cow::Borrowed(raw));
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b if plus(b) => out.push(b' '),
            b'%' => {
                let hi = bytes.get(i + 1).copied().and_then(hex);
                let lo = bytes.get(i + 2).copied().and_then(hex);
                match (hi, lo) {
                    (Some(h), Some(l)) => {
                        out.push(h << 4 | l);
                        i += 2;
                    }
                    _ if rules.refuse_malformed => return Err(DecodeError::BadEscape),
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    match String::from_utf8(out) {
        Ok(s) => Ok(Cow::Owned(s)),
        Err(_) if rules.refuse_malformed => Err(DecodeError::NotUtf8),
        Err(e) => Ok(Cow::Owned(
            String::from_utf8_lossy(e.as_bytes()).into_owned(),
        )),
    }
}

/// The raw `(key, value)` pieces of a query or form, not decoded.
pub fn pairs(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
}

/// Every pair of `query`, decoded under `rules`.
pub fn decode_pairs(query: &str, rules: Rules) -> Result<Vec<(String, String)>, DecodeError> {
    pairs(query)
        .map(|(k, v)| {
            Ok((
                decode(k, rules)?.into_owned(),
                decode(v, rules)?.into_owned(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [Rules; 4] = [
        Rules::BEACON_QUERY,
        Rules::FORM,
        Rules::PATH_SEGMENT,
        Rules::LENIENT_FORM,
    ];

    #[test]
    fn presets_differ_only_where_they_say() {
        let d = |s, r| decode(s, r).map(Cow::into_owned);
        assert_eq!(d("a+b%21", Rules::FORM), Ok("a b!".into()));
        assert_eq!(d("a+b%21", Rules::PATH_SEGMENT), Ok("a+b!".into()));
        assert_eq!(d("a b", Rules::FORM), Ok("a b".into()));
        assert_eq!(
            d("a b", Rules::BEACON_QUERY),
            Err(DecodeError::RawByte(b' '))
        );
        for r in [Rules::BEACON_QUERY, Rules::FORM, Rules::PATH_SEGMENT] {
            assert_eq!(d("%zz", r), Err(DecodeError::BadEscape), "{r:?}");
            assert_eq!(d("%4", r), Err(DecodeError::BadEscape), "{r:?}");
            assert_eq!(d("%ff", r), Err(DecodeError::NotUtf8), "{r:?}");
        }
        assert_eq!(d("%zz%4", Rules::LENIENT_FORM), Ok("%zz%4".into()));
        assert_eq!(d("a%ffb", Rules::LENIENT_FORM), Ok("a\u{fffd}b".into()));
        // A raw byte outside the query set is reported before a bad escape.
        assert_eq!(
            d("%zz b", Rules::BEACON_QUERY),
            Err(DecodeError::RawByte(b' '))
        );
        assert!(matches!(
            decode("plain", Rules::FORM),
            Ok(Cow::Borrowed("plain"))
        ));
    }

    #[test]
    fn pairs_split_like_form_urlencoded() {
        let p: Vec<_> = pairs("a=1&&b&c=x=y&=z").collect();
        assert_eq!(p, [("a", "1"), ("b", ""), ("c", "x=y"), ("", "z")]);
        assert_eq!(
            decode_pairs("k=a+b&%41=%42", Rules::FORM),
            Ok(vec![("k".into(), "a b".into()), ("A".into(), "B".into())])
        );
    }

    /// The scan as it was before the byte-class table (two passes), for the test below.
    fn reference_scan(raw: &str, rules: Rules) -> Option<Result<(), DecodeError>> {
        let bytes = raw.as_bytes();
        if rules.query_bytes_only {
            if let Some(&b) = bytes.iter().find(|b| !allowed_in_query(**b)) {
                return Some(Err(DecodeError::RawByte(b)));
            }
        }
        let plus = |b: u8| rules.plus_is_space && b == b'+';
        (!bytes.iter().any(|&b| b == b'%' || plus(b))).then_some(Ok(()))
    }

    proptest! {
        /// The one-pass scan refuses and borrows exactly where the two passes did.
        #[test]
        fn the_one_pass_scan_is_the_two_pass_scan(s in "([a-z%+ =&#\"<>]|%[0-9a-fA-F]{2}|\\PC){0,30}") {
            for r in ALL {
                let got = decode(&s, r);
                match reference_scan(&s, r) {
                    Some(Err(e)) => prop_assert_eq!(got, Err(e)),
                    Some(Ok(())) => prop_assert!(matches!(got, Ok(Cow::Borrowed(_)))),
                    None => prop_assert!(!matches!(got, Ok(Cow::Borrowed(_)))),
                }
            }
        }

        /// Every preset inverts full percent-encoding of any text.
        #[test]
        fn decode_inverts_percent_encoding(s in "\\PC{0,30}") {
            let enc: String = s.bytes().map(|b| format!("%{b:02X}")).collect();
            for r in ALL {
                prop_assert_eq!(decode(&enc, r).map(Cow::into_owned), Ok(s.clone()));
            }
        }

        /// The lenient preset reads any query exactly as `serde_urlencoded` does.
        #[test]
        fn lenient_form_agrees_with_serde_urlencoded(q in "([a-z%+=&]|%[0-9a-fA-F]{2}|\\PC){0,40}") {
            let theirs: Vec<(String, String)> = serde_urlencoded::from_str(&q).expect("decodes");
            prop_assert_eq!(decode_pairs(&q, Rules::LENIENT_FORM), Ok(theirs));
        }

        /// Strict presets refuse or decode, never panic; a strict success is also the
        /// lenient answer.
        #[test]
        fn strict_success_is_the_lenient_answer(s in "([a-z%+ ]|%[0-9a-fA-F]{2}|\\PC){0,30}") {
            for r in [Rules::BEACON_QUERY, Rules::FORM] {
                if let Ok(v) = decode(&s, r) {
                    prop_assert_eq!(Ok(v), decode(&s, Rules::LENIENT_FORM));
                }
            }
        }
    }
}
