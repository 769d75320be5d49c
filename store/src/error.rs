//! The store's one error type: whether a retry may help is all its callers decide on.

/// Errors of a store.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The store is unreachable or failed; the write may be retried.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store refused the request for good (bad schema, bad data).
    #[error("store refused the request: {0}")]
    Refused(String),
}

impl StoreError {
    /// True when a retry may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}
