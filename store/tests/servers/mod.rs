//! The ClickHouse servers the store's tests read (started by `deploy/local/up.sh`).

/// The URL in `var`, or `None` (the test skips, saying so) when it is unset, unless
/// `RM_REQUIRE_SERVICES=1`, which makes a missing server a failure.
pub fn server_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var("RM_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "{var} is not set but RM_REQUIRE_SERVICES=1 (deploy/local/up.sh starts the servers)"
            );
            eprintln!("SKIPPED: {var} is not set");
            None
        }
    }
}
