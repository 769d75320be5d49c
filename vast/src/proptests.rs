//! Property tests of building and injection: arbitrary ids and URLs (XML-special and
//! non-ASCII characters included) always give a document that parses, with exactly
//! 11 of our `Tracking` nodes per `Linear`, each URL decoding at the edge to the
//! right ad, interaction, creative and tracking id; everything else is the input's
//! bytes; arbitrary input never panics.

use proptest::prelude::*;
use quick_xml::events::Event;
use quick_xml::Reader;
use rm_schemas::vast_events::{interaction_for, MAPPED};

use super::inject::tests::{ours, trackings_by_linear};
use super::url::{MACRO_CACHEBUSTING, MACRO_TIMESTAMP, TRACKING_PARAMS};
use super::*;

/// Text with the characters that break naive XML and URL code, plus any printable.
fn nasty() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9<>&\"' \u{e9}\u{1F600}\\[\\]%+=?#/;:]{0,16}",
        "\\PC{0,16}",
    ]
}

fn url() -> impl Strategy<Value = String> {
    nasty().prop_map(|s| format!("https://ads.example/p?x={s}"))
}

fn creative() -> impl Strategy<Value = VideoCreative> {
    (
        nasty(),
        nasty(),
        url(),
        1u32..4000,
        1u32..4000,
        0u32..100_000,
        proptest::option::of(url()),
    )
        .prop_map(
            |(id, registry, media_url, width, height, duration_secs, click_through)| {
                VideoCreative {
                    universal_ad_id: id,
                    id_registry: registry,
                    media_url,
                    mime_type: "video/mp4".into(),
                    width,
                    height,
                    duration_secs,
                    click_through,
                }
            },
        )
}

fn ad() -> impl Strategy<Value = VideoAd> {
    (
        nasty(),
        nasty(),
        nasty(),
        proptest::collection::vec(url(), 1..3),
        proptest::collection::vec(url(), 0..3),
        proptest::collection::vec(creative(), 1..4),
    )
        .prop_map(
            |(ad_id, ad_system, title, impression_urls, click_tracking_urls, mut creatives)| {
                // Rule 4: ids are unique and usable; the prefix makes them so.
                for (i, c) in creatives.iter_mut().enumerate() {
                    c.universal_ad_id = format!("v{i}-{}", c.universal_ad_id);
                }
                VideoAd {
                    ad_id,
                    ad_system,
                    title,
                    impression_urls,
                    click_tracking_urls,
                    creatives,
                }
            },
        )
}

fn context() -> impl Strategy<Value = TrackingContext> {
    (nasty(), 0usize..3, nasty(), any::<bool>()).prop_map(
        |(ad_id, param, tracking_id, cachebusting)| TrackingContext {
            beacon_url: "http://127.0.0.1:8080/v1/events/ad/interaction".into(),
            ad_id: format!("rm1.{ad_id}"),
            tracking_param: TRACKING_PARAMS[param],
            tracking_id: format!("t{tracking_id}"),
            cachebusting,
        },
    )
}

/// Every event of `xml`, with end-name checks: the document is well-formed.
fn parses(xml: &str) -> bool {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().check_end_names = true;
    loop {
        match reader.read_event() {
            Ok(Event::Eof) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}

/// `out` with every `TrackingEvents` block we inserted (and the line break and
/// indentation before it) cut out.
fn without_our_blocks(out: &str) -> String {
    let mut s = out.to_owned();
    while let Some(open) = s.find("<TrackingEvents>") {
        let start = s[..open].trim_end_matches(' ').len();
        let start = if s[..start].ends_with('\n') {
            start - 1
        } else {
            start
        };
        let end =
            open + s[open..].find("</TrackingEvents>").expect("closed") + "</TrackingEvents>".len();
        s.replace_range(start..end, "");
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn served_documents_carry_exactly_our_beacons(ad in ad(), ctx in context()) {
        let out = serve(&ad, &ctx).expect("serve");
        prop_assert!(parses(&out));
        let by = ours(&out, &ctx);
        prop_assert_eq!(by.len(), ad.creatives.len());
        prop_assert_eq!(trackings_by_linear(&out), by.clone());
        for (linear, creative) in by.iter().zip(&ad.creatives) {
            prop_assert_eq!(linear.len(), MAPPED.len());
            for ((event, url), (mapped, _)) in linear.iter().zip(MAPPED) {
                prop_assert_eq!(event.as_str(), mapped);
                prop_assert!(url.contains("&timestamp=[TIMESTAMP]"));
                prop_assert_eq!(url.contains("&cb=[CACHEBUSTING]"), ctx.cachebusting);
                let q = url.split_once('?').expect("query").1
                    .replace(MACRO_TIMESTAMP, "2026-11-22T10%3A15%3A30.250Z")
                    .replace(MACRO_CACHEBUSTING, "00123456");
                let e = rm_schemas::parse_beacon(&q).expect("the edge accepts the expanded URL");
                prop_assert_eq!(Some(e.interaction_type), interaction_for(event));
                prop_assert_eq!(&e.ad_id, &ctx.ad_id);
                prop_assert_eq!(e.video_id.as_deref(), Some(creative.universal_ad_id.as_str()));
                let tracking = match ctx.tracking_param {
                    "sessionId" => e.session_id.as_deref(),
                    "customerId" => e.customer_id.as_deref(),
                    _ => e.dtm_token.as_deref(),
                };
                prop_assert_eq!(tracking, Some(ctx.tracking_id.as_str()));
            }
        }
        // Only our blocks were added: the rest is the built document, byte for byte.
        prop_assert_eq!(without_our_blocks(&out), build(&ad));
        // Twice is refused.
        let twice = matches!(inject(&out, &ctx), Err(VastError::AlreadyInjected { .. }));
        prop_assert!(twice);
    }

    #[test]
    fn arbitrary_input_never_panics(s in "\\PC{0,300}") {
        let _ = inject(&s, &inject_ctx());
    }

    #[test]
    fn damaged_documents_never_panic(ad in ad(), cut in any::<prop::sample::Index>(), junk in "[<>&/\"'=a-z!?\\[\\] ]{0,4}") {
        let doc = build(&ad);
        let mut at = cut.index(doc.len() + 1);
        while !doc.is_char_boundary(at) {
            at -= 1;
        }
        let damaged = format!("{}{junk}{}", &doc[..at], &doc[at..]);
        if let Ok(out) = inject(&damaged, &inject_ctx()) {
            prop_assert!(parses(&out));
        }
        let truncated = &doc[..at];
        if let Ok(out) = inject(truncated, &inject_ctx()) {
            prop_assert!(parses(&out));
        }
    }
}

fn inject_ctx() -> TrackingContext {
    super::inject::tests::ctx()
}
