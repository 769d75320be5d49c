//! `GET /v1/events/ad/impression` and `GET /v1/events/ad/click`: the impression and
//! click URLs of every served ad (VAST `Impression` / `ClickTracking`, and the
//! `impressionUrl` / `clickUrl` of product and banner ads).
//!
//! Same conventions as the interaction beacon (query in `rm_schemas::ad_event`):
//! 200 with the pixel once durable or a duplicate of a durable event, 400 with the
//! error status object, 503 when not durable. Records go to the same topic with
//! `interactionType` `adImpression` / `adClick`. An impression counts once per
//! realised ad id and tracking id (its dedup key leaves the timestamp out); a click
//! re-fired identically counts once. Invalid traffic is answered the same, its record
//! flagged ([`crate::traffic`]).
//!
//! A click with `dest` and a valid `sig` answers `302 Found` with `Location: dest`
//! after the click is durable. When the log cannot make it durable the shopper is
//! redirected all the same (a click must never strand them) and the click is counted
//! as not recorded (`ingest_click_redirects_total{recorded="false"}`). An unsigned,
//! tampered or non-http(s) `dest` is a 400 and never redirects.
//!
//! **Links end.** A signed click redirects only while its ad id is valid, and for
//! `RM_INGEST_CLICK_REDIRECT_GRACE_SECS` (an hour) after it expired: a shopper who
//! left a page open a while still gets there. Later the click is recorded (its ad id
//! expired, so it is not billable) and answered `410 Gone` with a short page saying
//! the ad has ended (`ingest_click_links_ended_total`). 410 rather than a redirect
//! anywhere: the edge knows no safe place to send the shopper (the destination is
//! the campaign's, and the campaign may have been rejected for it), and 410 tells
//! link checkers and crawlers the link is gone for good, which a 404 would not. The
//! edge does not know campaign states; since ads of a rejected or ended campaign are
//! no longer served, their links stop within the ads' lifetime
//! (`RM_API_AD_TTL_SECS`) plus the grace period.

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use rm_eventlog::EventLog;
use rm_schemas::ad_event::{check_destination, parse_ad_beacon};
use rm_schemas::agent::Traffic;
use rm_schemas::inspect::{Endpoint, Outcome};
use rm_schemas::{InteractionType, RejectReason, Rejection};
use rm_service::{response, Response};

use crate::edge::{pixel, Edge, Written};

impl<L: EventLog> Edge<L> {
    /// Handles one impression (`AdImpression`) or click (`AdClick`) query string sent
    /// with `traffic`'s headers.
    pub async fn ad_event(&self, kind: InteractionType, query: &str, traffic: Traffic) -> Response {
        let endpoint = if kind == InteractionType::AdClick {
            Endpoint::Click
        } else {
            Endpoint::Impression
        };
        let beacon = match parse_ad_beacon(kind, query) {
            Ok(b) => b,
            Err(rejection) => return self.reject(endpoint, query, &rejection),
        };
        let verdict = match self.verdict(&beacon.event) {
            Ok(v) => v,
            Err(rejection) => return self.reject(endpoint, query, &rejection),
        };
        let location = match &beacon.dest {
            None => None,
            Some(dest) => {
                let checked = check_destination(
                    &self.ad_keys,
                    &beacon.event.ad_id,
                    dest,
                    beacon.sig.as_deref(),
                )
                .and_then(|()| {
                    HeaderValue::from_bytes(dest.as_bytes()).map_err(|_| {
                        Rejection::new(
                            RejectReason::InvalidDestination,
                            "dest",
                            "dest cannot be sent in a Location header",
                        )
                    })
                });
                match checked {
                    Ok(v) => Some(v),
                    Err(rejection) => return self.reject(endpoint, query, &rejection),
                }
            }
        };
        let now = chrono::Utc::now();
        let ended = location.is_some() && self.link_ended(&beacon.event.ad_id, now.timestamp());
        let mut record = self.record(beacon.event, now);
        record.ad_id_verdict = verdict;
        record.set_traffic(traffic);
        let anonymous = record.anonymous;
        let written = self.write(record).await;
        let message = match (&written, &location) {
            _ if ended => {
                Some("not redirected: the ad id expired beyond the grace period (410)".to_owned())
            }
            (Written::Failed(_), Some(_)) => {
                Some("redirected, but the click could not be made durable".to_owned())
            }
            _ => None,
        };
        let outcome: Outcome = written.outcome();
        // Never shown to the inspector without consent (see `Edge::beacon`).
        if !anonymous {
            self.observe(endpoint, query, outcome, message, verdict);
        }
        if ended {
            self.metrics.links_ended.increment(1);
            return link_ended();
        }
        match (location, written) {
            (Some(location), w) => {
                self.metrics
                    .click_redirect(!matches!(w, Written::Failed(_)));
                redirect(location)
            }
            (None, Written::Durable | Written::Duplicate) => pixel(),
            (None, Written::Failed(r)) => r,
        }
    }
}

impl<L: EventLog> Edge<L> {
    /// True when a signed click on `ad_id` must no longer redirect at `now` (Unix
    /// seconds): the id expired more than the grace period ago, or cannot be read.
    fn link_ended(&self, ad_id: &str, now: i64) -> bool {
        let grace = i64::try_from(self.config.click_redirect_grace_secs).unwrap_or(i64::MAX);
        rm_schemas::ad_id::parse(ad_id).is_none_or(|id| now > id.expires_at.saturating_add(grace))
    }
}

/// The answer to a signed click whose link ended (module header).
fn link_ended() -> Response {
    const PAGE: &str = "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width\"><title>This ad has ended</title>\
<p>This ad has ended, so its link no longer leads anywhere.</p>\
<p>Go back to the page you came from to find what it showed.</p></html>";
    response::with_body(
        StatusCode::GONE,
        "text/html; charset=utf-8",
        Bytes::from_static(PAGE.as_bytes()),
    )
}

fn redirect(location: HeaderValue) -> Response {
    let mut r = response::with_body(StatusCode::FOUND, "text/plain", Bytes::new());
    r.headers_mut().insert(header::LOCATION, location);
    r
}

#[cfg(test)]
mod tests;
