//! The one place reports map a realised ad id to its campaign and namespace.
//!
//! Realised ad ids are `rm1.<campaignId>.<creative>.<expiry>.<nonce>.<signature>`,
//! or `rm2.<namespace>.<campaignId>...` outside the `default` namespace
//! (`rm_schemas::ad_id`). The edge verifies the signature and records its verdict in
//! the record (`adIdVerdict`); the reports read the campaign from the `rm1.` prefix
//! whatever that verdict, and show the verdict beside the counts ([`super::status`]),
//! so an unverified id still lands under the campaign it names, flagged. This is more
//! lenient than `rm_schemas::ad_id::campaign_of`, which wants all six parts: any
//! `rm1.<campaignId>` or `rm2.<namespace>.<campaignId>` prefix names a campaign here.
//! Any other ad id has no campaign and is reported under the empty campaign id; its
//! namespace is `default`.

/// Prefix of self-describing realised ad ids.
pub const AD_ID_PREFIX: &str = rm_schemas::ad_id::PREFIX;

use rm_schemas::namespace;

/// The namespace and the rest of an `rm2` id, when it is one.
fn namespaced(ad_id: &str) -> Option<(&str, &str)> {
    let (ns, rest) = ad_id
        .strip_prefix(rm_schemas::ad_id::PREFIX_NS)?
        .split_once('.')?;
    (namespace::valid(ns) && ns != namespace::DEFAULT).then_some((ns, rest))
}

/// The namespace a realised ad id names (`default` for `rm1` and foreign ids).
pub fn namespace_str(ad_id: &str) -> &str {
    namespaced(ad_id).map_or(namespace::DEFAULT, |(ns, _)| ns)
}

/// The campaign a realised ad id belongs to ("" when unknown).
pub fn campaign_of(ad_id: &str) -> String {
    campaign_str(ad_id).to_owned()
}

/// [`campaign_of`] without a copy: the campaign as a slice of the ad id.
pub fn campaign_str(ad_id: &str) -> &str {
    ad_id
        .strip_prefix(AD_ID_PREFIX)
        .or_else(|| namespaced(ad_id).map(|(_, rest)| rest))
        .and_then(|rest| rest.split('.').next())
        .filter(|c| !c.is_empty())
        .unwrap_or_default()
}

/// The creative a realised ad id names ("" when the id is not shaped like ours or
/// names a longer one than an id can carry): what the ads and products reports' rows
/// are keyed by, instead of the id itself, which is unique per served ad.
pub fn creative_of(ad_id: &str) -> String {
    rm_schemas::ad_id::parse(ad_id)
        .map(|a| a.creative)
        .filter(|c| c.len() <= rm_schemas::ad_id::MAX_CREATIVE_BYTES)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn campaign_comes_from_the_ad_id() {
        assert_eq!(campaign_of("rm1.camp-7.cr-1.abc.sig"), "camp-7");
        assert_eq!(campaign_of("rm1.camp-7"), "camp-7");
        assert_eq!(campaign_of("rm1..x"), "");
        assert_eq!(campaign_of("ad-1"), "");
        assert_eq!(campaign_str("rm1.camp-7.cr-1"), "camp-7");
        assert_eq!(campaign_of("rm2.acme.camp-7.cr-1"), "camp-7");
        assert_eq!(namespace_str("rm2.acme.camp-7.cr-1"), "acme");
        assert_eq!(namespace_str("rm1.camp-7.cr-1"), "default");
        assert_eq!(namespace_str("rm2.Bad.camp-7"), "default");
        assert_eq!(campaign_of("rm2.Bad.camp-7"), "");
        assert_eq!(campaign_of("rm2.default.camp-7"), "", "default ids are rm1");
        let keys = rm_schemas::ad_id::AdIdKeys::new(vec![b"0123456789abcdef-key".to_vec()])
            .expect("a valid key");
        let id = keys.mint("camp-7", "p:sku-1", 2_000).expect("a valid id");
        assert_eq!(creative_of(&id), "p:sku-1");
        assert_eq!(creative_of("rm1.camp-7.cr-1"), "");
    }
}
