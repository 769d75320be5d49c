//! Erasing a shopper's identifiers on request (`DELETE /v1/shoppers/{trackingId}`):
//! what an erasure is, how a stored identifier is replaced, and the rule that keeps
//! an erased identifier from being stored again (pure functions, no I/O).
//!
//! **What is replaced.** Every stored occurrence of the id (as a view's or a cart
//! line's tracking id, a touch's or an order line's customer or session id, and its
//! 64-bit hash: the fact's `shopper`, the served ad's shoppers and view takers) is
//! replaced by the erasure's [`Erasure::replacement`], `erased-` and 32 hex digits of
//! a SHA-256 of a random request id: nothing in it derives from the id, so the
//! stored rows cannot be turned back into it. The same replacement everywhere keeps
//! the store consistent (a view row and the served ad that took its view still agree,
//! a cart line keeps its history), so every count stays as it was.
//!
//! **What is kept.** The erasure record (the audit log: who asked, when, what was
//! replaced) keeps the id's SHA-256 ([`digest`]) and 64-bit hash, never the id once
//! the erasure has settled ([`SETTLE_MS`]): with them an aggregator recognises the
//! id in records still in the log, or sent again, and stores them under the
//! replacement ([`Suppression`]), so an erased id is never stored again.
//!
//! **Scope.** A tenant's erasure covers its namespace only: the rows of ad ids of its
//! namespace ([`Erasure::covers_ad`]) and its orders ([`Erasure::covers_scoped`]);
//! an operator's covers every namespace.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::attribution::{self, OrderLine, ShopperId, Touch};
use super::served::ServedAd;
use super::tallies::sales::OrderCredits;
use super::traffic::shopper_hash;

/// How long after its request an erasure keeps the id itself by default, so that
/// every aggregator can run it again once it has dropped what it cached (ms); after
/// that only its digest and hash remain (`RM_AGGREGATOR_ERASURE_SETTLE_SECS`).
pub const SETTLE_MS: i64 = 10 * 60 * 1000;

/// What starts every replacement.
pub const REPLACEMENT_PREFIX: &str = "erased-";

/// The SHA-256 of an id, 64 lower-case hex digits.
pub fn digest(id: &str) -> String {
    hex(&Sha256::digest(id.as_bytes()))
}

/// The replacement of an erasure requested as `request_id` (a random UUID).
pub fn replacement(request_id: &str) -> String {
    let h = Sha256::digest(format!("rm-erasure\0{request_id}").as_bytes());
    format!("{REPLACEMENT_PREFIX}{}", hex(&h[..16]))
}

fn hex(b: &[u8]) -> String {
    use std::fmt::Write as _;
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

/// One erasure: the request and, once run, what it replaced. Also the audit log's
/// record of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Erasure {
    /// The request's id (a UUID).
    pub request_id: String,
    /// The namespace it covers; `None`: every namespace (an operator's).
    pub namespace: Option<String>,
    /// The id itself until the erasure settles ([`SETTLE_MS`]), then "".
    pub tracking_id: String,
    /// [`digest`] of the id.
    pub digest: String,
    /// The id's 64-bit hash, as facts kept it ([`shopper_hash`]).
    pub hash: u64,
    /// What replaces the id.
    pub replacement: String,
    /// The client that asked.
    pub client_id: String,
    /// When it was asked, ms.
    pub requested_ms: i64,
    /// When it was first run to the end, ms; 0 while pending.
    pub done_ms: i64,
    /// What that run replaced.
    pub erased: Erased,
}

/// Rows (or states) whose identifiers an erasure replaced, per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Erased {
    /// Video views (their derived rows).
    pub views: u64,
    /// Video views' facts.
    pub view_facts: u64,
    /// Product impressions and clicks.
    pub product_facts: u64,
    /// Ad impressions and clicks.
    pub ad_facts: u64,
    /// Cart lines' event rows.
    pub cart_events: u64,
    /// Attribution touches.
    pub touches: u64,
    /// Order lines.
    pub order_lines: u64,
    /// Orders' states (their lines' credits).
    pub order_states: u64,
    /// Stored orders by shopper.
    pub order_shoppers: u64,
    /// Served ads' states (shoppers seen, view takers).
    pub served_ads: u64,
}

impl std::ops::AddAssign for Erased {
    fn add_assign(&mut self, o: Self) {
        self.views += o.views;
        self.view_facts += o.view_facts;
        self.product_facts += o.product_facts;
        self.ad_facts += o.ad_facts;
        self.cart_events += o.cart_events;
        self.touches += o.touches;
        self.order_lines += o.order_lines;
        self.order_states += o.order_states;
        self.order_shoppers += o.order_shoppers;
        self.served_ads += o.served_ads;
    }
}

impl Erased {
    /// Every row replaced.
    pub fn total(&self) -> u64 {
        self.views
            + self.view_facts
            + self.product_facts
            + self.ad_facts
            + self.cart_events
            + self.touches
            + self.order_lines
            + self.order_states
            + self.order_shoppers
            + self.served_ads
    }
}

impl Erasure {
    /// A new pending erasure of `tracking_id` in `namespace` (`None`: every one);
    /// `replacement` is an earlier erasure's of the same id and scope, so that
    /// asking again changes nothing, else this request's.
    pub fn new(
        request_id: String,
        namespace: Option<String>,
        tracking_id: &str,
        client_id: String,
        requested_ms: i64,
        replacement: Option<String>,
    ) -> Self {
        Self {
            replacement: replacement.unwrap_or_else(|| self::replacement(&request_id)),
            request_id,
            namespace,
            tracking_id: tracking_id.to_owned(),
            digest: digest(tracking_id),
            hash: shopper_hash(tracking_id),
            client_id,
            requested_ms,
            done_ms: 0,
            erased: Erased::default(),
        }
    }

    /// The replacement's hash, which replaces [`Self::hash`].
    pub fn new_hash(&self) -> u64 {
        shopper_hash(&self.replacement)
    }

    /// Whether the erasure still holds the id (it has not settled).
    pub fn holds_id(&self) -> bool {
        !self.tracking_id.is_empty()
    }

    /// Whether it covers the rows of this ad id (those of its namespace, told by the
    /// id's prefix, `rm_schemas::ad_id::namespace_prefix`, as ClickHouse tells them;
    /// an operator's, every one).
    pub fn covers_ad(&self, ad_id: &str) -> bool {
        match &self.namespace {
            None => true,
            Some(ns) => ad_id.starts_with(&rm_schemas::ad_id::namespace_prefix(ns)),
        }
    }

    /// Whether it covers this order or cart line (its scoped order id or catalog).
    pub fn covers_scoped(&self, scoped_id: &str) -> bool {
        match &self.namespace {
            None => true,
            Some(ns) => rm_schemas::namespace::split(scoped_id).0 == ns,
        }
    }

    /// Replaces `id` when it is the erased one; true when it did.
    pub fn swap(&self, id: &mut String) -> bool {
        if !self.tracking_id.is_empty() && *id == self.tracking_id {
            id.clone_from(&self.replacement);
            return true;
        }
        false
    }

    /// Replaces the id inside a touch's or an order's shopper (`customer:<id>`).
    pub fn swap_shopper(&self, shopper: &mut String) -> bool {
        for kind in [ShopperId::Customer, ShopperId::Session] {
            if let Some(id) = shopper.strip_prefix(kind.prefix()) {
                if !self.tracking_id.is_empty() && id == self.tracking_id {
                    *shopper = attribution::shopper(kind, &self.replacement);
                    return true;
                }
            }
        }
        false
    }

    /// Replaces the id in a touch of its scope.
    pub fn swap_touch(&self, t: &mut Touch) -> bool {
        self.covers_ad(&t.ad_id) && self.swap_shopper(&mut t.shopper)
    }

    /// Replaces the id in an order line of its scope.
    pub fn swap_line(&self, l: &mut OrderLine) -> bool {
        if !self.covers_scoped(&l.order_id) {
            return false;
        }
        let a = self.swap(&mut l.customer_id);
        let b = self.swap(&mut l.session_id);
        a || b
    }

    /// Replaces the id in an order's state (its lines, their credits' touches).
    pub fn swap_order(&self, o: &mut OrderCredits) -> bool {
        let mut changed = false;
        for l in &mut o.lines {
            changed |= self.swap_line(&mut l.line);
            if let Some((t, _)) = &mut l.credit {
                changed |= self.swap_touch(t);
            }
        }
        changed
    }

    /// Replaces the id's hash in a served ad's state of its scope.
    pub fn swap_served(&self, ad_id: &str, s: &mut ServedAd) -> bool {
        self.covers_ad(ad_id) && s.replace_shopper(self.hash, self.new_hash())
    }
}

/// The erasures an aggregator applies to the records it reads, so that an erased id
/// is stored under its replacement, never again as itself: looked up by the id's
/// 64-bit hash, confirmed by its SHA-256 and scope. The first erasure of an id and
/// scope gives the replacement, as [`Erasure::new`] reuses it.
#[derive(Debug, Default, Clone)]
pub struct Suppression {
    by_hash: HashMap<u64, Vec<Suppressed>>,
    len: usize,
}

#[derive(Debug, Clone)]
struct Suppressed {
    digest: String,
    namespace: Option<String>,
    replacement: String,
}

impl Suppression {
    /// Adds an erasure (one already added, by digest and scope, is kept as it was).
    pub fn add(&mut self, e: &Erasure) {
        let at = self.by_hash.entry(e.hash).or_default();
        if at
            .iter()
            .any(|s| s.digest == e.digest && s.namespace == e.namespace)
        {
            return;
        }
        at.push(Suppressed {
            digest: e.digest.clone(),
            namespace: e.namespace.clone(),
            replacement: e.replacement.clone(),
        });
        self.len += 1;
    }

    /// Ids suppressed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is suppressed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The replacement of `id` in `namespace`, if it was erased there (or everywhere).
    pub fn replacement(&self, id: &str, namespace: Option<&str>) -> Option<&str> {
        if self.len == 0 || id.is_empty() {
            return None;
        }
        let candidates = self.by_hash.get(&shopper_hash(id))?;
        let d = digest(id);
        candidates
            .iter()
            .find(|s| {
                s.digest == d && (s.namespace.is_none() || s.namespace.as_deref() == namespace)
            })
            .map(|s| s.replacement.as_str())
    }

    /// Replaces an erased id inside a shopper (`session:<id>`) in place; true when it
    /// did.
    pub fn apply_shopper(&self, shopper: &mut String, namespace: Option<&str>) -> bool {
        for kind in [ShopperId::Customer, ShopperId::Session] {
            let Some(id) = shopper.strip_prefix(kind.prefix()) else {
                continue;
            };
            if let Some(r) = self.replacement(id, namespace) {
                *shopper = attribution::shopper(kind, r);
                return true;
            }
        }
        false
    }

    /// Replaces an erased id in place; true when it did.
    pub fn apply(&self, id: &mut Option<String>, namespace: Option<&str>) -> bool {
        let Some(v) = id.as_mut() else { return false };
        match self.replacement(v, namespace) {
            Some(r) => {
                *v = r.to_owned();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests;
