//! One pass over a VAST document with `quick_xml`'s reader, recording where each
//! `Linear` can take our tracking and which id identifies its creative. Nothing is
//! re-serialised: the result is byte offsets into the input (see [`Site`]).
//!
//! Elements are matched by local name (any namespace prefix), and only in their VAST
//! place: `Creative` under `Creatives`, `Linear` and `UniversalAdId` under
//! `Creative`, `Icons` and `TrackingEvents` under `Linear`, `Tracking` under that
//! `TrackingEvents`. Well-formedness is checked as we go (tag nesting and names,
//! attribute syntax, a single root, no text outside it).

use quick_xml::events::{BytesRef, BytesStart, Event};
use quick_xml::Reader;

use super::VastError;

/// Where our tracking goes in one `Linear`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// No `TrackingEvents` yet: insert a new one at this offset.
    Insert {
        /// Byte offset.
        at: usize,
    },
    /// Append `Tracking` nodes at this offset, inside the existing `TrackingEvents`.
    Append {
        /// Byte offset.
        at: usize,
    },
    /// `<TrackingEvents/>` or `<Linear/>` at `start..end`: replace it with an
    /// element holding our nodes (an empty `Linear` gets a `TrackingEvents`).
    ReplaceEmpty {
        /// Start of the tag (`<`).
        start: usize,
        /// End of the tag (after `/>`).
        end: usize,
        /// True when the empty element is the `Linear` itself.
        linear: bool,
    },
}

/// One `Linear` to inject into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinearSite {
    /// The creative, for messages: `creative #2 (id="c2")`.
    pub creative: String,
    /// Its id for `videoId`, or why it has none.
    pub video_id: Result<String, &'static str>,
    /// Namespace prefix of the `Linear` as written, with its colon (`vast:`), or empty.
    pub prefix: String,
    /// Where our nodes go.
    pub site: Site,
    /// Indentation of the element written or replaced at the site: the new
    /// `TrackingEvents` (`Insert`), each `Tracking` (`Append`), the replaced empty
    /// element (`ReplaceEmpty`); `None` when the document is not one element per line.
    pub indent: Option<String>,
    /// One indentation step of the document (two spaces unless it uses tabs).
    pub unit: &'static str,
    /// Text of the `Tracking` nodes already there, unescaped and trimmed.
    pub existing: Vec<String>,
    /// For `Append` into `<TrackingEvents></TrackingEvents>` written without any
    /// whitespace inside: the indentation that puts its closing tag on its own line.
    pub trailer: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Vast,
    Ad,
    InLine,
    Wrapper,
    Creatives,
    Creative,
    Linear,
    Icons,
    TrackingEvents,
    Tracking,
    UniversalAdId,
    Other,
}

fn classify(parent: Option<Kind>, local: &[u8]) -> Kind {
    match (parent, local) {
        (None, b"VAST") => Kind::Vast,
        (Some(Kind::Vast), b"Ad") => Kind::Ad,
        (Some(Kind::Ad), b"InLine") => Kind::InLine,
        (Some(Kind::Ad), b"Wrapper") => Kind::Wrapper,
        (Some(Kind::InLine | Kind::Wrapper), b"Creatives") => Kind::Creatives,
        (Some(Kind::Creatives), b"Creative") => Kind::Creative,
        (Some(Kind::Creative), b"Linear") => Kind::Linear,
        (Some(Kind::Creative), b"UniversalAdId") => Kind::UniversalAdId,
        (Some(Kind::Linear), b"Icons") => Kind::Icons,
        (Some(Kind::Linear), b"TrackingEvents") => Kind::TrackingEvents,
        (Some(Kind::TrackingEvents), b"Tracking") => Kind::Tracking,
        _ => Kind::Other,
    }
}

struct LinearState {
    prefix: String,
    start: usize,
    after_start: usize,
    first_child: Option<(Kind, Option<String>)>,
    icons_first_end: Option<usize>,
    te: Option<Site>,
    tracking_indent: Option<String>,
    te_indent: Option<String>,
    trailer: Option<String>,
    existing: Vec<String>,
    tracking_text: Option<String>,
}

#[derive(Default)]
struct CreativeState {
    label: String,
    wrapper: bool,
    id: Option<String>,
    ad_id: Option<String>,
    universal_ad_id: Option<String>,
    linears: Vec<LinearSite>,
}

fn malformed(position: usize, message: impl Into<String>) -> VastError {
    VastError::Malformed {
        position: position as u64,
        message: message.into(),
    }
}

/// The indentation of the line `pos` starts on, when only spaces or tabs precede it
/// on that line and a newline precedes them.
fn line_indent(xml: &str, pos: usize) -> Option<String> {
    let before = &xml.as_bytes()[..pos];
    let ws = before
        .iter()
        .rev()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    (before.len() > ws && before[before.len() - ws - 1] == b'\n')
        .then(|| xml[pos - ws..pos].to_owned())
}

fn attr(e: &BytesStart<'_>, name: &[u8], pos: usize) -> Result<Option<String>, VastError> {
    for a in e.attributes() {
        let a = a.map_err(|err| malformed(pos, err.to_string()))?;
        if a.key.as_ref() == name {
            let v = a
                .unescape_value()
                .map_err(|err| malformed(pos, err.to_string()))?;
            return Ok(Some(v.into_owned()));
        }
    }
    Ok(None)
}

fn resolve_ref(r: &BytesRef<'_>) -> Option<String> {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return Some(c.to_string());
    }
    let name = r.decode().ok()?;
    quick_xml::escape::resolve_predefined_entity(&name).map(str::to_owned)
}

/// True for a VAST `version` this module handles: `4` or `4.<digits>...`.
fn is_vast_4(version: &str) -> bool {
    let v = version.trim();
    v == "4"
        || v.strip_prefix("4.")
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// Scans `xml`, returning every `Linear` of every `Creative` in document order.
pub fn scan(xml: &str) -> Result<Vec<LinearSite>, VastError> {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Kind> = Vec::with_capacity(16);
    let mut root_done = false;
    let mut wrapper = false;
    let mut creatives = 0usize;
    let mut creative: Option<CreativeState> = None;
    let mut linear: Option<LinearState> = None;
    let mut sites = Vec::new();
    loop {
        let before = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let event = reader.read_event().map_err(|e| {
            malformed(
                usize::try_from(reader.error_position()).unwrap_or(0),
                e.to_string(),
            )
        })?;
        let after = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let (e, empty) = match event {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(_) => {
                let kind = stack
                    .pop()
                    .ok_or_else(|| malformed(before, "closing tag without an open element"))?;
                close(
                    kind,
                    xml,
                    before,
                    after,
                    &mut creative,
                    &mut linear,
                    &mut sites,
                )?;
                root_done |= stack.is_empty();
                continue;
            }
            Event::Text(t) => {
                if let Some(l) = linear.as_mut().and_then(|l| l.tracking_text.as_mut()) {
                    let raw = t.decode().map_err(|e| malformed(before, e.to_string()))?;
                    l.push_str(&raw);
                } else if stack.is_empty() && !t.iter().all(u8::is_ascii_whitespace) {
                    return Err(malformed(before, "text outside the root element"));
                }
                continue;
            }
            Event::CData(t) => {
                if stack.is_empty() {
                    return Err(malformed(before, "CDATA outside the root element"));
                }
                if let Some(l) = linear.as_mut().and_then(|l| l.tracking_text.as_mut()) {
                    l.push_str(&t.decode().map_err(|e| malformed(before, e.to_string()))?);
                }
                continue;
            }
            Event::GeneralRef(r) => {
                if stack.is_empty() {
                    return Err(malformed(before, "reference outside the root element"));
                }
                if let Some(l) = linear.as_mut().and_then(|l| l.tracking_text.as_mut()) {
                    l.push_str(&resolve_ref(&r).unwrap_or_default());
                }
                continue;
            }
            Event::Eof => break,
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) | Event::DocType(_) => continue,
        };
        for a in e.attributes() {
            a.map_err(|err| malformed(before, err.to_string()))?;
        }
        let parent = stack.last().copied();
        if parent.is_none() {
            let name = e.name();
            if root_done {
                return Err(malformed(before, "a second root element"));
            }
            if name.local_name().as_ref() != b"VAST" {
                return Err(VastError::NotVast {
                    root: String::from_utf8_lossy(name.as_ref()).into_owned(),
                });
            }
            let version = attr(&e, b"version", before)?.unwrap_or_default();
            if !is_vast_4(&version) {
                return Err(VastError::UnsupportedVersion { version });
            }
        }
        let kind = classify(parent, e.local_name().as_ref());
        if let (Some(Kind::Linear), Some(l)) = (parent, linear.as_mut()) {
            if l.first_child.is_none() {
                l.first_child = Some((kind, line_indent(xml, before)));
            }
        }
        match kind {
            Kind::InLine => wrapper = false,
            Kind::Wrapper => wrapper = true,
            Kind::Creative => {
                creatives += 1;
                let id = attr(&e, b"id", before)?;
                let label = match &id {
                    Some(id) => format!("creative #{creatives} (id={id:?})"),
                    None => format!("creative #{creatives}"),
                };
                creative = Some(CreativeState {
                    label,
                    wrapper,
                    ad_id: attr(&e, b"adId", before)?,
                    id,
                    ..CreativeState::default()
                });
            }
            Kind::UniversalAdId => {
                if let Some(c) = creative.as_mut().filter(|c| c.universal_ad_id.is_none()) {
                    c.universal_ad_id = Some(attr(&e, b"idValue", before)?.unwrap_or_default());
                }
            }
            Kind::Linear => {
                let name = e.name();
                let prefix = name
                    .prefix()
                    .map(|p| format!("{}:", String::from_utf8_lossy(p.as_ref())))
                    .unwrap_or_default();
                let state = LinearState {
                    prefix,
                    start: before,
                    after_start: after,
                    first_child: None,
                    icons_first_end: None,
                    te: empty.then_some(Site::ReplaceEmpty {
                        start: before,
                        end: after,
                        linear: true,
                    }),
                    tracking_indent: None,
                    te_indent: None,
                    trailer: None,
                    existing: Vec::new(),
                    tracking_text: None,
                };
                linear = Some(state);
            }
            Kind::TrackingEvents => {
                let label = creative
                    .as_ref()
                    .map(|c| c.label.clone())
                    .unwrap_or_default();
                if let Some(l) = linear.as_mut() {
                    if l.te.is_some() {
                        return Err(VastError::RepeatedTrackingEvents { creative: label });
                    }
                    l.te_indent = line_indent(xml, before);
                    l.te = Some(if empty {
                        Site::ReplaceEmpty {
                            start: before,
                            end: after,
                            linear: false,
                        }
                    } else {
                        Site::Append { at: after }
                    });
                }
            }
            Kind::Tracking => {
                if let Some(l) = linear.as_mut() {
                    l.tracking_indent = line_indent(xml, before);
                    if !empty {
                        l.tracking_text = Some(String::new());
                    }
                }
            }
            _ => {}
        }
        if empty {
            close(
                kind,
                xml,
                before,
                after,
                &mut creative,
                &mut linear,
                &mut sites,
            )?;
            root_done |= stack.is_empty();
        } else {
            stack.push(kind);
        }
    }
    if let Some(open) = stack.last() {
        return Err(malformed(
            xml.len(),
            format!("the document ends inside an open element ({open:?})"),
        ));
    }
    if !root_done {
        return Err(malformed(0, "no root element"));
    }
    Ok(sites)
}

/// Handles the end of an element of `kind` whose closing markup spans `before..after`.
fn close(
    kind: Kind,
    xml: &str,
    before: usize,
    after: usize,
    creative: &mut Option<CreativeState>,
    linear: &mut Option<LinearState>,
    sites: &mut Vec<LinearSite>,
) -> Result<(), VastError> {
    match kind {
        Kind::Icons => {
            if let Some(l) = linear.as_mut() {
                if matches!(l.first_child, Some((Kind::Icons, _))) && l.icons_first_end.is_none() {
                    l.icons_first_end = Some(after);
                }
            }
        }
        Kind::Tracking => {
            if let Some(l) = linear.as_mut() {
                if let Some(text) = l.tracking_text.take() {
                    l.existing.push(text.trim().to_owned());
                }
            }
        }
        Kind::TrackingEvents => {
            if let Some(l) = linear.as_mut() {
                if let Some(Site::Append { at }) = l.te.as_mut() {
                    // Append after the last child, before the whitespace that
                    // indents the closing tag.
                    let inside = &xml[*at..before];
                    if inside.is_empty() {
                        l.trailer = l.te_indent.clone();
                    }
                    *at += inside.trim_end_matches([' ', '\t', '\r', '\n']).len();
                }
            }
        }
        Kind::Linear => {
            let (Some(l), Some(c)) = (linear.take(), creative.as_mut()) else {
                return Ok(());
            };
            let linear_indent = line_indent(xml, l.start);
            let child_indent = l.first_child.as_ref().and_then(|(_, i)| i.clone());
            let unit = if linear_indent.as_deref().unwrap_or("").contains('\t') {
                "\t"
            } else {
                "  "
            };
            let (site, indent) = match l.te {
                Some(Site::Append { at }) => (
                    Site::Append { at },
                    l.tracking_indent.or_else(|| l.te_indent.map(|t| t + unit)),
                ),
                Some(Site::ReplaceEmpty {
                    start,
                    end,
                    linear: true,
                }) => (
                    Site::ReplaceEmpty {
                        start,
                        end,
                        linear: true,
                    },
                    linear_indent,
                ),
                Some(other) => (other, l.te_indent),
                None => (
                    Site::Insert {
                        at: l.icons_first_end.unwrap_or(l.after_start),
                    },
                    child_indent.or_else(|| linear_indent.map(|i| i + unit)),
                ),
            };
            c.linears.push(LinearSite {
                creative: c.label.clone(),
                video_id: Err(""),
                prefix: l.prefix,
                site,
                indent,
                unit,
                existing: l.existing,
                trailer: l.trailer,
            });
        }
        Kind::Creative => {
            if let Some(c) = creative.take() {
                let video_id = video_id(&c);
                sites.extend(c.linears.into_iter().map(|mut s| {
                    s.video_id = video_id.clone();
                    s
                }));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Rule 4's id of a creative: its first `UniversalAdId` idValue; for a wrapper
/// creative without one, its `adId` attribute, else its `id` attribute.
fn video_id(c: &CreativeState) -> Result<String, &'static str> {
    let usable = |v: &Option<String>| {
        v.as_ref()
            .filter(|v| !v.trim().is_empty() && !v.trim().eq_ignore_ascii_case("unknown"))
            .cloned()
    };
    if let Some(v) = usable(&c.universal_ad_id) {
        return Ok(v);
    }
    if c.wrapper {
        return usable(&c.ad_id).or_else(|| usable(&c.id)).ok_or(
            "a wrapper creative needs an adId or id attribute (VAST 4.0 wrappers carry no UniversalAdId)",
        );
    }
    match &c.universal_ad_id {
        None => Err("it has no UniversalAdId"),
        Some(v) if v.trim().is_empty() => Err("its UniversalAdId idValue is empty"),
        Some(_) => Err("its UniversalAdId idValue is \"unknown\""),
    }
}
