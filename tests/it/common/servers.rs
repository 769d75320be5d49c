//! Who may use the shared servers (the brokers, ClickHouse, PostgreSQL, chDB) while the
//! suites of the one test binary run in parallel: a test that reads a server's setting
//! ([`super::required_setting`]) holds them *shared*; a test that stops one
//! ([`super::exact::local`] with a `-stop`/`-restart` command, or [`exclusive`]) holds
//! them *exclusively*, so it never pulls a server from under another test and no other
//! test sees its outage.
//!
//! The hold lives in a thread-local of the test's thread and ends with it (libtest runs
//! each test on a thread of its own), so tests need no guard variable. A test that
//! upgrades from shared to exclusive first lets its own shared hold go, so two tests
//! upgrading at once cannot deadlock; a waiting writer keeps new readers out, so a
//! stream of readers cannot starve it.

use std::cell::RefCell;
use std::sync::{Condvar, Mutex};

/// Readers holding (`> 0`), a writer holding (`-1`) or free (`0`), and writers waiting.
struct Lock {
    state: Mutex<(i64, usize)>,
    changed: Condvar,
}

static LOCK: Lock = Lock {
    state: Mutex::new((0, 0)),
    changed: Condvar::new(),
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Hold {
    Shared,
    Exclusive,
}

/// The current thread's hold, released when the thread (the test) ends.
struct Held(Hold);

impl Drop for Held {
    fn drop(&mut self) {
        let mut s = LOCK.state.lock().unwrap_or_else(|e| e.into_inner());
        match self.0 {
            Hold::Shared => s.0 -= 1,
            Hold::Exclusive => s.0 = 0,
        }
        LOCK.changed.notify_all();
    }
}

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Holds the shared servers shared until this test ends (a no-op if it holds them).
pub fn shared() {
    if HELD.with(|h| h.borrow().is_some()) {
        return;
    }
    let mut s = LOCK.state.lock().unwrap_or_else(|e| e.into_inner());
    while s.0 < 0 || s.1 > 0 {
        s = LOCK.changed.wait(s).unwrap_or_else(|e| e.into_inner());
    }
    s.0 += 1;
    drop(s);
    HELD.with(|h| *h.borrow_mut() = Some(Held(Hold::Shared)));
}

/// Holds the shared servers exclusively until this test ends: waits for every other
/// test that uses them to finish (a no-op if this test holds them exclusively).
pub fn exclusive() {
    let mine = HELD.with(|h| h.borrow().as_ref().map(|held| held.0));
    match mine {
        Some(Hold::Exclusive) => return,
        // Let this test's own shared hold go first (dropping it updates the count).
        Some(Hold::Shared) => HELD.with(|h| drop(h.borrow_mut().take())),
        None => {}
    }
    let mut s = LOCK.state.lock().unwrap_or_else(|e| e.into_inner());
    s.1 += 1;
    while s.0 != 0 {
        s = LOCK.changed.wait(s).unwrap_or_else(|e| e.into_inner());
    }
    s.1 -= 1;
    s.0 = -1;
    drop(s);
    HELD.with(|h| *h.borrow_mut() = Some(Held(Hold::Exclusive)));
}
