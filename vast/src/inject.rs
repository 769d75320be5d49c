//! Injection: checks what [`super::scan`] found against rule 4 and splices our
//! `TrackingEvents`/`Tracking` text into the input at the recorded offsets. Bytes
//! outside the splice points are copied unchanged.

use rm_schemas::validate::MAX_ID_LEN;
use rm_schemas::vast_events::MAPPED;

use super::scan::{scan, LinearSite, Site};
use super::url::{check_context, tracking_url};
use super::xml::escape_into;
use super::{TrackingContext, VastError, MAX_VAST_BYTES};

/// Adds our tracking to every `Linear` creative of `vast_xml` (see the module docs of
/// [`crate`] for the placement, the ids and the refusals).
pub fn inject(vast_xml: &str, ctx: &TrackingContext) -> Result<String, VastError> {
    if vast_xml.len() > MAX_VAST_BYTES {
        return Err(VastError::TooLarge {
            len: vast_xml.len(),
            max: MAX_VAST_BYTES,
        });
    }
    check_context(ctx)?;
    let sites = scan(vast_xml)?;
    if sites.is_empty() {
        return Err(VastError::NoLinearCreative);
    }
    let ours = format!("{}?", ctx.beacon_url);
    let mut ids: Vec<(&str, &str)> = Vec::with_capacity(sites.len());
    for s in &sites {
        if s.existing.iter().any(|u| u.starts_with(&ours)) {
            return Err(VastError::AlreadyInjected {
                creative: s.creative.clone(),
                beacon_url: ctx.beacon_url.clone(),
            });
        }
        let id = s
            .video_id
            .as_deref()
            .map_err(|&reason| VastError::MissingVideoId {
                creative: s.creative.clone(),
                reason,
            })?;
        if id.len() > MAX_ID_LEN {
            return Err(VastError::VideoIdTooLong {
                creative: s.creative.clone(),
                len: id.len(),
                max: MAX_ID_LEN,
            });
        }
        if let Some(&(_, first)) = ids.iter().find(|(v, _)| *v == id) {
            return Err(VastError::DuplicateVideoId {
                video_id: id.to_owned(),
                first: first.to_owned(),
                creative: s.creative.clone(),
            });
        }
        ids.push((id, &s.creative));
    }
    let mut out = String::with_capacity(vast_xml.len() + sites.len() * MAPPED.len() * 400);
    let mut cursor = 0;
    for (s, (video_id, _)) in sites.iter().zip(&ids) {
        let (start, end) = match s.site {
            Site::Insert { at } | Site::Append { at } => (at, at),
            Site::ReplaceEmpty { start, end, .. } => (start, end),
        };
        // Linears never nest, so the scan's offsets only grow; check anyway rather
        // than slice out of order.
        if start < cursor || end < start || end > vast_xml.len() {
            return Err(VastError::Malformed {
                position: start as u64,
                message: "overlapping Linear elements".into(),
            });
        }
        out.push_str(&vast_xml[cursor..start]);
        write_site(&mut out, &vast_xml[start..end], s, ctx, video_id);
        cursor = end;
    }
    out.push_str(&vast_xml[cursor..]);
    Ok(out)
}

fn newline(out: &mut String, indent: Option<&str>) {
    if let Some(i) = indent {
        out.push('\n');
        out.push_str(i);
    }
}

fn deeper(indent: Option<&str>, unit: &str) -> Option<String> {
    indent.map(|i| format!("{i}{unit}"))
}

/// One `<Tracking>` per mapped event, each on its own line at `indent`.
fn trackings(
    out: &mut String,
    s: &LinearSite,
    ctx: &TrackingContext,
    video_id: &str,
    indent: Option<&str>,
) {
    for &(event, interaction) in &MAPPED {
        newline(out, indent);
        out.push('<');
        out.push_str(&s.prefix);
        out.push_str("Tracking event=\"");
        out.push_str(event);
        out.push_str("\">");
        escape_into(&tracking_url(ctx, interaction, video_id), out);
        out.push_str("</");
        out.push_str(&s.prefix);
        out.push_str("Tracking>");
    }
}

/// A whole `<TrackingEvents>` element at `indent`.
fn tracking_events(
    out: &mut String,
    s: &LinearSite,
    ctx: &TrackingContext,
    video_id: &str,
    indent: Option<&str>,
) {
    newline(out, indent);
    out.push('<');
    out.push_str(&s.prefix);
    out.push_str("TrackingEvents>");
    trackings(out, s, ctx, video_id, deeper(indent, s.unit).as_deref());
    newline(out, indent);
    out.push_str("</");
    out.push_str(&s.prefix);
    out.push_str("TrackingEvents>");
}

/// Writes what replaces `replaced` (empty for insertions) at one site.
fn write_site(
    out: &mut String,
    replaced: &str,
    s: &LinearSite,
    ctx: &TrackingContext,
    video_id: &str,
) {
    let indent = s.indent.as_deref();
    match s.site {
        Site::Insert { .. } => tracking_events(out, s, ctx, video_id, indent),
        Site::Append { .. } => {
            trackings(out, s, ctx, video_id, indent);
            newline(out, s.trailer.as_deref());
        }
        Site::ReplaceEmpty { linear, .. } => {
            // `<Name attrs/>` becomes `<Name attrs>...</Name>`, the start tag as written.
            let inner = replaced
                .strip_prefix('<')
                .and_then(|r| r.strip_suffix("/>"))
                .unwrap_or(replaced)
                .trim_end();
            let name = inner
                .split(|c: char| c.is_ascii_whitespace())
                .next()
                .unwrap_or(inner);
            out.push('<');
            out.push_str(inner);
            out.push('>');
            let inside = deeper(indent, s.unit);
            if linear {
                tracking_events(out, s, ctx, video_id, inside.as_deref());
            } else {
                trackings(out, s, ctx, video_id, inside.as_deref());
            }
            newline(out, indent);
            out.push_str("</");
            out.push_str(name);
            out.push('>');
        }
    }
}

#[cfg(test)]
#[path = "inject_tests.rs"]
pub(crate) mod tests;
