//! Identifiers do not live forever (`RM_IDENTIFIER_RETENTION_DAYS`, 90 by default):
//! once a row is older than the retention, the shopper ids it keeps are replaced by
//! keyed hashes, so its counts stay and the raw ids go (pure functions, no I/O).
//!
//! **What replaces an id.** `aged-` and 32 hex digits of SHA-256(key `|` id)
//! ([`Ageing::pseudonym`]); a 64-bit hash of an id (a fact's `shopper`) becomes the
//! first 8 bytes, little-endian, of SHA-256(key `#` its decimal text)
//! ([`Ageing::hash`]). The key is the deployment's secret (`RM_IDENTIFIER_KEY`, else
//! a key generated once under the data dir) passed through SHA-256, written as 64 hex
//! digits: ClickHouse computes the same values in SQL (`SHA256`, `hex`,
//! `reinterpretAsUInt64`, on 18.16 as on current releases), so a pass moves no id
//! through the aggregator. The same id ages to the same pseudonym in every table and
//! every pass, so an aged view, its facts and its served ad still agree, and a
//! shopper's aged rows still count as one shopper; without the key, nothing links a
//! pseudonym to the id (an unkeyed hash of a known id would).
//!
//! **What is kept as it is.** An empty id, and ids that are already not a shopper's:
//! pseudonyms ([`PREFIX`]), erasures' replacements (`erased-`) and the daily
//! pseudonyms of events without consent (`anon-`), each followed by exactly 32 hex
//! digits ([`kept`], [`KEPT_PATTERN`] in SQL): so a pass is idempotent, row by row.
//!
//! **Which rows are old.** A row whose time is before [`Ageing::before_ms`]: a fact's
//! receive time, a view's day, a touch's or an order's time, the newest event of a
//! cart line (a line still in use keeps its id whole). The retention must exceed the
//! attribution windows and the late horizon (the binary refuses less), so no aged row
//! is ever looked up by shopper again: an order older than the click window takes no
//! credit, a late event older than the horizon is not aggregated.

use sha2::{Digest as _, Sha256};

use super::attribution::{self, OrderLine, ShopperId, Touch};
use super::tallies::sales::OrderCredits;

/// What starts every pseudonym.
pub const PREFIX: &str = "aged-";

/// Default of `RM_IDENTIFIER_RETENTION_DAYS`.
pub const DEFAULT_RETENTION_DAYS: u32 = 90;

/// The ids a pass keeps as they are, as a regular expression (RE2, as ClickHouse's
/// `match` reads it); the empty id too.
pub const KEPT_PATTERN: &str = "^(aged|erased|anon)-[0-9a-f]{32}$";

/// Whether `id` is kept as it is: empty, or already not a shopper's (see the module
/// header).
pub fn kept(id: &str) -> bool {
    if id.is_empty() {
        return true;
    }
    let rest = ["aged-", "erased-", "anon-"]
        .iter()
        .find_map(|p| id.strip_prefix(p));
    rest.is_some_and(|r| r.len() == 32 && r.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The deployment's ageing key: SHA-256 of its secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AgeingKey([u8; 32]);

impl std::fmt::Debug for AgeingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgeingKey(..)")
    }
}

impl AgeingKey {
    /// The key of a deployment's `secret`.
    pub fn new(secret: &[u8]) -> Self {
        let mut h = Sha256::new();
        h.update(b"rm-identifier-ageing|");
        h.update(secret);
        Self(h.finalize().into())
    }
}

/// One pass: the key, and the time before which rows are old.
#[derive(Clone, PartialEq, Eq)]
pub struct Ageing {
    key: String,
    /// Rows dated before this (ms) are old.
    pub before_ms: i64,
}

impl std::fmt::Debug for Ageing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ageing")
            .field("before_ms", &self.before_ms)
            .finish_non_exhaustive()
    }
}

fn hex(b: &[u8]) -> String {
    use std::fmt::Write as _;
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

impl Ageing {
    /// A pass with `key` over the rows dated before `before_ms`.
    pub fn new(key: AgeingKey, before_ms: i64) -> Self {
        Self {
            key: hex(&key.0),
            before_ms,
        }
    }

    /// The key as the SQL of a store binds it (64 hex digits).
    pub fn key_text(&self) -> &str {
        &self.key
    }

    /// The first UTC day that is not old (views are dated by day): rows of days
    /// before it are old.
    pub fn before_day(&self) -> i32 {
        let day = self.before_ms.div_euclid(super::DAY_MS);
        i32::try_from(day).unwrap_or(if day > 0 { i32::MAX } else { i32::MIN })
    }

    /// The pseudonym of `id`.
    pub fn pseudonym(&self, id: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.key.as_bytes());
        h.update(b"|");
        h.update(id.as_bytes());
        format!("{PREFIX}{}", hex(&h.finalize()[..16]))
    }

    /// The aged form of a 64-bit hash of an id (0, no shopper, stays 0).
    pub fn hash(&self, h: u64) -> u64 {
        if h == 0 {
            return 0;
        }
        let mut d = Sha256::new();
        d.update(self.key.as_bytes());
        d.update(b"#");
        d.update(h.to_string().as_bytes());
        let out = d.finalize();
        let mut b = [0u8; 8];
        b.copy_from_slice(&out[..8]);
        u64::from_le_bytes(b)
    }

    /// Ages `id` in place unless it is [`kept`]; true when it did.
    pub fn age(&self, id: &mut String) -> bool {
        if kept(id) {
            return false;
        }
        *id = self.pseudonym(id);
        true
    }

    /// The aged form of a shopper (`customer:<id>`, `session:<id>`): the id aged,
    /// the kind kept; `None` when it is kept as it is.
    pub fn aged_shopper(&self, shopper: &str) -> Option<String> {
        for kind in [ShopperId::Customer, ShopperId::Session] {
            if let Some(id) = shopper.strip_prefix(kind.prefix()) {
                return (!kept(id)).then(|| attribution::shopper(kind, &self.pseudonym(id)));
            }
        }
        None
    }

    /// Ages a shopper in place; true when it did.
    pub fn age_shopper(&self, shopper: &mut String) -> bool {
        match self.aged_shopper(shopper) {
            Some(s) => {
                *shopper = s;
                true
            }
            None => false,
        }
    }

    /// Whether a shopper (`customer:<id>`) is kept as it is.
    pub fn keeps_shopper(shopper: &str) -> bool {
        [ShopperId::Customer, ShopperId::Session]
            .iter()
            .find_map(|k| shopper.strip_prefix(k.prefix()))
            .is_none_or(kept)
    }

    /// Ages a touch's shopper; true when it did.
    pub fn age_touch(&self, t: &mut Touch) -> bool {
        self.age_shopper(&mut t.shopper)
    }

    /// Ages an order line's customer and session ids; true when it did.
    pub fn age_line(&self, l: &mut OrderLine) -> bool {
        let a = self.age(&mut l.customer_id);
        let b = self.age(&mut l.session_id);
        a || b
    }

    /// Ages an order's state: its lines, and their credits' touches; true when it
    /// did.
    pub fn age_order(&self, o: &mut OrderCredits) -> bool {
        let mut changed = false;
        for l in &mut o.lines {
            changed |= self.age_line(&mut l.line);
            if let Some((t, _)) = &mut l.credit {
                changed |= self.age_touch(t);
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests;
