//! The process-wide registry of the services' readiness checks, which the operations
//! listener (`crate::ops_listener`) reports, and whether the process has that
//! listener. Each service registers its check when it builds its ops endpoints
//! (`crate::ops::Ops`); the registry is process-wide, like the Prometheus recorder,
//! and holds the checks weakly, so a service that has stopped no longer counts as
//! running. A leaf: it names no other module of the crate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Says whether the service can accept work, and if not, why.
pub type ReadinessCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

static ENABLED: AtomicBool = AtomicBool::new(false);
static PROCESS: Registry = Registry::new();

/// Declares that this process serves its ops endpoints on an operations listener:
/// services started afterwards no longer serve `/metrics` on their public ports.
/// Call it before starting the services.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether [`enable`] was called.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

type Check = dyn Fn() -> Result<(), String> + Send + Sync;

/// The readiness checks of the services of one process.
pub struct Registry {
    checks: Mutex<Vec<Weak<Check>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// An empty registry.
    pub const fn new() -> Self {
        Self {
            checks: Mutex::new(Vec::new()),
        }
    }

    /// The registry of this process.
    pub fn process() -> &'static Registry {
        &PROCESS
    }

    /// Adds a service's check; it counts while the check is alive elsewhere.
    pub fn register(&self, check: &ReadinessCheck) {
        let mut checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
        checks.retain(|c| c.strong_count() > 0);
        checks.push(Arc::downgrade(check));
    }

    /// Asks every live check: whether `expected` services run and all are ready, and
    /// the body of `/readyz` (the distinct reasons, one per line).
    pub fn report(&self, expected: usize) -> (bool, String) {
        let live: Vec<Arc<Check>> = {
            let mut checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
            checks.retain(|c| c.strong_count() > 0);
            checks.iter().filter_map(Weak::upgrade).collect()
        };
        // Checks run outside the lock: they read their backend's health flags.
        let mut reasons: Vec<String> = Vec::new();
        if live.len() < expected {
            reasons.push(format!("{} of {expected} services running", live.len()));
        }
        for why in live.iter().filter_map(|c| c().err()) {
            if !reasons.contains(&why) {
                reasons.push(why);
            }
        }
        if reasons.is_empty() {
            return (true, "ready\n".to_owned());
        }
        let mut body = "not ready\n".to_owned();
        for r in reasons {
            body.push_str("- ");
            body.push_str(&r.replace('\n', " "));
            body.push('\n');
        }
        (false, body)
    }
}
