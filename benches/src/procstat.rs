//! CPU time of processes from `/proc` (Linux), so a run can say how much CPU the
//! server spent per request: on a small, shared machine that is a fairer measure of
//! cost than throughput alone.

use std::path::Path;

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, 100 on Linux).
const TICKS_PER_SEC: f64 = 100.0;

/// User plus system CPU seconds of `/proc/<pid>` itself (all its threads).
fn own_cpu_s(proc_dir: &Path) -> Option<f64> {
    let stat = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 of stat(5), so utime (14) and stime (15) are at 11, 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_SEC)
}

fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// CPU seconds used so far by `pid` and its descendants (for nginx: the master and
/// its workers). `None` when `pid` is gone.
pub fn tree_cpu_s(pid: u32) -> Option<f64> {
    let own = own_cpu_s(Path::new(&format!("/proc/{pid}")))?;
    let kids: f64 = children(pid).into_iter().filter_map(tree_cpu_s).sum();
    Some(own + kids)
}

/// CPU seconds used so far by this process.
pub fn self_cpu_s() -> Option<f64> {
    own_cpu_s(Path::new("/proc/self"))
}

/// `/proc/loadavg`, trimmed (empty when unreadable).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_cpu() {
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        let me = self_cpu_s().expect("own stat");
        assert!(me >= 0.0);
        let tree = tree_cpu_s(std::process::id()).expect("tree");
        assert!(tree >= me);
    }
}
