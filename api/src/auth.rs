//! The api's side of authentication (the rules themselves are `rm_auth`'s; the token
//! endpoint is `crate::endpoints::tokens`): the source address the limits key on
//! ([`peer_ip`]), and the seam `rm_auth` reads the api's state through
//! ([`rm_auth::AuthStore`], implemented here by [`State`]). The router checks bearer
//! JWTs and the orders API key with `rm_auth::Auth` and turns the result into the
//! request's `Caller` (`crate::tenancy`); its errors become responses in
//! `crate::error`.

use std::net::{IpAddr, Ipv4Addr};

use rm_auth::{ApiKey, AuthStore, StoredSigningKey};

use crate::state::{State, StateError};

/// The source address of a request: the connection's peer as the accept loop
/// recorded it ([`rm_service::serve::PeerAddr`]); requests that did not come through
/// it share the unspecified address.
pub fn peer_ip(extensions: &http::Extensions) -> IpAddr {
    extensions
        .get::<rm_service::serve::PeerAddr>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.0.ip())
}

impl AuthStore for State {
    type Error = StateError;

    async fn api_key(&self, lookup: &str) -> Result<Option<ApiKey>, StateError> {
        State::api_key(self, lookup).await
    }
    async fn signing_keys(&self) -> Result<Vec<StoredSigningKey>, StateError> {
        State::signing_keys(self).await
    }
    async fn replace_signing_key(&self, key: &StoredSigningKey) -> Result<(), StateError> {
        State::replace_signing_key(self, key).await
    }
    async fn add_signing_key(&self, key: &StoredSigningKey) -> Result<bool, StateError> {
        State::add_signing_key(self, key).await
    }
    async fn revocations(&self) -> Result<Vec<(String, i64)>, StateError> {
        State::revocations(self).await
    }
}
