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

use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use rm_eventlog::EventLog;
use rm_schemas::ad_event::{check_destination, parse_ad_beacon};
use rm_schemas::agent::Traffic;
use rm_schemas::inspect::{Endpoint, Outcome};
use rm_schemas::{EventRecord, InteractionType, RejectReason, Rejection};
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
        let mut record = EventRecord::new(beacon.event, uuid::Uuid::now_v7(), chrono::Utc::now());
        record.ad_id_verdict = verdict;
        record.set_traffic(traffic);
        let written = self.write(record).await;
        let message = match (&written, &location) {
            (Written::Failed(_), Some(_)) => {
                Some("redirected, but the click could not be made durable".to_owned())
            }
            _ => None,
        };
        let outcome: Outcome = written.outcome();
        self.observe(endpoint, query, outcome, message, verdict);
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

fn redirect(location: HeaderValue) -> Response {
    let mut r = response::with_body(StatusCode::FOUND, "text/plain", Bytes::new());
    r.headers_mut().insert(header::LOCATION, location);
    r
}

#[cfg(test)]
mod tests;
