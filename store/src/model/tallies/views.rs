//! What a video view adds to the tallies: its row's counts ([`Counts`]) at its
//! campaign's and its creative's ([`super::Scope::Video`]) places of the UTC day and
//! the quarter hour of its earliest event (so the funnel and the campaign summary
//! read in any zone). A view is an entity (its row is derived from its set of facts,
//! [`crate::model::funnel::derive_view`]), so as its events arrive its row changes,
//! and each change moves the difference from the old row's counts to the new one's
//! ([`moves`]), stamped with the record that made it like any other tally. Pure: the
//! aggregator's fold and the backfill of stored view rows both count through it.
//!
//! The counts are the funnel report's ([`crate::model::funnel::FunnelReportRow`]): a
//! view whose ad id verified and that is its served ad's view counts in the funnel,
//! the others as invalid views and plays, and every view by ad id status, so a row's
//! worst status is known.

use super::{Grain, Metric, Place, Scope, TallyKey};
use crate::model::funnel::{ViewFact, ViewRow};
use crate::model::status::AdIdStatus;

/// A count of the funnel a view row adds to (stored: [`Metric::View`] codes are
/// `128 + index in` [`ViewField::ALL`]; never reorder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViewField {
    /// Views with at least one milestone.
    Views,
    /// Views that reached creativeView.
    CreativeViews,
    /// Views that reached play.
    Plays,
    /// Views that reached the first quartile.
    FirstQuartiles,
    /// Views that reached the midpoint.
    Midpoints,
    /// Views that reached the third quartile.
    ThirdQuartiles,
    /// Views that completed.
    Completes,
    /// Debounced skips.
    Skips,
    /// Debounced pauses.
    Pauses,
    /// Debounced resumes.
    Resumes,
    /// Debounced mutes.
    Mutes,
    /// Debounced unmutes.
    Unmutes,
    /// Milestones present without their predecessor.
    FunnelGaps,
    /// Extra occurrences of milestones already reached.
    RepeatedMilestones,
    /// Views that do not count in the funnel (ad id not verified, or not their served
    /// ad's view), with at least one milestone.
    InvalidViews,
    /// Of those, the views that reached play.
    InvalidPlays,
    /// Views (rows) whose worst ad id status is expired.
    Expired,
    /// Views whose worst ad id status is a bad signature.
    BadSignature,
    /// Views whose ad id is not ours.
    Foreign,
}

impl ViewField {
    /// Every field, in code order.
    pub const ALL: [ViewField; 19] = [
        Self::Views,
        Self::CreativeViews,
        Self::Plays,
        Self::FirstQuartiles,
        Self::Midpoints,
        Self::ThirdQuartiles,
        Self::Completes,
        Self::Skips,
        Self::Pauses,
        Self::Resumes,
        Self::Mutes,
        Self::Unmutes,
        Self::FunnelGaps,
        Self::RepeatedMilestones,
        Self::InvalidViews,
        Self::InvalidPlays,
        Self::Expired,
        Self::BadSignature,
        Self::Foreign,
    ];

    /// Its index in [`Self::ALL`].
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|f| *f == self).unwrap_or(0)
    }

    /// The field that counts views of this status (`None` for a verified one).
    pub fn of_status(s: AdIdStatus) -> Option<Self> {
        match s {
            AdIdStatus::Verified => None,
            AdIdStatus::Expired => Some(Self::Expired),
            AdIdStatus::BadSignature => Some(Self::BadSignature),
            AdIdStatus::Foreign => Some(Self::Foreign),
        }
    }

    /// The status a status field counts.
    pub fn status(self) -> Option<AdIdStatus> {
        match self {
            Self::Expired => Some(AdIdStatus::Expired),
            Self::BadSignature => Some(AdIdStatus::BadSignature),
            Self::Foreign => Some(AdIdStatus::Foreign),
            _ => None,
        }
    }
}

/// A view row's counts, by [`ViewField::index`].
pub type Counts = [i64; ViewField::ALL.len()];

/// What `row` adds to the funnel (the funnel report's rule for one view).
pub fn counts(row: &ViewRow) -> Counts {
    let mut c = [0; ViewField::ALL.len()];
    let mut set = |f: ViewField, n: i64| c[f.index()] += n;
    let m = row.milestones.map(i64::from);
    let any = i64::from(m.iter().any(|x| *x > 0));
    set(ViewField::FunnelGaps, i64::from(row.funnel_gaps));
    set(
        ViewField::RepeatedMilestones,
        i64::from(row.repeated_milestones),
    );
    if let Some(f) = ViewField::of_status(row.ad_id_status) {
        set(f, 1);
    }
    if !row.ad_id_status.is_billable() || row.served_repeat {
        set(ViewField::InvalidViews, any);
        set(ViewField::InvalidPlays, m[1]);
        return c;
    }
    set(ViewField::Views, any);
    for (f, n) in [
        ViewField::CreativeViews,
        ViewField::Plays,
        ViewField::FirstQuartiles,
        ViewField::Midpoints,
        ViewField::ThirdQuartiles,
        ViewField::Completes,
    ]
    .into_iter()
    .zip(m)
    {
        set(f, n);
    }
    for (f, n) in [
        ViewField::Skips,
        ViewField::Pauses,
        ViewField::Resumes,
        ViewField::Mutes,
        ViewField::Unmutes,
    ]
    .into_iter()
    .zip(row.controls.map(i64::from))
    {
        set(f, n);
    }
    c
}

/// A view as the tallies count it: its row, and the time of its earliest event
/// (the row keeps its UTC day only; the facts give the time, [`first_ms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted<'a> {
    /// The view's row.
    pub row: &'a ViewRow,
    /// Its earliest event's time, ms.
    pub first_ms: i64,
}

/// The time of a view's earliest event (0 without facts): the instant its row's
/// `day` is the UTC day of ([`crate::model::funnel::derive_view`]).
pub fn first_ms(facts: &[ViewFact]) -> i64 {
    facts.iter().map(|f| f.time_ms).min().unwrap_or(0)
}

/// The four places a view counts in: its campaign's and its creative's, each on the
/// UTC day and the quarter hour of its earliest event, in log `partition`.
pub fn places(v: Counted<'_>, partition: i32) -> [Place; 6] {
    places_at(
        &v.row.campaign_id,
        &v.row.key.video_id,
        v.first_ms,
        partition,
    )
}

/// The six places a view of `campaign` and `video` whose earliest event is at
/// `first_ms` counts in: the campaign's and the video's UTC day, quarter hour and
/// hour.
pub fn places_at(campaign: &str, video: &str, first_ms: i64, partition: i32) -> [Place; 6] {
    let place = |scope: Scope, creative: &str, grain: Grain| Place {
        campaign_id: campaign.into(),
        scope,
        grain,
        bucket: grain.bucket(first_ms),
        creative: creative.into(),
        catalog_id: Default::default(),
        product_code: Default::default(),
        partition,
    };
    [
        place(Scope::Campaign, "", Grain::Day),
        place(Scope::Campaign, "", Grain::Quarter),
        place(Scope::Campaign, "", Grain::Hour),
        place(Scope::Video, video, Grain::Day),
        place(Scope::Video, video, Grain::Quarter),
        place(Scope::Video, video, Grain::Hour),
    ]
}

/// The net moves of a view counted as `old` (`None`: not yet) that now is `new`:
/// the old row's counts taken away where they were, the new one's added where they
/// are, netted per tally (none when nothing changed).
pub fn moves(old: Option<Counted<'_>>, new: Counted<'_>, partition: i32) -> Vec<(TallyKey, i64)> {
    // Netted per place first (six when the view stays in its quarter hour, the
    // common case; at most twelve when it moved, keeping some places such as its
    // day), then one key per count that changed.
    let mut netted: Vec<(Place, [i64; ViewField::ALL.len()])> = Vec::with_capacity(12);
    let mut add = |v: Counted<'_>, sign: i64| {
        let c = counts(v.row);
        for place in places(v, partition) {
            let at = match netted.iter().position(|(p, _)| *p == place) {
                Some(at) => at,
                None => {
                    netted.push((place, [0; ViewField::ALL.len()]));
                    netted.len() - 1
                }
            };
            for (d, n) in netted[at].1.iter_mut().zip(c) {
                *d += sign * n;
            }
        }
    };
    if let Some(old) = old {
        add(old, -1);
    }
    add(new, 1);
    let mut out: Vec<(TallyKey, i64)> = Vec::new();
    for (place, deltas) in netted {
        for (f, d) in ViewField::ALL.iter().zip(deltas) {
            if d != 0 {
                out.push((
                    TallyKey {
                        place: place.clone(),
                        metric: Metric::View(*f),
                    },
                    d,
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::funnel::ViewKey;

    fn row(milestones: [u8; 6], day: i32) -> ViewRow {
        ViewRow {
            key: ViewKey {
                ad_id: "ad".into(),
                video_id: "vid".into(),
                tracking_id: "s".into(),
            },
            campaign_id: "c".into(),
            day,
            version: 1,
            milestones,
            controls: [0, 1, 0, 0, 0],
            funnel_gaps: 0,
            repeated_milestones: 0,
            ad_id_status: AdIdStatus::Verified,
            served_repeat: false,
        }
    }

    #[test]
    fn a_view_counts_in_its_campaign_and_creative_and_moves_as_it_grows() {
        let c = |row, first_ms| Counted { row, first_ms };
        let at10 = 10 * crate::model::DAY_MS + 3_600_000;
        let first = row([1, 1, 0, 0, 0, 0], 10);
        let m = moves(None, c(&first, at10), 3);
        // views, creative views, plays, pauses at six places (two days, two quarters,
        // two hours).
        assert_eq!(m.len(), 24);
        assert!(m.iter().all(|(_, d)| *d == 1));
        let quarters: std::collections::BTreeSet<i32> = m
            .iter()
            .filter(|(k, _)| k.place.grain == Grain::Quarter)
            .map(|(k, _)| k.place.bucket)
            .collect();
        assert_eq!(quarters, [10 * 96 + 4].into());
        let later = row([1, 1, 1, 0, 0, 0], 10);
        let m = moves(Some(c(&first, at10)), c(&later, at10), 3);
        assert_eq!(m.len(), 6, "only the first quartile moved: {m:?}");
        assert!(m
            .iter()
            .all(|(k, d)| *d == 1 && k.metric == Metric::View(ViewField::FirstQuartiles)));
        // An earlier event on the same day moves the view to its quarter hour and
        // hour only.
        let m = moves(Some(c(&later, at10)), c(&later, at10 - 1_800_000), 3);
        assert_eq!(m.iter().map(|(_, d)| d).sum::<i64>(), 0);
        assert!(m.iter().all(|(k, _)| k.place.grain != Grain::Day), "{m:?}");
        assert_eq!(m.len(), 40);
        // One in the same hour, its quarter hour only.
        let m = moves(Some(c(&later, at10)), c(&later, at10 + 900_000), 3);
        assert!(
            m.iter().all(|(k, _)| k.place.grain == Grain::Quarter),
            "{m:?}"
        );
        assert_eq!(m.len(), 20);
        // One on the day before moves it whole.
        let earlier = row([1, 1, 1, 0, 0, 0], 9);
        let m = moves(Some(c(&later, at10)), c(&earlier, at10 - 7_200_000), 3);
        assert_eq!(m.iter().map(|(_, d)| d).sum::<i64>(), 0);
        assert_eq!(m.len(), 60);
        assert!(moves(Some(c(&earlier, 5)), c(&earlier, 5), 3).is_empty());
    }

    #[test]
    fn a_view_that_is_not_its_served_ads_counts_beside_the_funnel() {
        let mut r = row([1, 1, 1, 1, 1, 1], 10);
        r.served_repeat = true;
        let c = counts(&r);
        assert_eq!(c[ViewField::InvalidViews.index()], 1);
        assert_eq!(c[ViewField::InvalidPlays.index()], 1);
        assert_eq!(c[ViewField::Plays.index()], 0);
        assert_eq!(c[ViewField::Pauses.index()], 0);
        r.served_repeat = false;
        r.ad_id_status = AdIdStatus::Expired;
        let c = counts(&r);
        assert_eq!(
            (
                c[ViewField::InvalidViews.index()],
                c[ViewField::Expired.index()]
            ),
            (1, 1)
        );
    }
}
