// TC strings made and read by the IAB's own library (@iabtechlabtcf/core), for
// tests/it/consent_tcf.rs: prints JSON with
// - "made": strings encoded from consent choices, each with what a vendor policy must
//   decide for it;
// - "examples": the IAB specification's published example strings, as the library
//   decodes them.
// Usage: node tcf_strings.mjs <vendorId>
import { GVL, TCModel, TCString, PurposeRestriction, RestrictionType } from '@iabtechlabtcf/core';

const vendor = Number(process.argv[2] ?? 1234);
const other = 99;

const purposes = {};
for (let id = 1; id <= 11; id++) {
  purposes[id] = { id, name: `Purpose ${id}`, description: '', illustrations: [] };
}
const vendorEntry = (id, extra) => ({
  id,
  name: `Vendor ${id}`,
  purposes: [1, 7],
  legIntPurposes: [8],
  flexiblePurposes: [7, 8],
  specialPurposes: [],
  features: [],
  specialFeatures: [],
  policyUrl: 'https://example.com/privacy',
  usesCookies: true,
  cookieMaxAgeSeconds: 86400,
  cookieRefresh: false,
  usesNonCookieAccess: false,
  ...extra,
});
const vendors = { [vendor]: vendorEntry(vendor), [other]: vendorEntry(other) };
// Many vendors: the encoder then picks range encoding for short strings.
for (let id = 100; id <= 2100; id++) {
  if (id !== vendor) vendors[id] = vendorEntry(id);
}
const gvl = new GVL({
  gvlSpecificationVersion: 3,
  vendorListVersion: 140,
  tcfPolicyVersion: 4,
  lastUpdated: '2026-11-01T00:00:00Z',
  purposes,
  specialPurposes: {},
  features: {},
  specialFeatures: {},
  stacks: {},
  dataCategories: {},
  vendors,
});

function make({ purposeConsents = [], purposeLI = [], vendorConsents = [], vendorLI = [], restrictions = [], serviceSpecific = false }) {
  const m = new TCModel(gvl);
  m.cmpId = 10;
  m.cmpVersion = 2;
  m.isServiceSpecific = serviceSpecific;
  m.purposeConsents.set(purposeConsents);
  m.purposeLegitimateInterests.set(purposeLI);
  m.vendorConsents.set(vendorConsents);
  m.vendorLegitimateInterests.set(vendorLI);
  for (const [purpose, type] of restrictions) {
    m.publisherRestrictions.add(vendor, new PurposeRestriction(purpose, type));
  }
  return TCString.encode(m);
}

const many = [];
for (let id = 100; id <= 2100; id++) if (id !== vendor) many.push(id);

// [name, policy, choices, decision]
const cases = [
  ['consented', '1:consent,7:consent', { purposeConsents: [1, 7], vendorConsents: [vendor, other] }, 'allowed'],
  ['another vendor only', '1:consent,7:consent', { purposeConsents: [1, 7], vendorConsents: [other] }, 'no_consent'],
  ['no measurement purpose', '1:consent,7:consent', { purposeConsents: [1], vendorConsents: [vendor] }, 'no_consent'],
  ['no storage purpose', '1:consent,7:consent', { purposeConsents: [7], vendorConsents: [vendor] }, 'no_consent'],
  ['nothing at all', '1:consent,7:consent', {}, 'no_consent'],
  ['measurement on legitimate interest', '1:consent,8:li', { purposeConsents: [1], purposeLI: [8], vendorConsents: [vendor], vendorLI: [vendor] }, 'allowed'],
  ['legitimate interest objected to', '1:consent,8:li', { purposeConsents: [1], purposeLI: [8], vendorConsents: [vendor], vendorLI: [] }, 'no_legitimate_interest'],
  ['many vendors, ours among them', '1:consent,7:consent', { purposeConsents: [1, 7], vendorConsents: [...many, vendor] }, 'allowed'],
  ['many vendors, ours not', '1:consent,7:consent', { purposeConsents: [1, 7], vendorConsents: many }, 'no_consent'],
  ['publisher does not allow measurement', '1:consent,7:consent', { purposeConsents: [1, 7], vendorConsents: [vendor], restrictions: [[7, RestrictionType.NOT_ALLOWED]], serviceSpecific: true }, 'restricted'],
];

const made = cases.map(([name, policy, choices, decision]) => ({ name, policy, tc: make(choices), decision }));

// The published examples of "Consent string and vendor list formats v2".
const published = [
  'COw4XqLOw4XqLAAAAAENAXCf-v-gAAAfwIAAACngAI8AEFABgACAA4A.IAPPwAPrwA.QAPPwAPrwA.cAEAPAAAC7gAHw4AAA',
  'COw4XqLOw4XqLAAAAAENAXCAAP-gAAAfwIAAACngAI8AAA.cAEAPAAAC7gAHw4AAA',
];
// The examples carry CMP id 0, which the library's model refuses to hold; this model
// holds it, and the library decodes every field.
class SpecExample extends TCModel {
  set cmpId(v) { this.cmpId_ = Number(v); }
  get cmpId() { return this.cmpId_; }
}
const ids = (v) => { const out = []; v.forEach((set, id) => { if (set) out.push(id); }); return out; };
const examples = published.map((tc) => {
  const m = TCString.decode(tc, new SpecExample());
  return {
    tc,
    cmpId: m.cmpId,
    vendorListVersion: m.vendorListVersion,
    policyVersion: m.policyVersion,
    created: m.created.getTime(),
    purposeConsents: ids(m.purposeConsents),
    purposeLegitimateInterests: ids(m.purposeLegitimateInterests),
    vendorConsents: ids(m.vendorConsents),
    vendorLegitimateInterests: ids(m.vendorLegitimateInterests),
  };
});

process.stdout.write(JSON.stringify({ vendor, made, examples }));
