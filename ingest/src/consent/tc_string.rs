//! Decoding an IAB TCF v2 TC string (the `iabConsentString` of a beacon): the core
//! segment, as "Consent string and vendor list formats v2" (IAB Tech Lab, TCF v2.2)
//! lays it out, read bit by bit from its base64url text. The other segments
//! (disclosed vendors, publisher purposes) decide nothing a vendor's processing needs
//! and are not read. Every field is bounded by the string's own length: a string cut
//! short, of another version, or with a vendor range out of order is an error
//! ([`TcError`]), never a panic.

use base64::alphabet::URL_SAFE;
use base64::engine::general_purpose::GeneralPurpose;
use base64::engine::{DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;

/// Base64url as CMPs write it: padding or not, the last symbol's spare bits whatever
/// they are.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Longest core segment decoded, in characters (a bit field of every vendor id is
/// about 11,000).
pub const MAX_CORE_CHARS: usize = 16 * 1024;

/// Why a TC string does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcError {
    /// Empty, not base64url, or longer than [`MAX_CORE_CHARS`].
    Encoding,
    /// Not version 2 (a TCF v1 string, or garbage).
    Version,
    /// A field runs past the end of the segment.
    Truncated,
    /// A vendor range ends before it starts, or names vendor 0.
    Range,
}

impl TcError {
    /// The metric label of the error.
    pub const fn reason(self) -> &'static str {
        match self {
            Self::Encoding => "encoding",
            Self::Version => "version",
            Self::Truncated => "truncated",
            Self::Range => "range",
        }
    }
}

/// Vendor ids, as sorted disjoint inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vendors(Vec<(u16, u16)>);

impl Vendors {
    /// Whether `id` is in the set.
    pub fn contains(&self, id: u16) -> bool {
        let i = self.0.partition_point(|&(_, end)| end < id);
        self.0.get(i).is_some_and(|&(start, _)| start <= id)
    }

    /// Every id in the set, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.0.iter().flat_map(|&(s, e)| s..=e)
    }

    fn from_ranges(mut ranges: Vec<(u16, u16)>) -> Self {
        ranges.sort_unstable();
        let mut out: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
        for (s, e) in ranges {
            match out.last_mut() {
                Some(last) if s <= last.1.saturating_add(1) => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        Self(out)
    }
}

/// A publisher restriction's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restriction {
    /// Purpose flatly not allowed (0).
    NotAllowed,
    /// Require consent (1).
    RequireConsent,
    /// Require legitimate interest (2).
    RequireLegitimateInterest,
    /// Undefined (3): ignored, as the specification says.
    Undefined,
}

/// The fields of a TC string's core segment that decide a vendor's processing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcString {
    /// Encoding version (2).
    pub version: u8,
    /// Created, in deciseconds since the epoch.
    pub created_ds: u64,
    /// The CMP's id.
    pub cmp_id: u16,
    /// The Global Vendor List version.
    pub vendor_list_version: u16,
    /// The TCF policy version (4 for TCF v2.2).
    pub policy_version: u8,
    /// Purposes 1 to 24 with consent (bit `p - 1`).
    pub purposes_consent: u32,
    /// Purposes 1 to 24 whose legitimate interest was disclosed and not objected to.
    pub purposes_li: u32,
    /// Purpose 1 was not disclosed (the publisher's country does not require it).
    pub purpose_one_treatment: bool,
    /// Vendors with consent.
    pub vendor_consents: Vendors,
    /// Vendors whose legitimate interest was disclosed and not objected to.
    pub vendor_li: Vendors,
    /// Publisher restrictions: purpose, type, vendors.
    pub restrictions: Vec<(u8, Restriction, Vendors)>,
}

impl TcString {
    /// Whether purpose `p` (1 to 24) has consent.
    pub fn purpose_consent(&self, p: u8) -> bool {
        (1..=24).contains(&p) && self.purposes_consent & (1 << (p - 1)) != 0
    }

    /// Whether purpose `p` (1 to 24) has legitimate interest established.
    pub fn purpose_li(&self, p: u8) -> bool {
        (1..=24).contains(&p) && self.purposes_li & (1 << (p - 1)) != 0
    }

    /// The publisher's restriction of purpose `p` for `vendor`, if any.
    pub fn restriction(&self, p: u8, vendor: u16) -> Option<Restriction> {
        self.restrictions
            .iter()
            .find(|(purpose, kind, vendors)| {
                *purpose == p && *kind != Restriction::Undefined && vendors.contains(vendor)
            })
            .map(|(_, kind, _)| *kind)
    }
}

/// Reads big-endian bit fields.
struct Bits<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Bits<'_> {
    fn read(&mut self, n: usize) -> Result<u64, TcError> {
        debug_assert!(n <= 64);
        if self.at + n > self.bytes.len() * 8 {
            return Err(TcError::Truncated);
        }
        let mut v = 0u64;
        for i in self.at..self.at + n {
            let bit = (self.bytes[i / 8] >> (7 - i % 8)) & 1;
            v = (v << 1) | u64::from(bit);
        }
        self.at += n;
        Ok(v)
    }

    fn u16(&mut self, n: usize) -> Result<u16, TcError> {
        // `n` is at most 16 at every call: the value fits.
        Ok(u16::try_from(self.read(n)?).unwrap_or(u16::MAX))
    }

    fn flag(&mut self) -> Result<bool, TcError> {
        Ok(self.read(1)? == 1)
    }

    /// A vendor section: `MaxVendorId`, then a bit field or ranges.
    fn vendors(&mut self) -> Result<Vendors, TcError> {
        let max = self.u16(16)?;
        if self.flag()? {
            return self.ranges();
        }
        let mut ranges = Vec::new();
        for id in 1..=max {
            if self.flag()? {
                ranges.push((id, id));
            }
        }
        Ok(Vendors::from_ranges(ranges))
    }

    /// `NumEntries`, then each a single id or a range.
    fn ranges(&mut self) -> Result<Vendors, TcError> {
        let n = self.u16(12)?;
        let mut ranges = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            let is_range = self.flag()?;
            let start = self.u16(16)?;
            let end = if is_range { self.u16(16)? } else { start };
            if start == 0 || end < start {
                return Err(TcError::Range);
            }
            ranges.push((start, end));
        }
        Ok(Vendors::from_ranges(ranges))
    }
}

/// Decodes the core segment of `s` (the text before its first `.`).
pub fn decode(s: &str) -> Result<TcString, TcError> {
    let core = s.split('.').next().unwrap_or_default().trim();
    if core.is_empty() || core.len() > MAX_CORE_CHARS {
        return Err(TcError::Encoding);
    }
    let bytes = LENIENT.decode(core).map_err(|_| TcError::Encoding)?;
    let mut b = Bits {
        bytes: &bytes,
        at: 0,
    };
    let version = u8::try_from(b.read(6)?).unwrap_or(u8::MAX);
    if version != 2 {
        return Err(TcError::Version);
    }
    let created_ds = b.read(36)?;
    let _last_updated = b.read(36)?;
    let cmp_id = b.u16(12)?;
    let _cmp_version = b.read(12)?;
    let _consent_screen = b.read(6)?;
    let _consent_language = b.read(12)?;
    let vendor_list_version = b.u16(12)?;
    let policy_version = u8::try_from(b.read(6)?).unwrap_or(u8::MAX);
    let _is_service_specific = b.flag()?;
    let _use_non_standard_texts = b.flag()?;
    let _special_features = b.read(12)?;
    let purposes_consent = reversed_24(b.read(24)?);
    let purposes_li = reversed_24(b.read(24)?);
    let purpose_one_treatment = b.flag()?;
    let _publisher_cc = b.read(12)?;
    let vendor_consents = b.vendors()?;
    let vendor_li = b.vendors()?;
    let mut restrictions = Vec::new();
    // Strings written before publisher restrictions existed may end here.
    if b.at + 12 <= bytes.len() * 8 {
        let n = b.u16(12)?;
        for _ in 0..n {
            let purpose = u8::try_from(b.read(6)?).unwrap_or(u8::MAX);
            let kind = match b.read(2)? {
                0 => Restriction::NotAllowed,
                1 => Restriction::RequireConsent,
                2 => Restriction::RequireLegitimateInterest,
                _ => Restriction::Undefined,
            };
            restrictions.push((purpose, kind, b.ranges()?));
        }
    }
    Ok(TcString {
        version,
        created_ds,
        cmp_id,
        vendor_list_version,
        policy_version,
        purposes_consent,
        purposes_li,
        purpose_one_treatment,
        vendor_consents,
        vendor_li,
        restrictions,
    })
}

/// A 24-bit field whose first bit is purpose 1, as a mask whose bit `p - 1` is
/// purpose `p`.
fn reversed_24(v: u64) -> u32 {
    let v = u32::try_from(v & 0xFF_FFFF).unwrap_or(0);
    v.reverse_bits() >> 8
}
