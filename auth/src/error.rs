//! The crate's one error: why an authentication, a signing key or a client record
//! is refused. HTTP-free: the denials (401/403) are answered by [`crate::denial`], the
//! rest by whoever serves the request (the api maps them in its one error place).

use crate::limiter::Refused;

/// Everything that can go wrong in authentication.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No credentials were sent (401; the challenge carries no error code, RFC 6750 3.1).
    #[error("{0}")]
    NoCredentials(String),
    /// A bearer token that is malformed or does not verify, or whose client was
    /// removed (401 `invalid_token`).
    #[error("{0}")]
    InvalidToken(String),
    /// A valid token without the scope the operation needs (403 `insufficient_scope`).
    #[error("{0}")]
    InsufficientScope(String),
    /// The orders API key is missing or does not verify (401 with the orders realm's
    /// `Basic` challenge).
    #[error("{0}")]
    ApiKeyRejected(String),
    /// Too many failures from this source, or the budget of unknown credentials is
    /// spent (429).
    #[error("{}", .0.describe())]
    Limited(Refused),
    /// The queue of secret checks is full (503, retry in 1 s).
    #[error("too many API key checks in progress; retry in 1 s")]
    Busy,
    /// The keys that verify tokens cannot be had right now (503: the edge's JWK set
    /// could not be fetched).
    #[error("{0}")]
    KeysUnavailable(String),
    /// The store behind [`crate::AuthStore`] failed; the cause is kept.
    #[error("auth store: {0}")]
    Store(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A stored signing key is unusable.
    #[error("signing key {kid}: {message}")]
    SigningKey {
        /// Its `kid`.
        kid: String,
        /// What is wrong with it.
        message: String,
    },
    /// A token could not be signed.
    #[error("token signing: {0}")]
    Signing(String),
    /// A client id breaks the client rule ([`crate::client::check_client_id`]).
    #[error("{0}")]
    InvalidClientId(&'static str),
    /// A namespace id is not `[a-z0-9_-]{{1,64}}` ([`crate::client::check_namespace`]).
    #[error("must match [a-z0-9_-]{{1,64}}")]
    InvalidNamespace,
}

impl AuthError {
    /// An [`AuthError::Store`] keeping `e` as the cause.
    pub fn store(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Store(Box::new(e))
    }
}
