//! The video funnel and control debounce of one view (spec Events, rules 1 and 2),
//! written once: the integration inspector ([`crate::inspect`]) words its rule 1 and 2
//! findings from it and the aggregator derives the funnel report's counts from it. Pure.
//!
//! A view's events are read in event-time order, ties broken by an identity the caller
//! chooses (the dedup key, or the arrival number); each is pushed into a [`ViewWalk`],
//! which judges it against the events before it and answers a [`Step`]:
//!
//! - a milestone ([`MILESTONES`], in funnel order) reached before is a
//!   [`Order::Repeat`] (a loop, a replay, a second videoComplete): it counts once and
//!   each repeat is one `repeated_milestones`. A first occurrence is, in this order of
//!   precedence: [`Order::AfterLater`] when a later milestone came before it;
//!   [`Order::CompleteWithoutPlay`] for a videoComplete with no videoPlay before it
//!   (complete on load); [`Order::Skipped`] when milestones from videoPlay up to it
//!   have not come yet (synthesised on seek); else [`Order::InOrder`]. A videoPlay
//!   needs no creativeView before it here;
//! - a control ([`CONTROLS`], in report order) is `merged` when it comes closer than
//!   the [`Debounce`] after the previous control of the same kind (chained: the
//!   previous one counts even when it merged itself), and merged controls are not
//!   counted (the report's debounced counts). It carries a [`Toggle`] when it comes
//!   closer than the debounce after the previous control of any kind (the inspector's
//!   rapid toggle, as pause then resume). A merged control always carries a toggle.
//!
//! [`ViewWalk::counts`] sums the view up as the report shows it ([`FunnelCounts`]):
//! the milestones reached, the debounced control counts, the repeats, and the funnel
//! gaps of the set: milestones reached whose predecessor never was (a videoPlay needs
//! a creativeView here), whatever the order they came in. The counts depend only on
//! the view's events (kind and time), not on their identities or the order of ties.

use crate::interaction::InteractionType;

/// The milestones, in funnel order (rule 1).
pub const MILESTONES: [InteractionType; 6] = [
    InteractionType::VideoCreativeView,
    InteractionType::VideoPlay,
    InteractionType::VideoFirstQuartile,
    InteractionType::VideoMidpoint,
    InteractionType::VideoThirdQuartile,
    InteractionType::VideoComplete,
];

/// The controls, in report order (rule 2).
pub const CONTROLS: [InteractionType; 5] = [
    InteractionType::VideoSkip,
    InteractionType::VideoPause,
    InteractionType::VideoResume,
    InteractionType::VideoMute,
    InteractionType::VideoUnmute,
];

/// The debounce when none is set (`RM_CONTROL_DEBOUNCE_MS`), in milliseconds.
pub const DEFAULT_DEBOUNCE_MS: i64 = 1_000;

/// Where `kind` stands in [`MILESTONES`].
pub fn milestone_index(kind: InteractionType) -> Option<usize> {
    kind.funnel_step().map(usize::from)
}

/// Where `kind` stands in [`CONTROLS`].
pub fn control_index(kind: InteractionType) -> Option<usize> {
    CONTROLS.iter().position(|c| *c == kind)
}

/// Rule 2's interval: two controls closer than this are a rapid toggle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Debounce {
    ms: i64,
}

impl Debounce {
    /// The interval when none is set.
    pub const DEFAULT: Debounce = Debounce::from_ms(DEFAULT_DEBOUNCE_MS);

    /// An interval of `ms` milliseconds; 0 or less debounces nothing.
    pub const fn from_ms(ms: i64) -> Debounce {
        Debounce {
            ms: if ms < 0 { 0 } else { ms },
        }
    }

    /// The interval in milliseconds (never negative).
    pub const fn ms(self) -> i64 {
        self.ms
    }

    /// True when an event at `later_ms` comes closer than the interval after one at
    /// `earlier_ms`.
    pub const fn is_rapid(self, earlier_ms: i64, later_ms: i64) -> bool {
        later_ms.saturating_sub(earlier_ms) < self.ms
    }
}

impl Default for Debounce {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A set of milestones, by their place in [`MILESTONES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MilestoneSet(u8);

impl MilestoneSet {
    /// True when milestone `index` is in the set.
    pub const fn contains(self, index: usize) -> bool {
        index < MILESTONES.len() && self.0 & (1 << index) != 0
    }

    /// The set with milestone `index` added.
    #[must_use]
    pub const fn with(self, index: usize) -> MilestoneSet {
        if index < MILESTONES.len() {
            MilestoneSet(self.0 | (1 << index))
        } else {
            self
        }
    }

    /// How many milestones the set holds.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// True when the set holds none.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The milestones in the set, in funnel order.
    pub fn iter(self) -> impl Iterator<Item = InteractionType> {
        MILESTONES
            .into_iter()
            .enumerate()
            .filter(move |(i, _)| self.contains(*i))
            .map(|(_, m)| m)
    }

    /// 1 for each milestone in the set, 0 for the others, in funnel order.
    pub fn flags(self) -> [u8; 6] {
        std::array::from_fn(|i| u8::from(self.contains(i)))
    }
}

/// How a milestone stands against the milestones of the view before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order<I> {
    /// Its first occurrence, after the milestones from videoPlay up to it.
    InOrder,
    /// Reached before, by `first`: a loop, a replay, a seek back (rule 1).
    Repeat {
        /// The milestone's first occurrence.
        first: I,
    },
    /// Its first occurrence, after `later`, a later milestone (the earliest in funnel
    /// order of those already reached).
    AfterLater {
        /// The later milestone that came first.
        later: I,
    },
    /// A videoComplete with no videoPlay before it: complete on load.
    CompleteWithoutPlay,
    /// Its first occurrence, without these earlier milestones (from videoPlay on)
    /// before it: synthesised on seek.
    Skipped {
        /// The milestones not reached yet.
        missing: MilestoneSet,
    },
}

/// A control closer than the debounce after the view's previous control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toggle<I> {
    /// The previous control (of any kind).
    pub previous: I,
    /// Milliseconds between the two.
    pub gap_ms: i64,
}

/// What one event of a view is, judged against the events before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<I> {
    /// A milestone (rule 1).
    Milestone {
        /// Its place in [`MILESTONES`].
        index: usize,
        /// How it stands against the milestones before it.
        order: Order<I>,
    },
    /// A control (rule 2).
    Control {
        /// Its place in [`CONTROLS`].
        index: usize,
        /// Closer than the debounce after the previous control of its kind: not counted.
        merged: bool,
        /// Set when closer than the debounce after the previous control of any kind.
        toggle: Option<Toggle<I>>,
    },
    /// Not a video event.
    Other,
}

/// What a view adds up to in the funnel report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FunnelCounts {
    /// The milestones reached.
    pub reached: MilestoneSet,
    /// Debounced counts of each control, in [`CONTROLS`] order.
    pub controls: [u32; 5],
    /// Milestones reached whose predecessor in funnel order never was.
    pub funnel_gaps: u32,
    /// Occurrences of milestones already reached.
    pub repeated_milestones: u32,
}

/// One view's rules 1 and 2, fed its events in event-time order.
#[derive(Debug, Clone)]
pub struct ViewWalk<I> {
    debounce: Debounce,
    first: [Option<I>; 6],
    repeated: u32,
    controls: [u32; 5],
    last_of_kind: [Option<i64>; 5],
    last_control: Option<(I, i64)>,
}

impl<I: Copy> ViewWalk<I> {
    /// A view with no event yet.
    pub fn new(debounce: Debounce) -> Self {
        Self {
            debounce,
            first: [None; 6],
            repeated: 0,
            controls: [0; 5],
            last_of_kind: [None; 5],
            last_control: None,
        }
    }

    /// Judges the next event, `id` of `kind` at `time_ms`: no earlier than any event
    /// pushed before it.
    pub fn push(&mut self, id: I, kind: InteractionType, time_ms: i64) -> Step<I> {
        if let Some(index) = milestone_index(kind) {
            let order = self.milestone(index, id);
            Step::Milestone { index, order }
        } else if let Some(index) = control_index(kind) {
            let merged =
                self.last_of_kind[index].is_some_and(|prev| self.debounce.is_rapid(prev, time_ms));
            if !merged {
                self.controls[index] += 1;
            }
            self.last_of_kind[index] = Some(time_ms);
            let toggle = self
                .last_control
                .filter(|(_, prev)| self.debounce.is_rapid(*prev, time_ms))
                .map(|(previous, prev)| Toggle {
                    previous,
                    gap_ms: time_ms.saturating_sub(prev),
                });
            self.last_control = Some((id, time_ms));
            Step::Control {
                index,
                merged,
                toggle,
            }
        } else {
            Step::Other
        }
    }

    fn milestone(&mut self, index: usize, id: I) -> Order<I> {
        if let Some(first) = self.first[index] {
            self.repeated += 1;
            return Order::Repeat { first };
        }
        let reached = self.reached();
        self.first[index] = Some(id);
        if let Some(later) = (index + 1..MILESTONES.len()).find_map(|l| self.first[l]) {
            return Order::AfterLater { later };
        }
        if index == MILESTONES.len() - 1 && !reached.contains(1) {
            return Order::CompleteWithoutPlay;
        }
        let missing = (1..index)
            .filter(|m| !reached.contains(*m))
            .fold(MilestoneSet::default(), MilestoneSet::with);
        if missing.is_empty() {
            Order::InOrder
        } else {
            Order::Skipped { missing }
        }
    }

    /// The milestones reached so far.
    pub fn reached(&self) -> MilestoneSet {
        (0..MILESTONES.len())
            .filter(|i| self.first[*i].is_some())
            .fold(MilestoneSet::default(), MilestoneSet::with)
    }

    /// The view so far, as the funnel report counts it.
    pub fn counts(&self) -> FunnelCounts {
        let reached = self.reached();
        let funnel_gaps = (1..MILESTONES.len())
            .filter(|s| reached.contains(*s) && !reached.contains(s - 1))
            .count() as u32;
        FunnelCounts {
            reached,
            controls: self.controls,
            funnel_gaps,
            repeated_milestones: self.repeated,
        }
    }
}

#[cfg(test)]
mod tests;
