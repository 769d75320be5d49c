//! Our own VAST 4.0 documents: one `InLine` ad with one linear `Creative` per video,
//! in the element order of the IAB schema (`../shared/vast/vast4.xsd`):
//!
//! ```text
//! VAST xmlns="http://www.iab.com/VAST" version="4.0"
//!   Ad id
//!     InLine: AdSystem, Impression+ (id imp-N), AdTitle, Creatives
//!       Creative id sequence: UniversalAdId idRegistry idValue, Linear
//!         Linear: Duration HH:MM:SS.mmm, MediaFiles/MediaFile, VideoClicks
//!           VideoClicks: ClickTracking* (id click-N), ClickThrough?
//! ```
//!
//! (The schema puts `Impression` before `AdTitle` and `ClickTracking` before
//! `ClickThrough`.) Every value is XML-escaped. The document carries no tracking
//! events: [`serve`] adds them with [`super::inject`].

use super::xml::escape;
use super::{inject, TrackingContext, VastError};

/// The VAST namespace the schema targets; documents without it do not validate.
pub const VAST_NAMESPACE: &str = "http://www.iab.com/VAST";
/// Longest `Duration` the schema's `xs:time` can state: 23:59:59.
pub const MAX_DURATION_SECS: u32 = 24 * 3600 - 1;

/// One video of a banner X video campaign (`primaryVideoConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoCreative {
    /// `UniversalAdId@idValue`, the `videoId` of its beacons (rule 4: unique per ad).
    pub universal_ad_id: String,
    /// `UniversalAdId@idRegistry` (e.g. `ad-id.org`).
    pub id_registry: String,
    /// The media file URL.
    pub media_url: String,
    /// Its MIME type (`video/mp4`).
    pub mime_type: String,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Length in seconds (at most `MAX_DURATION_SECS`; longer is written as that).
    pub duration_secs: u32,
    /// Landing page, if any.
    pub click_through: Option<String>,
}

/// A video ad to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoAd {
    /// `Ad@id`: the realised ad id.
    pub ad_id: String,
    /// `AdSystem`.
    pub ad_system: String,
    /// `AdTitle`.
    pub title: String,
    /// `Impression` URLs (at least one for a valid document).
    pub impression_urls: Vec<String>,
    /// `VideoClicks/ClickTracking` URLs, written in every creative.
    pub click_tracking_urls: Vec<String>,
    /// One `Creative` each (at least one).
    pub creatives: Vec<VideoCreative>,
}

/// `HH:MM:SS.mmm`, capped at [`MAX_DURATION_SECS`].
fn duration(secs: u32) -> String {
    let s = secs.min(MAX_DURATION_SECS);
    format!("{:02}:{:02}:{:02}.000", s / 3600, s / 60 % 60, s % 60)
}

fn element(out: &mut String, indent: &str, name: &str, attrs: &[(&str, &str)], text: &str) {
    out.push_str(indent);
    out.push('<');
    out.push_str(name);
    for (k, v) in attrs {
        out.push(' ');
        out.push_str(k);
        out.push_str("=\"");
        out.push_str(&escape(v));
        out.push('"');
    }
    out.push('>');
    out.push_str(&escape(text));
    out.push_str("</");
    out.push_str(name);
    out.push_str(">\n");
}

fn creative(out: &mut String, ad: &VideoAd, n: usize, c: &VideoCreative) {
    let seq = n.to_string();
    out.push_str(&format!(
        "      <Creative id=\"{}\" sequence=\"{seq}\">\n",
        escape(&c.universal_ad_id)
    ));
    element(
        out,
        "        ",
        "UniversalAdId",
        &[
            ("idRegistry", &c.id_registry),
            ("idValue", &c.universal_ad_id),
        ],
        &c.universal_ad_id,
    );
    out.push_str("        <Linear>\n");
    element(
        out,
        "          ",
        "Duration",
        &[],
        &duration(c.duration_secs),
    );
    out.push_str("          <MediaFiles>\n");
    let (w, h) = (c.width.to_string(), c.height.to_string());
    element(
        out,
        "            ",
        "MediaFile",
        &[
            ("delivery", "progressive"),
            ("type", &c.mime_type),
            ("width", &w),
            ("height", &h),
        ],
        &c.media_url,
    );
    out.push_str("          </MediaFiles>\n");
    if !ad.click_tracking_urls.is_empty() || c.click_through.is_some() {
        out.push_str("          <VideoClicks>\n");
        for (i, u) in ad.click_tracking_urls.iter().enumerate() {
            let id = format!("click-{}", i + 1);
            element(out, "            ", "ClickTracking", &[("id", &id)], u);
        }
        if let Some(u) = &c.click_through {
            element(out, "            ", "ClickThrough", &[], u);
        }
        out.push_str("          </VideoClicks>\n");
    }
    out.push_str("        </Linear>\n      </Creative>\n");
}

/// A VAST 4.0 `InLine` document for `ad`, without tracking events. It validates
/// against the schema when the ad has at least one impression URL and one creative
/// and its URLs are valid URIs ([`serve`] checks the first two).
pub fn build(ad: &VideoAd) -> String {
    let mut out = String::with_capacity(1024 + ad.creatives.len() * 1024);
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<VAST xmlns=\"{VAST_NAMESPACE}\" version=\"4.0\">\n"
    ));
    out.push_str(&format!(
        "  <Ad id=\"{}\">\n    <InLine>\n",
        escape(&ad.ad_id)
    ));
    element(&mut out, "      ", "AdSystem", &[], &ad.ad_system);
    for (i, u) in ad.impression_urls.iter().enumerate() {
        let id = format!("imp-{}", i + 1);
        element(&mut out, "      ", "Impression", &[("id", &id)], u);
    }
    element(&mut out, "      ", "AdTitle", &[], &ad.title);
    out.push_str("      <Creatives>\n");
    for (i, c) in ad.creatives.iter().enumerate() {
        creative(&mut out, ad, i + 1, c);
    }
    out.push_str("      </Creatives>\n    </InLine>\n  </Ad>\n</VAST>\n");
    out
}

/// The `adm` of a video ad: [`build`], then [`inject`] our tracking.
pub fn serve(ad: &VideoAd, ctx: &TrackingContext) -> Result<String, VastError> {
    if ad.impression_urls.is_empty() {
        return Err(VastError::InvalidAd(
            "VAST 4.0 requires at least one Impression URL",
        ));
    }
    if ad.creatives.is_empty() {
        return Err(VastError::InvalidAd(
            "a video ad needs at least one creative",
        ));
    }
    inject(&build(ad), ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_hh_mm_ss_mmm_and_capped() {
        assert_eq!(duration(0), "00:00:00.000");
        assert_eq!(duration(15), "00:00:15.000");
        assert_eq!(duration(3725), "01:02:05.000");
        assert_eq!(duration(u32::MAX), "23:59:59.000");
    }

    #[test]
    fn built_document_escapes_every_value() {
        let ad = VideoAd {
            ad_id: "a\"<&>".into(),
            ad_system: "sys & co".into(),
            title: "<b>t</b>".into(),
            impression_urls: vec!["http://i/?a=1&b=2".into()],
            click_tracking_urls: vec!["http://c/?x=1&y=2".into()],
            creatives: vec![VideoCreative {
                universal_ad_id: "v'1".into(),
                id_registry: "ad-id.org".into(),
                media_url: "http://m/v.mp4?q=1&r=2".into(),
                mime_type: "video/mp4".into(),
                width: 1280,
                height: 720,
                duration_secs: 15,
                click_through: Some("http://shop/?p=1&q=2".into()),
            }],
        };
        let xml = build(&ad);
        assert!(xml.contains("<Ad id=\"a&quot;&lt;&amp;&gt;\">"), "{xml}");
        assert!(
            xml.contains("<AdTitle>&lt;b&gt;t&lt;/b&gt;</AdTitle>"),
            "{xml}"
        );
        assert!(
            xml.contains("<Impression id=\"imp-1\">http://i/?a=1&amp;b=2</Impression>"),
            "{xml}"
        );
        assert!(xml.contains("idValue=\"v&apos;1\""), "{xml}");
        assert!(
            xml.contains("<ClickTracking id=\"click-1\">http://c/?x=1&amp;y=2</ClickTracking>"),
            "{xml}"
        );
        let ct = xml.find("<ClickTracking").expect("click tracking");
        let th = xml.find("<ClickThrough").expect("click through");
        assert!(ct < th, "schema order: ClickTracking before ClickThrough");
        let imp = xml.find("<Impression").expect("impression");
        let title = xml.find("<AdTitle").expect("title");
        assert!(imp < title, "schema order: Impression before AdTitle");
    }

    #[test]
    fn serve_refuses_ads_that_cannot_validate() {
        let ctx = TrackingContext {
            beacon_url: "http://127.0.0.1:8080/v1/events/ad/interaction".into(),
            ad_id: "a".into(),
            tracking_param: "sessionId",
            tracking_id: "s".into(),
            cachebusting: false,
        };
        let ad = VideoAd {
            ad_id: "a".into(),
            ad_system: "s".into(),
            title: "t".into(),
            impression_urls: vec![],
            click_tracking_urls: vec![],
            creatives: vec![],
        };
        assert!(matches!(serve(&ad, &ctx), Err(VastError::InvalidAd(_))));
        let ad = VideoAd {
            impression_urls: vec!["http://i".into()],
            ..ad
        };
        assert!(matches!(serve(&ad, &ctx), Err(VastError::InvalidAd(_))));
    }
}
