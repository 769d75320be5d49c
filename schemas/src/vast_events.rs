//! The VAST tracking events we report and the interaction type each maps to (spec,
//! Events, rules 5 and 6). Owned by the VAST work; filled in there.
