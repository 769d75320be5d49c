//! Report periods: which tallies a report in an IANA time zone reads, and the period
//! each bucket falls in (`timeZone`, `granularity`).
//!
//! A report covers the local dates `from` to `to` of its zone: from the first instant
//! of `from` to the first instant of the day after `to` ([`Periods::span_ms`]). Every
//! zone's UTC offset, at any time, is a whole number of quarter hours, so a local
//! hour, day, week or month is a whole number of quarter-hour buckets: a report in
//! any zone sums quarters ([`Grain::Quarter`]) and is exact. A report in UTC by day,
//! week, month or over the whole range sums days ([`Grain::Day`]), 96 times fewer
//! rows. Periods are labelled by their first local instant: a week by its Monday (ISO
//! weeks; the first and last may be cut by the range), a month by its first day, the
//! summary by `from`. Around a change of offset a local hour may be missing (its
//! buckets do not exist) or happen twice (both fall in one period, labelled by the
//! first).

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, Offset, TimeZone, Timelike};
use chrono_tz::Tz;

use super::tallies::{Grain, Group, QUARTERS_PER_DAY, QUARTERS_PER_HOUR};

mod mixed;
pub use mixed::Mixed;

/// How rows are cut in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// Local hours.
    Hour,
    /// Local days.
    Day,
    /// ISO weeks (Monday to Sunday).
    Week,
    /// Calendar months.
    Month,
    /// One period: the whole range.
    Summary,
}

impl Granularity {
    /// Every granularity, as the query names them.
    pub const ALL: [Granularity; 5] = [
        Self::Hour,
        Self::Day,
        Self::Week,
        Self::Month,
        Self::Summary,
    ];

    /// The query's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hour => "hour",
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
            Self::Summary => "summary",
        }
    }

    /// Reads a query's name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.as_str() == s)
    }
}

/// A time zone by its IANA name (`UTC`, `Europe/Paris`, `Asia/Kolkata`).
pub fn zone(name: &str) -> Option<Tz> {
    name.parse::<Tz>().ok()
}

/// The periods of one report.
#[derive(Debug, Clone, PartialEq)]
pub struct Periods {
    /// The zone.
    pub tz: Tz,
    /// How rows are cut.
    pub granularity: Granularity,
    from: NaiveDate,
    to: NaiveDate,
}

/// A period as a row shows it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Period {
    /// Its first instant, ms since the epoch (orders rows).
    pub start_ms: i64,
    /// Its first local date, `YYYY-MM-DD`.
    pub day: String,
    /// Its first local instant, RFC 3339 with the zone's offset then.
    pub start: String,
}

fn date_of(day: i32) -> NaiveDate {
    NaiveDate::default() + Duration::days(i64::from(day))
}

impl Periods {
    /// The periods of local dates `from_day` to `to_day` (days since 1970-01-01, read
    /// as local dates of `tz`).
    pub fn new(tz: Tz, granularity: Granularity, from_day: i32, to_day: i32) -> Self {
        Self {
            tz,
            granularity,
            from: date_of(from_day),
            to: date_of(to_day),
        }
    }

    /// UTC by day, as every report read before time zones.
    pub fn utc_days(from_day: i32, to_day: i32) -> Self {
        Self::new(Tz::UTC, Granularity::Day, from_day, to_day)
    }

    /// How many periods the range holds at most: a report's rows per place (a local
    /// day of 25 hours where the zone turns its clocks back).
    pub fn most(&self) -> usize {
        let days = usize::try_from((self.to - self.from).num_days()).map_or(1, |d| d + 1);
        let monday =
            |d: NaiveDate| d - Duration::days(i64::from(d.weekday().num_days_from_monday()));
        let month = |d: NaiveDate| i64::from(d.year()) * 12 + i64::from(d.month0());
        let count = |n: i64| usize::try_from(n).map_or(1, |n| n + 1);
        match self.granularity {
            Granularity::Hour => days.saturating_mul(25),
            Granularity::Day => days,
            Granularity::Week => count((monday(self.to) - monday(self.from)).num_weeks()),
            Granularity::Month => count(month(self.to) - month(self.from)),
            Granularity::Summary => 1,
        }
    }

    /// Which buckets of the plan's read ([`Self::plan`]) fall in one period, so a store
    /// may sum them before they are moved ([`Group`]): all of them in a summary; in UTC
    /// by week, a week's days; by hour, day or week in a zone whose offset holds over
    /// the range, the quarters of a local hour, day or week; else each apart (months
    /// differ in length, and a change of offset moves where periods start).
    pub fn group(&self) -> Group {
        // Day 0 (1970-01-01) is a Thursday: three days after a Monday.
        const MONDAY: i64 = 3;
        const DAY: i64 = QUARTERS_PER_DAY as i64;
        let every = |width: i64, shift: i64| Group::Every {
            width: i32::try_from(width).unwrap_or(i32::MAX),
            shift: i32::try_from(shift.rem_euclid(width)).unwrap_or(0),
        };
        match (self.plan().0, self.granularity) {
            (_, Granularity::Summary) => Group::Whole,
            (Grain::Day, Granularity::Week) => every(7, MONDAY),
            (Grain::Quarter, g) => match (self.fixed_offset_quarters(), g) {
                (Some(off), Granularity::Hour) => every(QUARTERS_PER_HOUR.into(), off),
                (Some(off), Granularity::Day) => every(DAY, off),
                (Some(off), Granularity::Week) => every(7 * DAY, off + MONDAY * DAY),
                _ => Group::Each,
            },
            _ => Group::Each,
        }
    }

    /// The zone's offset from UTC in quarter hours, when one holds over the whole range
    /// (two changes of offset are never a day apart, so one a day is looked at).
    fn fixed_offset_quarters(&self) -> Option<i64> {
        let (start, end) = self.span_ms();
        let offset = |ms: i64| {
            DateTime::from_timestamp_millis(ms).map(|t| {
                self.tz
                    .offset_from_utc_datetime(&t.naive_utc())
                    .fix()
                    .local_minus_utc()
            })
        };
        let first = offset(start)?;
        let mut at = (start..end).step_by(86_400_000).chain([end - 1]);
        if !at.all(|ms| offset(ms) == Some(first)) || first % 900 != 0 {
            return None;
        }
        Some(i64::from(first / 900))
    }

    /// The first instant (ms) of a local date-time, or the first one after it when
    /// the zone skipped it (a change of offset).
    fn instant(&self, local: NaiveDateTime) -> i64 {
        let mut t = local;
        for _ in 0..(4 * 26) {
            if let Some(d) = self.tz.from_local_datetime(&t).earliest() {
                return d.timestamp_millis();
            }
            t += Duration::minutes(15);
        }
        local.and_utc().timestamp_millis()
    }

    /// The first instant (ms) of a period (its local start, from [`Self::period_of`]).
    pub fn start_of(&self, local: NaiveDateTime) -> i64 {
        self.instant(local)
    }

    /// The instants the report covers: [first instant of `from`, first instant of the
    /// day after `to`).
    pub fn span_ms(&self) -> (i64, i64) {
        let start = self.instant(self.from.and_time(chrono::NaiveTime::MIN));
        let end = self.instant((self.to + Duration::days(1)).and_time(chrono::NaiveTime::MIN));
        (start, end)
    }

    /// The tallies to read: their grain and first and last bucket.
    pub fn plan(&self) -> (Grain, i32, i32) {
        let (start, end) = self.span_ms();
        if self.tz == Tz::UTC && self.granularity != Granularity::Hour {
            let g = Grain::Day;
            return (g, g.bucket(start), g.bucket(end - 1));
        }
        let g = Grain::Quarter;
        (g, g.bucket(start), g.bucket(end - 1).max(g.bucket(start)))
    }

    /// The local start of the period an instant falls in (`None` outside the range).
    pub fn period_of(&self, ms: i64) -> Option<NaiveDateTime> {
        let (start, end) = self.span_ms();
        if ms < start || ms >= end {
            return None;
        }
        let local = DateTime::from_timestamp_millis(ms)?
            .with_timezone(&self.tz)
            .naive_local();
        let date = local.date();
        let midnight = |d: NaiveDate| d.and_time(chrono::NaiveTime::MIN);
        Some(match self.granularity {
            Granularity::Hour => local.with_minute(0)?.with_second(0)?.with_nanosecond(0)?,
            Granularity::Day => midnight(date),
            Granularity::Week => {
                midnight(date - Duration::days(i64::from(date.weekday().num_days_from_monday())))
            }
            Granularity::Month => midnight(date.with_day(1)?),
            Granularity::Summary => midnight(self.from),
        })
    }

    /// How a period (its local start, from [`Self::period_of`]) is shown.
    pub fn label(&self, local: NaiveDateTime) -> Period {
        let start_ms = self.instant(local);
        let start = DateTime::from_timestamp_millis(start_ms)
            .map(|d| {
                d.with_timezone(&self.tz)
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            })
            .unwrap_or_default();
        Period {
            start_ms,
            day: local.date().format("%Y-%m-%d").to_string(),
            start,
        }
    }

    /// The period of a bucket of `grain` (by its first instant), labelled; `None`
    /// outside the range.
    pub fn period_of_bucket(&self, grain: Grain, bucket: i32) -> Option<NaiveDateTime> {
        self.period_of(grain.start_ms(bucket))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::day_of;
    use proptest::prelude::*;

    fn day(s: &str) -> i32 {
        crate::model::parse_day(s).expect("a date")
    }

    #[test]
    fn utc_days_read_day_buckets_and_other_zones_quarters() {
        let p = Periods::utc_days(day("2026-11-01"), day("2026-11-30"));
        assert_eq!(p.plan(), (Grain::Day, day("2026-11-01"), day("2026-11-30")));
        let kolkata = zone("Asia/Kolkata").expect("a zone");
        let p = Periods::new(
            kolkata,
            Granularity::Day,
            day("2026-11-26"),
            day("2026-11-26"),
        );
        let (g, a, b) = p.plan();
        assert_eq!(g, Grain::Quarter);
        assert_eq!(b - a + 1, 96, "one local day, 96 quarters");
        // Local midnight is 18:30 UTC the day before.
        assert_eq!(
            Grain::Quarter.start_ms(a),
            DateTime::parse_from_rfc3339("2026-11-25T18:30:00Z")
                .expect("time")
                .timestamp_millis()
        );
        let l = p.label(p.period_of_bucket(g, a).expect("in range"));
        assert_eq!(
            (l.day.as_str(), l.start.as_str()),
            ("2026-11-26", "2026-11-26T00:00:00+05:30")
        );
        assert!(p.period_of_bucket(g, a - 1).is_none());
        assert!(p.period_of_bucket(g, b + 1).is_none());
        assert!(zone("Mars/Olympus").is_none());
    }

    #[test]
    fn weeks_months_and_the_summary_are_labelled_by_their_start() {
        let paris = zone("Europe/Paris").expect("a zone");
        let ms = DateTime::parse_from_rfc3339("2026-11-26T23:30:00Z")
            .expect("time")
            .timestamp_millis(); // Friday 00:30 in Paris
        let at = |g| {
            let p = Periods::new(paris, g, day("2026-11-01"), day("2026-11-30"));
            p.label(p.period_of(ms).expect("in range")).day
        };
        assert_eq!(at(Granularity::Day), "2026-11-27");
        assert_eq!(at(Granularity::Week), "2026-11-23");
        assert_eq!(at(Granularity::Month), "2026-11-01");
        assert_eq!(at(Granularity::Summary), "2026-11-01");
        assert_eq!(Granularity::parse("week"), Some(Granularity::Week));
        assert_eq!(Granularity::parse("fortnight"), None);
    }

    #[test]
    fn a_day_with_a_change_of_offset_has_its_own_length() {
        // Paris left summer time on 2026-10-25: that local day lasted 25 hours.
        let paris = zone("Europe/Paris").expect("a zone");
        let p = Periods::new(
            paris,
            Granularity::Hour,
            day("2026-10-25"),
            day("2026-10-25"),
        );
        let (g, a, b) = p.plan();
        assert_eq!(b - a + 1, 100, "25 hours of quarters");
        let hours: std::collections::BTreeSet<_> =
            (a..=b).filter_map(|q| p.period_of_bucket(g, q)).collect();
        assert_eq!(hours.len(), 24, "02:00 happened twice and is one period");
    }

    proptest! {
        /// In UTC by day, every instant's period is its own UTC day.
        #[test]
        fn utc_periods_are_utc_days(ms in 1_600_000_000_000i64..1_900_000_000_000) {
            let d = day_of(ms);
            let p = Periods::utc_days(d - 3, d + 3);
            let l = p.label(p.period_of(ms).expect("in range"));
            prop_assert_eq!(l.start_ms, Grain::Day.start_ms(d));
            prop_assert_eq!(l.day, crate::model::format_day(d));
        }
    }

    /// The group of `bucket` under `g` (`None`: each bucket apart).
    fn group_of(g: Group, bucket: i32) -> Option<i64> {
        match g {
            Group::Each => None,
            Group::Whole => Some(0),
            Group::Every { width, shift } => {
                Some((i64::from(bucket) + i64::from(shift)).div_euclid(i64::from(width)))
            }
        }
    }

    #[test]
    fn a_fixed_offset_groups_quarters_and_a_change_of_offset_does_not() {
        let at = |tz: &str, g: Granularity, from: &str, to: &str| {
            Periods::new(zone(tz).expect("a zone"), g, day(from), day(to)).group()
        };
        let kolkata = |g| at("Asia/Kolkata", g, "2026-11-01", "2026-11-30");
        assert_eq!(
            kolkata(Granularity::Hour),
            Group::Every { width: 4, shift: 2 }
        );
        assert_eq!(
            kolkata(Granularity::Day),
            Group::Every {
                width: 96,
                shift: 22
            }
        );
        assert_eq!(kolkata(Granularity::Month), Group::Each);
        assert_eq!(kolkata(Granularity::Summary), Group::Whole);
        // Paris leaves summer time on 2026-10-25.
        let paris = |from, to| at("Europe/Paris", Granularity::Day, from, to);
        assert_eq!(
            paris("2026-11-01", "2026-11-30"),
            Group::Every {
                width: 96,
                shift: 4
            }
        );
        assert_eq!(paris("2026-10-01", "2026-10-31"), Group::Each);
        let utc = Periods::new(
            Tz::UTC,
            Granularity::Week,
            day("2026-11-01"),
            day("2026-11-30"),
        );
        assert_eq!(utc.group(), Group::Every { width: 7, shift: 3 });
    }

    /// Any report's periods of up to 40 days in 2024-2026: in UTC, zones of half-hour
    /// and 45-minute offsets, and zones that change offset (Lord Howe by half an hour).
    fn any_periods() -> impl Strategy<Value = Periods> {
        let zones = [
            "UTC",
            "Asia/Kolkata",
            "Europe/Paris",
            "America/St_Johns",
            "Australia/Lord_Howe",
            "Asia/Kathmandu",
        ];
        (
            0..zones.len(),
            0..Granularity::ALL.len(),
            20_000i32..20_800,
            0i32..40,
        )
            .prop_map(move |(z, g, from, len)| {
                let tz = zone(zones[z]).expect("a zone");
                Periods::new(tz, Granularity::ALL[g], from, from + len)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Buckets a group sums together are in one period.
        #[test]
        fn a_group_is_in_one_period(p in any_periods()) {
            let (grain, a, b) = p.plan();
            let group = p.group();
            let mut periods = std::collections::BTreeMap::new();
            for bucket in a..=b {
                let Some(id) = group_of(group, bucket) else { continue };
                let period = p.period_of_bucket(grain, bucket);
                prop_assert!(period.is_some(), "a planned bucket is in the range");
                let first = periods.entry(id).or_insert(period);
                prop_assert_eq!(*first, period, "{:?}: bucket {} of group {}", group, bucket, id);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// `most` is how many periods the range's instants fall in (at most, by hour:
        /// a zone's day may have 23 or 25 hours).
        #[test]
        fn most_counts_the_periods(p in any_periods()) {
            let (start, end) = p.span_ms();
            let mut seen = std::collections::BTreeSet::new();
            let mut ms = start;
            while ms < end {
                seen.insert(p.period_of(ms).expect("in range"));
                ms += 15 * 60_000;
            }
            if p.granularity == Granularity::Hour {
                prop_assert!(seen.len() <= p.most());
            } else {
                prop_assert_eq!(seen.len(), p.most());
            }
        }
    }
}
