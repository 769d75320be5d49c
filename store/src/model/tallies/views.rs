//! What a video view adds to the tallies: its row's counts ([`Counts`]) at its
//! campaign's and its creative's ([`super::Scope::Video`]) place of the UTC day of its
//! earliest event. A view is an entity (its row is derived from its set of facts,
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
use crate::model::funnel::ViewRow;
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

/// The two places a view row counts in: its campaign's and its creative's (the
/// video id), on the UTC day of its earliest event, in log `partition`.
pub fn places(row: &ViewRow, partition: i32) -> [Place; 2] {
    places_at(&row.campaign_id, &row.key.video_id, row.day, partition)
}

/// The two places a view of `campaign` and `video` counts in on UTC `day`.
pub fn places_at(campaign: &str, video: &str, day: i32, partition: i32) -> [Place; 2] {
    let place = |scope: Scope, creative: &str| Place {
        campaign_id: campaign.to_owned(),
        scope,
        grain: Grain::Day,
        bucket: day,
        creative: creative.to_owned(),
        catalog_id: String::new(),
        product_code: String::new(),
        partition,
    };
    [place(Scope::Campaign, ""), place(Scope::Video, video)]
}

/// The net moves of a view counted as `old` (`None`: not yet) that now is `new`:
/// the old row's counts taken away where they were, the new one's added where they
/// are, netted per tally (none when nothing changed).
pub fn moves(old: Option<&ViewRow>, new: &ViewRow, partition: i32) -> Vec<(TallyKey, i64)> {
    // The common case, a view that grows on its day: only the counts that changed.
    if let Some(o) = old.filter(|o| {
        o.day == new.day && o.campaign_id == new.campaign_id && o.key.video_id == new.key.video_id
    }) {
        let (before, after) = (counts(o), counts(new));
        let changed: Vec<(ViewField, i64)> = ViewField::ALL
            .iter()
            .zip(before.iter().zip(after))
            .filter(|(_, (b, a))| **b != *a)
            .map(|(f, (b, a))| (*f, a - *b))
            .collect();
        if changed.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(changed.len() * 2);
        for place in places(new, partition) {
            for (f, d) in &changed {
                out.push((
                    TallyKey {
                        place: place.clone(),
                        metric: Metric::View(*f),
                    },
                    *d,
                ));
            }
        }
        return out;
    }
    let mut out: Vec<(TallyKey, i64)> = Vec::new();
    let mut add = |row: &ViewRow, sign: i64| {
        let c = counts(row);
        for place in places(row, partition) {
            for (f, n) in ViewField::ALL.iter().zip(c) {
                if n == 0 {
                    continue;
                }
                let key = TallyKey {
                    place: place.clone(),
                    metric: Metric::View(*f),
                };
                match out.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, d)) => *d += sign * n,
                    None => out.push((key, sign * n)),
                }
            }
        }
    };
    if let Some(old) = old {
        add(old, -1);
    }
    add(new, 1);
    out.retain(|(_, d)| *d != 0);
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
        let first = row([1, 1, 0, 0, 0, 0], 10);
        let m = moves(None, &first, 3);
        // views, creative views, plays, pauses at two places.
        assert_eq!(m.len(), 8);
        assert!(m.iter().all(|(_, d)| *d == 1));
        let later = row([1, 1, 1, 0, 0, 0], 10);
        let m = moves(Some(&first), &later, 3);
        assert_eq!(m.len(), 2, "only the first quartile moved: {m:?}");
        assert!(m
            .iter()
            .all(|(k, d)| *d == 1 && k.metric == Metric::View(ViewField::FirstQuartiles)));
        // An earlier event moves the whole view to its day.
        let earlier = row([1, 1, 1, 0, 0, 0], 9);
        let m = moves(Some(&later), &earlier, 3);
        assert_eq!(m.iter().map(|(_, d)| d).sum::<i64>(), 0);
        assert_eq!(m.len(), 20);
        assert!(moves(Some(&earlier), &earlier, 3).is_empty());
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
