//! The one place reports map a realised ad id to its campaign.
//!
//! Realised ad ids are `rm1.<campaignId>.<creative>.<expiry>.<nonce>.<signature>`
//! (`rm_schemas::ad_id`). The edge verifies the signature and records its verdict in
//! the record (`adIdVerdict`); the reports read the campaign from the `rm1.` prefix
//! whatever that verdict, and show the verdict beside the counts ([`super::status`]),
//! so an unverified id still lands under the campaign it names, flagged. This is more
//! lenient than `rm_schemas::ad_id::campaign_of`, which wants all six parts: any
//! `rm1.<campaignId>` prefix names a campaign here. Any other ad id has no campaign
//! and is reported under the empty campaign id.

/// Prefix of self-describing realised ad ids.
pub const AD_ID_PREFIX: &str = rm_schemas::ad_id::PREFIX;

/// The campaign a realised ad id belongs to ("" when unknown).
pub fn campaign_of(ad_id: &str) -> String {
    campaign_str(ad_id).to_owned()
}

/// [`campaign_of`] without a copy: the campaign as a slice of the ad id.
pub fn campaign_str(ad_id: &str) -> &str {
    ad_id
        .strip_prefix(AD_ID_PREFIX)
        .and_then(|rest| rest.split('.').next())
        .filter(|c| !c.is_empty())
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
    }
}
