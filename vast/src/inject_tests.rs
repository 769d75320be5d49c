//! Unit tests of [`super::inject`]: placement, preservation, ids and refusals.

use quick_xml::events::Event;
use quick_xml::Reader;

use super::*;
use crate::url::{MACRO_CACHEBUSTING, MACRO_TIMESTAMP};

pub(crate) fn ctx() -> TrackingContext {
    TrackingContext {
        beacon_url: "http://127.0.0.1:8080/v1/events/ad/interaction".into(),
        ad_id: "rm1.camp-1.ad-1".into(),
        tracking_param: "sessionId",
        tracking_id: "s-1".into(),
        cachebusting: true,
    }
}

/// The `(event, url)` of every `Tracking` of every `Linear`, in document order,
/// parsed independently of the injector.
pub(crate) fn trackings_by_linear(xml: &str) -> Vec<Vec<(String, String)>> {
    let mut reader = Reader::from_str(xml);
    let mut out: Vec<Vec<(String, String)>> = Vec::new();
    let mut in_linear = false;
    let mut current: Option<(String, String)> = None;
    loop {
        match reader.read_event().expect("output parses") {
            Event::Start(e) | Event::Empty(e) if e.local_name().as_ref() == b"Linear" => {
                in_linear = true;
                out.push(Vec::new());
            }
            Event::End(e) if e.local_name().as_ref() == b"Linear" => in_linear = false,
            Event::Start(e) if in_linear && e.local_name().as_ref() == b"Tracking" => {
                let event = e
                    .try_get_attribute("event")
                    .expect("attr")
                    .expect("event attribute")
                    .unescape_value()
                    .expect("value")
                    .into_owned();
                current = Some((event, String::new()));
            }
            Event::Text(t) => {
                if let Some((_, u)) = current.as_mut() {
                    u.push_str(&t.decode().expect("utf8"));
                }
            }
            Event::CData(t) => {
                if let Some((_, u)) = current.as_mut() {
                    u.push_str(&t.decode().expect("utf8"));
                }
            }
            Event::GeneralRef(r) => {
                if let Some((_, u)) = current.as_mut() {
                    let name = r.decode().expect("utf8");
                    let c = match r.resolve_char_ref().expect("char ref") {
                        Some(c) => c.to_string(),
                        None => quick_xml::escape::resolve_predefined_entity(&name)
                            .expect("predefined")
                            .to_owned(),
                    };
                    u.push_str(&c);
                }
            }
            Event::End(e) if e.local_name().as_ref() == b"Tracking" => {
                if let (Some((ev, u)), Some(l)) = (current.take(), out.last_mut()) {
                    l.push((ev, u.trim().to_owned()));
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

/// Our nodes only (URL starting with the beacon URL).
pub(crate) fn ours(xml: &str, c: &TrackingContext) -> Vec<Vec<(String, String)>> {
    let prefix = format!("{}?", c.beacon_url);
    trackings_by_linear(xml)
        .into_iter()
        .map(|l| {
            l.into_iter()
                .filter(|(_, u)| u.starts_with(&prefix))
                .collect()
        })
        .collect()
}

/// `out` is `input` with text inserted at one point (single-site documents).
fn is_single_insertion(input: &str, out: &str) -> bool {
    let p = input
        .bytes()
        .zip(out.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let s = input[p..]
        .bytes()
        .rev()
        .zip(out.bytes().rev())
        .take_while(|(a, b)| a == b)
        .count();
    p + s >= input.len() && out.len() > input.len()
}

const INLINE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<VAST xmlns="http://www.iab.com/VAST" version="4.0">
  <Ad id="x">
    <InLine>
      <AdSystem>adv</AdSystem>
      <Impression id="i1"><![CDATA[https://adv.example/imp?a=1&b=2]]></Impression>
      <AdTitle>t</AdTitle>
      <Creatives>
        <Creative id="c1">
          <UniversalAdId idRegistry="ad-id.org" idValue="ADV-1">ADV-1</UniversalAdId>
          <Linear>
            <Duration>00:00:10</Duration>
            <MediaFiles>
              <MediaFile delivery="progressive" type="video/mp4" width="640" height="360">https://adv.example/v.mp4</MediaFile>
            </MediaFiles>
            <VideoClicks>
              <ClickTracking id="ck">https://adv.example/click?a=1&amp;b=2</ClickTracking>
            </VideoClicks>
          </Linear>
        </Creative>
      </Creatives>
    </InLine>
  </Ad>
</VAST>
"#;

#[test]
fn inserts_one_tracking_events_before_duration_with_the_11_mapped_events() {
    let out = inject(INLINE, &ctx()).expect("inject");
    assert!(is_single_insertion(INLINE, &out), "{out}");
    let linears = trackings_by_linear(&out);
    assert_eq!(linears.len(), 1);
    let events: Vec<&str> = linears[0].iter().map(|(e, _)| e.as_str()).collect();
    let mapped: Vec<&str> = MAPPED.iter().map(|&(e, _)| e).collect();
    assert_eq!(events, mapped);
    let te = out.find("<TrackingEvents>").expect("te");
    assert!(
        out.find("<Linear>").expect("linear") < te
            && te < out.find("<Duration>").expect("duration")
    );
    assert_eq!(out.matches("<TrackingEvents>").count(), 1);
    for (event, url) in &linears[0] {
        let q = url.split_once('?').expect("query").1;
        let q = q
            .replace(MACRO_TIMESTAMP, "2026-11-22T10:15:30.250Z")
            .replace(MACRO_CACHEBUSTING, "12345678");
        let e = rm_schemas::parse_beacon(&q).expect("edge accepts");
        assert_eq!(
            Some(e.interaction_type),
            rm_schemas::vast_events::interaction_for(event)
        );
        assert_eq!(e.video_id.as_deref(), Some("ADV-1"));
        assert_eq!(e.ad_id, "rm1.camp-1.ad-1");
        assert_eq!(e.session_id.as_deref(), Some("s-1"));
    }
    // Pretty output stays pretty: our block is indented like the Linear's children.
    assert!(out.contains("<Linear>\n            <TrackingEvents>\n              <Tracking event=\"creativeView\">"), "{out}");
    assert!(
        out.contains("</Tracking>\n            </TrackingEvents>\n            <Duration>"),
        "{out}"
    );
}

#[test]
fn appends_inside_an_existing_tracking_events_and_keeps_the_advertisers_nodes() {
    let input = INLINE.replace(
        "<Linear>\n",
        "<Linear>\n            <TrackingEvents>\n              <Tracking event=\"progress\" offset=\"00:00:05\">https://adv.example/p</Tracking>\n              <Tracking event=\"close\">https://adv.example/close</Tracking>\n              <Tracking event=\"start\">https://adv.example/start</Tracking>\n            </TrackingEvents>\n",
    );
    let out = inject(&input, &ctx()).expect("inject");
    assert!(is_single_insertion(&input, &out), "{out}");
    assert_eq!(out.matches("<TrackingEvents>").count(), 1);
    let all = &trackings_by_linear(&out)[0];
    assert_eq!(all.len(), 3 + 11);
    assert_eq!(all[0], ("progress".into(), "https://adv.example/p".into()));
    assert_eq!(all[2], ("start".into(), "https://adv.example/start".into()));
    assert_eq!(ours(&out, &ctx())[0].len(), 11);
    assert!(!ours(&out, &ctx())[0]
        .iter()
        .any(|(e, _)| NOT_INJECTED.contains(&e.as_str())));
    assert!(
        out.contains(
            "https://adv.example/start</Tracking>\n              <Tracking event=\"creativeView\">"
        ),
        "{out}"
    );
}

const NOT_INJECTED: [&str; 5] = rm_schemas::vast_events::NOT_REPORTED;

#[test]
fn goes_after_icons_when_icons_come_first() {
    let input = INLINE.replace(
        "<Linear>\n",
        "<Linear>\n            <Icons><Icon program=\"AdChoices\"><StaticResource creativeType=\"image/png\">https://i/x.png</StaticResource></Icon></Icons>\n",
    );
    let out = inject(&input, &ctx()).expect("inject");
    assert!(is_single_insertion(&input, &out));
    let icons_end = out.find("</Icons>").expect("icons");
    let te = out.find("<TrackingEvents>").expect("te");
    assert!(icons_end < te && te < out.find("<Duration>").expect("duration"));
}

#[test]
fn fills_empty_elements_and_follows_a_namespace_prefix() {
    let input = r#"<v:VAST xmlns:v="http://www.iab.com/VAST" version="4.1"><v:Ad><v:Wrapper><v:AdSystem>w</v:AdSystem><v:Impression>http://i</v:Impression><v:Creatives><v:Creative adId="W-1"><v:Linear/></v:Creative><v:Creative id="W-2"><v:Linear><v:TrackingEvents /></v:Linear></v:Creative></v:Creatives><v:VASTAdTagURI>http://next</v:VASTAdTagURI></v:Wrapper></v:Ad></v:VAST>"#;
    let out = inject(input, &ctx()).expect("inject");
    assert!(
        out.contains("<v:Linear><v:TrackingEvents><v:Tracking event=\"creativeView\">"),
        "{out}"
    );
    assert!(out.contains("</v:Tracking></v:TrackingEvents></v:Linear></v:Creative><v:Creative id=\"W-2\"><v:Linear><v:TrackingEvents><v:Tracking"), "{out}");
    let by = ours(&out, &ctx());
    assert_eq!(by.iter().map(Vec::len).collect::<Vec<_>>(), vec![11, 11]);
    assert!(
        by[0][0].1.contains("videoId=W-1&"),
        "wrapper: adId attribute"
    );
    assert!(by[1][0].1.contains("videoId=W-2&"), "wrapper: id attribute");
    assert!(!out.contains("<Tracking"), "no unprefixed element: {out}");
}

#[test]
fn injecting_twice_is_refused_and_another_beacon_url_is_third_party() {
    let once = inject(INLINE, &ctx()).expect("first");
    assert!(matches!(
        inject(&once, &ctx()),
        Err(VastError::AlreadyInjected { ref creative, .. }) if creative == "creative #1 (id=\"c1\")"
    ));
    let other = TrackingContext {
        beacon_url: "https://edge.example/v1/events/ad/interaction".into(),
        ..ctx()
    };
    let twice = inject(&once, &other).expect("a different endpoint is not ours");
    assert_eq!(ours(&twice, &other)[0].len(), 11);
    assert_eq!(trackings_by_linear(&twice)[0].len(), 22);
    assert_eq!(twice.matches("<TrackingEvents>").count(), 1);
}

fn err(input: &str) -> VastError {
    inject(input, &ctx()).expect_err(input)
}

#[test]
fn refuses_what_is_not_vast_4() {
    assert!(matches!(err("<html><body/></html>"), VastError::NotVast { root } if root == "html"));
    let v3 = INLINE.replace("version=\"4.0\"", "version=\"3.0\"");
    assert!(matches!(err(&v3), VastError::UnsupportedVersion { version } if version == "3.0"));
    let v40 = INLINE.replace("version=\"4.0\"", "version=\"40\"");
    assert!(matches!(err(&v40), VastError::UnsupportedVersion { .. }));
    let none = INLINE.replace(" version=\"4.0\"", "");
    assert!(matches!(err(&none), VastError::UnsupportedVersion { version } if version.is_empty()));
    for ok in ["4", "4.1", "4.2", "4.3"] {
        inject(
            &INLINE.replace("version=\"4.0\"", &format!("version=\"{ok}\"")),
            &ctx(),
        )
        .expect(ok);
    }
}

#[test]
fn refuses_malformed_xml_without_panicking() {
    let cases = [
        String::new(),
        "   ".into(),
        "not xml".into(),
        INLINE.replace("</Linear>", ""),
        INLINE.replace("</VAST>", ""),
        INLINE.replace("</Duration>", "</Durations>"),
        format!("{INLINE}<VAST version=\"4.0\"/>"),
        format!("{INLINE}trailing"),
        INLINE.replace("<Creative id=\"c1\">", "<Creative id=\"c1\" id=\"c2\">"),
        INLINE.replace("<Creative id=\"c1\">", "<Creative id=c1>"),
        INLINE.replace("idValue=\"ADV-1\"", "idValue=\"ADV-1"),
        INLINE[..INLINE.len() / 2].to_owned(),
    ];
    for c in &cases {
        assert!(
            matches!(err(c), VastError::Malformed { .. }),
            "{c:?}: {:?}",
            err(c)
        );
    }
}

#[test]
fn bounds_the_input() {
    let pad = " ".repeat(MAX_VAST_BYTES);
    assert!(matches!(
        err(&format!("{INLINE}{pad}")),
        VastError::TooLarge {
            max: MAX_VAST_BYTES,
            ..
        }
    ));
}

#[test]
fn rule_4_ids_are_required_usable_and_unique() {
    let no_uaid = INLINE.replace(
        "<UniversalAdId idRegistry=\"ad-id.org\" idValue=\"ADV-1\">ADV-1</UniversalAdId>",
        "",
    );
    assert!(
        matches!(err(&no_uaid), VastError::MissingVideoId { creative, .. } if creative == "creative #1 (id=\"c1\")")
    );
    for v in ["", " ", "unknown", "UNKNOWN"] {
        let doc = INLINE.replace("idValue=\"ADV-1\"", &format!("idValue=\"{v}\""));
        assert!(
            matches!(err(&doc), VastError::MissingVideoId { .. }),
            "{v:?}"
        );
    }
    let long = INLINE.replace("ADV-1", &"v".repeat(rm_schemas::validate::MAX_ID_LEN + 1));
    assert!(matches!(err(&long), VastError::VideoIdTooLong { .. }));
    let creative =
        &INLINE[INLINE.find("<Creative ").expect("c")..INLINE.find("</Creatives>").expect("cs")];
    let two = INLINE.replace(
        creative,
        &format!("{creative}{}", creative.replace("\"c1\"", "\"c2\"")),
    );
    match err(&two) {
        VastError::DuplicateVideoId {
            video_id,
            first,
            creative,
        } => {
            assert_eq!(video_id, "ADV-1");
            assert_eq!(first, "creative #1 (id=\"c1\")");
            assert_eq!(creative, "creative #2 (id=\"c2\")");
        }
        other => panic!("{other:?}"),
    }
    let distinct = INLINE.replace(
        creative,
        &format!("{creative}{}", creative.replace("ADV-1", "ADV-2")),
    );
    let out = inject(&distinct, &ctx()).expect("two creatives");
    let by = ours(&out, &ctx());
    assert_eq!(by.len(), 2);
    assert!(by[0].iter().all(|(_, u)| u.contains("videoId=ADV-1&")));
    assert!(by[1].iter().all(|(_, u)| u.contains("videoId=ADV-2&")));
    // UniversalAdId may follow Linear (xs:all): the id is still that creative's.
    let after = INLINE.replace(
        "<UniversalAdId idRegistry=\"ad-id.org\" idValue=\"ADV-1\">ADV-1</UniversalAdId>",
        "",
    )
    .replace("</Linear>\n", "</Linear>\n          <UniversalAdId idRegistry=\"r\" idValue=\"LATE\">LATE</UniversalAdId>\n");
    let out = inject(&after, &ctx()).expect("late id");
    assert!(ours(&out, &ctx())[0]
        .iter()
        .all(|(_, u)| u.contains("videoId=LATE&")));
}

#[test]
fn other_refusals_are_named() {
    let no_linear = INLINE
        .replace("<Linear>", "<NonLinearAds>")
        .replace("</Linear>", "</NonLinearAds>");
    assert_eq!(err(&no_linear), VastError::NoLinearCreative);
    let two_te = INLINE.replace("<Linear>\n", "<Linear>\n<TrackingEvents/><TrackingEvents/>");
    assert!(matches!(
        err(&two_te),
        VastError::RepeatedTrackingEvents { .. }
    ));
    let wrapper = r#"<VAST version="4.0"><Ad><Wrapper><AdSystem>w</AdSystem><Impression>http://i</Impression><Creatives><Creative><Linear/></Creative></Creatives><VASTAdTagURI>http://n</VASTAdTagURI></Wrapper></Ad></VAST>"#;
    assert!(
        matches!(err(wrapper), VastError::MissingVideoId { creative, .. } if creative == "creative #1")
    );
    let bad_ctx = TrackingContext {
        tracking_param: "visitorId",
        ..ctx()
    };
    assert!(matches!(
        inject(INLINE, &bad_ctx),
        Err(VastError::InvalidContext {
            field: "tracking_param",
            ..
        })
    ));
}

#[test]
fn a_document_without_line_breaks_gets_none() {
    let compact: String = INLINE.lines().map(str::trim).collect();
    let out = inject(&compact, &ctx()).expect("inject");
    assert!(is_single_insertion(&compact, &out));
    assert!(!out.contains('\n'), "{out}");
}

#[test]
fn a_byte_order_mark_and_prolog_are_kept() {
    let input = format!(
        "\u{feff}<!-- served by adv -->\n<?pi x?>\n{}",
        INLINE.replacen("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", "", 1)
    );
    let out = inject(&input, &ctx()).expect("inject");
    assert!(
        out.starts_with("\u{feff}<!-- served by adv -->\n<?pi x?>\n<VAST"),
        "{out}"
    );
    assert!(is_single_insertion(&input, &out));
}

#[test]
fn an_empty_tracking_events_pair_keeps_its_closing_tag_on_its_own_line() {
    let input = INLINE.replace(
        "<Linear>\n",
        "<Linear>\n            <TrackingEvents></TrackingEvents>\n",
    );
    let out = inject(&input, &ctx()).expect("inject");
    assert!(is_single_insertion(&input, &out));
    assert!(
        out.contains("<TrackingEvents>\n              <Tracking event=\"creativeView\">"),
        "{out}"
    );
    assert!(
        out.contains("</Tracking>\n            </TrackingEvents>\n            <Duration>"),
        "{out}"
    );
}
