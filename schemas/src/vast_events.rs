//! The VAST tracking events we report and the interaction type each maps to (spec,
//! Events, rules 5 and 6), as data.
//!
//! [`MAPPED`] is rule 6: the `event` attribute of a VAST `<Tracking>` node and the
//! `interactionType` the beacon behind it carries. Injection writes exactly one
//! `<Tracking>` per entry, in this order. [`NOT_REPORTED`] is rule 5: VAST events we
//! never inject a beacon for. Names are matched exactly (VAST event names are
//! case-sensitive).

use crate::interaction::InteractionType;

/// Rule 6: VAST `Tracking@event` to `interactionType`, in funnel order then the
/// control events (the order of the spec's interaction table).
pub const MAPPED: [(&str, InteractionType); 11] = [
    ("creativeView", InteractionType::VideoCreativeView),
    ("start", InteractionType::VideoPlay),
    ("firstQuartile", InteractionType::VideoFirstQuartile),
    ("midpoint", InteractionType::VideoMidpoint),
    ("thirdQuartile", InteractionType::VideoThirdQuartile),
    ("complete", InteractionType::VideoComplete),
    ("skip", InteractionType::VideoSkip),
    ("pause", InteractionType::VideoPause),
    ("resume", InteractionType::VideoResume),
    ("mute", InteractionType::VideoMute),
    ("unmute", InteractionType::VideoUnmute),
];

/// Rule 5: VAST events that are not reported; no beacon is injected for them.
pub const NOT_REPORTED: [&str; 5] = [
    "progress",
    "fullscreen",
    "exitFullscreen",
    "rewind",
    "close",
];

/// The interaction type a VAST tracking event maps to, or `None` for every event we
/// do not report (rule 5 and any other VAST event).
pub fn interaction_for(vast_event: &str) -> Option<InteractionType> {
    MAPPED
        .iter()
        .find(|(name, _)| *name == vast_event)
        .map(|&(_, t)| t)
}

/// The VAST tracking event that reports `t`, or `None` for the non-video types.
pub fn vast_event_for(t: InteractionType) -> Option<&'static str> {
    MAPPED.iter().find(|(_, m)| *m == t).map(|&(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::Requirement;

    #[test]
    fn rule_6_table_is_exact() {
        let expected = [
            ("creativeView", "videoCreativeView"),
            ("start", "videoPlay"),
            ("firstQuartile", "videoFirstQuartile"),
            ("midpoint", "videoMidpoint"),
            ("thirdQuartile", "videoThirdQuartile"),
            ("complete", "videoComplete"),
            ("skip", "videoSkip"),
            ("pause", "videoPause"),
            ("resume", "videoResume"),
            ("mute", "videoMute"),
            ("unmute", "videoUnmute"),
        ];
        for (vast, wire) in expected {
            let t = interaction_for(vast).expect(vast);
            assert_eq!(t.as_str(), wire, "{vast}");
            assert_eq!(vast_event_for(t), Some(vast));
        }
        assert_eq!(MAPPED.len(), expected.len());
    }

    #[test]
    fn maps_every_video_type_once_and_nothing_else() {
        let video: Vec<InteractionType> = InteractionType::ALL
            .into_iter()
            .filter(|t| t.requirement() == Requirement::Video)
            .collect();
        let mut mapped: Vec<InteractionType> = MAPPED.iter().map(|&(_, t)| t).collect();
        assert_eq!(mapped, video, "same types, same order as the spec's table");
        mapped.sort_unstable();
        mapped.dedup();
        assert_eq!(mapped.len(), 11);
        let mut names: Vec<&str> = MAPPED.iter().map(|&(n, _)| n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 11);
        for t in [
            InteractionType::ProductImpression,
            InteractionType::ProductClick,
            InteractionType::CreativeClick,
            InteractionType::Cart,
        ] {
            assert_eq!(vast_event_for(t), None, "{t}");
        }
    }

    #[test]
    fn rule_5_events_are_never_mapped() {
        for e in NOT_REPORTED {
            assert_eq!(interaction_for(e), None, "{e}");
            assert!(!MAPPED.iter().any(|&(n, _)| n == e), "{e}");
        }
    }

    #[test]
    fn matching_is_exact() {
        for e in [
            "",
            "Start",
            "START",
            "start ",
            "creativeview",
            "videoPlay",
            "impression",
        ] {
            assert_eq!(interaction_for(e), None, "{e:?}");
        }
    }
}
