//! The edge's error type: what can stop the edge itself (never a bad beacon, which is
//! a 400 response, nor a slow log, which is a 503).

/// Errors that end the edge.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The listening socket could not be bound or read.
    #[error("listener: {0}")]
    Listener(#[from] std::io::Error),
    /// The event log could not be opened or flushed.
    #[error(transparent)]
    Log(#[from] rm_eventlog::LogError),
    /// A setting is unusable.
    #[error("edge settings: {0}")]
    Config(String),
    /// Shutdown could not drain in time.
    #[error(transparent)]
    Serve(#[from] rm_service::ServeError),
}
