//! The browser tracking snippet served at `/sdk/beacon.js`. Owned by the SDK work;
//! filled in there.
