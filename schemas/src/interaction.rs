//! The 15 interaction types of the spec ("Events", "Interaction types") and what
//! each one requires, plus the two ad events of the service's own impression and click
//! endpoints (`adImpression`, `adClick`). Those two are not beacon types: they are not
//! in [`InteractionType::ALL`], so `interactionType=adImpression` on the interaction
//! beacon is refused as an unknown type; only `GET /v1/events/ad/impression` and
//! `/click` produce them (see [`InteractionType::AD_EVENTS`]).

use serde::{Deserialize, Serialize};

/// One `interactionType` value of the beacon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum InteractionType {
    /// First video frame rendered.
    VideoCreativeView,
    /// Playback starts.
    VideoPlay,
    /// 25% watched.
    VideoFirstQuartile,
    /// 50% watched.
    VideoMidpoint,
    /// 75% watched.
    VideoThirdQuartile,
    /// 100% watched.
    VideoComplete,
    /// User skips before complete.
    VideoSkip,
    /// User pauses.
    VideoPause,
    /// User resumes after pause.
    VideoResume,
    /// User mutes.
    VideoMute,
    /// User unmutes.
    VideoUnmute,
    /// A product tile becomes visible under the viewability rule.
    ProductImpression,
    /// Shopper clicks a product tile.
    ProductClick,
    /// Click on a non-product creative element.
    CreativeClick,
    /// Any cart change from the ad context (absolute units).
    Cart,
    /// A served ad was shown: the ad's impression URL (VAST `Impression`, or the
    /// `impressionUrl` of a product or banner ad). Only the impression endpoint makes it.
    AdImpression,
    /// A served ad was clicked: the ad's click URL (VAST `ClickTracking`, or the
    /// `clickUrl`). Only the click endpoint makes it.
    AdClick,
}

/// Which extra parameters an interaction type requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// `videoId`.
    Video,
    /// `productCode` and `catalogId`.
    Product,
    /// `creativeId`.
    Creative,
    /// `productCode`, `catalogId` and `units` (optional `conversionValue`).
    Cart,
}

impl InteractionType {
    /// Every type, in the order of the spec's table.
    pub const ALL: [InteractionType; 15] = [
        Self::VideoCreativeView,
        Self::VideoPlay,
        Self::VideoFirstQuartile,
        Self::VideoMidpoint,
        Self::VideoThirdQuartile,
        Self::VideoComplete,
        Self::VideoSkip,
        Self::VideoPause,
        Self::VideoResume,
        Self::VideoMute,
        Self::VideoUnmute,
        Self::ProductImpression,
        Self::ProductClick,
        Self::CreativeClick,
        Self::Cart,
    ];

    /// The two ad events of the impression and click endpoints (not beacon types).
    pub const AD_EVENTS: [InteractionType; 2] = [Self::AdImpression, Self::AdClick];

    /// True for [`InteractionType::AdImpression`] and [`InteractionType::AdClick`].
    pub const fn is_ad_event(self) -> bool {
        matches!(self, Self::AdImpression | Self::AdClick)
    }

    /// The wire name, as sent in `interactionType`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::VideoCreativeView => "videoCreativeView",
            Self::VideoPlay => "videoPlay",
            Self::VideoFirstQuartile => "videoFirstQuartile",
            Self::VideoMidpoint => "videoMidpoint",
            Self::VideoThirdQuartile => "videoThirdQuartile",
            Self::VideoComplete => "videoComplete",
            Self::VideoSkip => "videoSkip",
            Self::VideoPause => "videoPause",
            Self::VideoResume => "videoResume",
            Self::VideoMute => "videoMute",
            Self::VideoUnmute => "videoUnmute",
            Self::ProductImpression => "productImpression",
            Self::ProductClick => "productClick",
            Self::CreativeClick => "creativeClick",
            Self::Cart => "cart",
            Self::AdImpression => "adImpression",
            Self::AdClick => "adClick",
        }
    }

    /// Parses the wire name of a beacon type exactly (case-sensitive, as the spec
    /// spells it); the ad events are not beacon types and do not parse.
    pub fn from_wire(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The parameters this type needs besides the common ones. (The ad events need
    /// none; their endpoints validate them without this table, and this answers
    /// `Video` for them only because the set of requirements is closed.)
    pub const fn requirement(self) -> Requirement {
        match self {
            Self::ProductImpression | Self::ProductClick => Requirement::Product,
            Self::CreativeClick => Requirement::Creative,
            Self::Cart => Requirement::Cart,
            _ => Requirement::Video,
        }
    }

    /// True for the six funnel milestones (rule 1), in funnel order.
    pub const fn funnel_step(self) -> Option<u8> {
        match self {
            Self::VideoCreativeView => Some(0),
            Self::VideoPlay => Some(1),
            Self::VideoFirstQuartile => Some(2),
            Self::VideoMidpoint => Some(3),
            Self::VideoThirdQuartile => Some(4),
            Self::VideoComplete => Some(5),
            _ => None,
        }
    }

    /// True for the five video control events (rule 2).
    pub const fn is_video_control(self) -> bool {
        matches!(
            self,
            Self::VideoSkip
                | Self::VideoPause
                | Self::VideoResume
                | Self::VideoMute
                | Self::VideoUnmute
        )
    }
}

impl std::fmt::Display for InteractionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_and_are_distinct() {
        let mut names: Vec<&str> = InteractionType::ALL.iter().map(|t| t.as_str()).collect();
        for t in InteractionType::ALL {
            assert_eq!(InteractionType::from_wire(t.as_str()), Some(t));
            let json = serde_json::to_string(&t).expect("serialize");
            assert_eq!(json, format!("\"{}\"", t.as_str()));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 15);
        for t in InteractionType::AD_EVENTS {
            assert!(t.is_ad_event() && !InteractionType::ALL.contains(&t));
            assert_eq!(InteractionType::from_wire(t.as_str()), None, "{t}");
            let json = serde_json::to_string(&t).expect("serialize");
            assert_eq!(json, format!("\"{}\"", t.as_str()));
            assert_eq!(serde_json::from_str::<InteractionType>(&json).ok(), Some(t));
        }
    }

    #[test]
    fn unknown_and_miscased_names_do_not_parse() {
        for bad in ["", "videoplay", "VideoPlay", "click", "productImpression "] {
            assert_eq!(InteractionType::from_wire(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn requirements_follow_the_spec_table() {
        use InteractionType as T;
        let video = [
            T::VideoCreativeView,
            T::VideoPlay,
            T::VideoFirstQuartile,
            T::VideoMidpoint,
            T::VideoThirdQuartile,
            T::VideoComplete,
            T::VideoSkip,
            T::VideoPause,
            T::VideoResume,
            T::VideoMute,
            T::VideoUnmute,
        ];
        for t in video {
            assert_eq!(t.requirement(), Requirement::Video, "{t}");
        }
        assert_eq!(T::ProductImpression.requirement(), Requirement::Product);
        assert_eq!(T::ProductClick.requirement(), Requirement::Product);
        assert_eq!(T::CreativeClick.requirement(), Requirement::Creative);
        assert_eq!(T::Cart.requirement(), Requirement::Cart);
        let steps: Vec<u8> = T::ALL.iter().filter_map(|t| t.funnel_step()).collect();
        assert_eq!(steps, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(T::ALL.iter().filter(|t| t.is_video_control()).count(), 5);
    }
}
