//! The one place that maps a realised ad id to its campaign.
//!
//! Realised ad ids served by the api are self-describing: `rm1.<campaignId>.<rest>`
//! (the signature and its verification arrive with ad serving). Any other ad id has
//! no known campaign and is reported under the empty campaign id.

/// Prefix of self-describing realised ad ids.
pub const AD_ID_PREFIX: &str = "rm1.";

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
