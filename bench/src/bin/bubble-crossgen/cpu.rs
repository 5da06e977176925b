//! Server and generator CPU, measured in ways bubble-bench does not use.
//!
//! bubble-bench reads utime+stime clock ticks of `/proc/<pid>/stat`. Here:
//!
//! * **schedstat**: the first field of `/proc/<pid>/task/<tid>/schedstat`
//!   is the nanoseconds the thread spent on a CPU (the scheduler's own
//!   runtime, not tick sampling), summed over every thread of every server
//!   pid. Time of threads that exit during the interval is lost; the servers
//!   under test keep their threads.
//! * **whole core**: the `cpuN` line of `/proc/stat` for the server's core;
//!   busy = user+nice+system+irq+softirq+steal over all fields of the line
//!   (iowait and idle are the rest). This also catches kernel work done for
//!   the server outside its own accounting: softirq network processing and
//!   ksoftirqd on that core, but also anything else that runs there.
//! * **user share**: utime (field 14 of `/proc/<pid>/stat`, clock ticks)
//!   summed over the pids, to split user space from kernel time.
//! * **generator**: `getrusage(RUSAGE_SELF)`.

use std::collections::HashMap;
use std::fs;
use std::time::{Duration, Instant};

/// Nanoseconds on CPU: the first field of a `schedstat` file.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// utime in clock ticks: field 14 of a `/proc/<pid>/stat` line. The command
/// name (field 2) may hold spaces and parentheses, so fields are counted
/// from its last `)`.
pub fn parse_stat_utime(text: &str) -> Option<u64> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    // After the name: field 3 (state) is index 0, so field 14 is index 11.
    rest.split_whitespace().nth(11)?.parse().ok()
}

/// Jiffies of one `cpuN` line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CoreJiffies {
    /// user + nice + system + irq + softirq + steal.
    pub busy: u64,
    /// busy + idle + iowait.
    pub total: u64,
}

/// The `cpu<core>` line of `/proc/stat` text.
pub fn parse_core_line(stat: &str, core: usize) -> Option<CoreJiffies> {
    let label = format!("cpu{core}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(label.as_str()))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice];
    // guest time is already inside user and nice.
    let get = |i: usize| f.get(i).copied().unwrap_or(0);
    if f.len() < 4 {
        return None;
    }
    let busy = get(0) + get(1) + get(2) + get(5) + get(6) + get(7);
    Some(CoreJiffies {
        busy,
        total: busy + get(3) + get(4),
    })
}

/// Clock ticks per second of `/proc` times.
fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// CPU time of this process so far (user + system), from getrusage.
fn own_cpu() -> Duration {
    // SAFETY: getrusage only writes the zeroed struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Counters read at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    at: Instant,
    /// (pid, tid) → ns on CPU; `None` if no pid was given or one vanished.
    threads: Option<HashMap<(u32, u32), u64>>,
    /// Summed utime ticks of the pids.
    utime: Option<u64>,
    core: Option<CoreJiffies>,
    own: Duration,
}

fn threads_of(pid: u32, into: &mut HashMap<(u32, u32), u64>) -> Option<()> {
    for entry in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        // A thread may exit between the listing and the read: skip it.
        if let Some(ns) = fs::read_to_string(entry.path().join("schedstat"))
            .ok()
            .as_deref()
            .and_then(parse_schedstat)
        {
            into.insert((pid, tid), ns);
        }
    }
    Some(())
}

/// Reads every counter now.
pub fn snapshot(pids: &[u32], core: Option<usize>) -> Snapshot {
    let threads = (!pids.is_empty())
        .then(|| {
            let mut m = HashMap::new();
            pids.iter()
                .try_for_each(|&p| threads_of(p, &mut m))
                .map(|()| m)
        })
        .flatten();
    let utime = (!pids.is_empty())
        .then(|| {
            pids.iter()
                .map(|p| {
                    fs::read_to_string(format!("/proc/{p}/stat"))
                        .ok()
                        .as_deref()
                        .and_then(parse_stat_utime)
                })
                .sum::<Option<u64>>()
        })
        .flatten();
    let core = core.and_then(|c| {
        fs::read_to_string("/proc/stat")
            .ok()
            .as_deref()
            .and_then(|s| parse_core_line(s, c))
    });
    Snapshot {
        at: Instant::now(),
        threads,
        utime,
        core,
        own: own_cpu(),
    }
}

/// CPU used between two snapshots, in cores (1.0 = one core fully busy).
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// Wall time between the snapshots, seconds.
    pub secs: f64,
    /// Server threads' on-CPU time (schedstat).
    pub schedstat_cores: Option<f64>,
    /// Busy share of the server's core (`/proc/stat`).
    pub core_busy: Option<f64>,
    /// Server user-space time (utime).
    pub user_cores: Option<f64>,
    /// This generator (getrusage).
    pub gen_cores: f64,
}

/// The usage between `a` and the later `b`.
pub fn between(a: &Snapshot, b: &Snapshot) -> Usage {
    let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
    let schedstat_cores = match (&a.threads, &b.threads) {
        (Some(ta), Some(tb)) => {
            // A thread born during the interval counts whole.
            let ns: u64 = tb
                .iter()
                .map(|(k, &v)| v.saturating_sub(ta.get(k).copied().unwrap_or(0)))
                .sum();
            Some(ns as f64 / 1e9 / secs)
        }
        _ => None,
    };
    let user_cores = match (a.utime, b.utime) {
        (Some(x), Some(y)) => Some(y.saturating_sub(x) as f64 / clock_ticks() / secs),
        _ => None,
    };
    let core_busy = match (a.core, b.core) {
        (Some(x), Some(y)) if y.total > x.total => {
            Some(y.busy.saturating_sub(x.busy) as f64 / (y.total - x.total) as f64)
        }
        _ => None,
    };
    Usage {
        secs,
        schedstat_cores,
        core_busy,
        user_cores,
        gen_cores: b.own.saturating_sub(a.own).as_secs_f64() / secs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_first_field() {
        assert_eq!(
            parse_schedstat("184395690 3078632 376\n"),
            Some(184_395_690)
        );
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn stat_utime_survives_odd_names() {
        let line = "13875 (py (th) on) R 13870 13870 13250 0 -1 4194304 2845 6528 13 1 38 7 3 1 20 0 1 0 48370";
        assert_eq!(parse_stat_utime(line), Some(38));
        let nginx = "4242 (nginx) S 4241 4241 1 0 -1 4194624 500 0 0 0 1234 567 0 0 20 0 1 0";
        assert_eq!(parse_stat_utime(nginx), Some(1234));
        assert_eq!(parse_stat_utime("1 (x) S 0"), None);
    }

    #[test]
    fn core_line_busy_and_total() {
        let stat = "cpu  42163 0 8245 42438 627 0 3023 41 0 0\n\
                    cpu0 21362 1 3700 21644 66 5 1671 20 9 9\n\
                    cpu1 20801 0 4545 20793 561 0 1352 20 0 0\n\
                    intr 1 2 3\n";
        let c0 = parse_core_line(stat, 0).expect("cpu0");
        assert_eq!(c0.busy, 21362 + 1 + 3700 + 5 + 1671 + 20);
        assert_eq!(c0.total, c0.busy + 21644 + 66);
        let c1 = parse_core_line(stat, 1).expect("cpu1");
        assert_eq!(c1.busy, 20801 + 4545 + 1352 + 20);
        // `cpu1` must not match `cpu10`, nor the aggregate `cpu` line.
        assert_eq!(parse_core_line(stat, 2), None);
        assert_eq!(parse_core_line("cpu10 1 2 3 4\n", 1), None);
    }

    #[test]
    fn usage_from_snapshots() {
        let t0 = Instant::now();
        let a = Snapshot {
            at: t0,
            threads: Some(HashMap::from([((1, 1), 1_000), ((1, 2), 5_000)])),
            utime: Some(100),
            core: Some(CoreJiffies {
                busy: 10,
                total: 100,
            }),
            own: Duration::from_millis(10),
        };
        let b = Snapshot {
            at: t0 + Duration::from_secs(2),
            // Thread 2 exited, thread 3 was born.
            threads: Some(HashMap::from([
                ((1, 1), 1_000 + 1_000_000_000),
                ((1, 3), 200_000_000),
            ])),
            utime: Some(100 + clock_ticks() as u64),
            core: Some(CoreJiffies {
                busy: 60,
                total: 300,
            }),
            own: Duration::from_millis(510),
        };
        let u = between(&a, &b);
        assert!((u.secs - 2.0).abs() < 1e-9);
        assert!((u.schedstat_cores.expect("sched") - 0.6).abs() < 1e-9);
        assert!((u.user_cores.expect("user") - 0.5).abs() < 1e-9);
        assert!((u.core_busy.expect("core") - 0.25).abs() < 1e-9);
        assert!((u.gen_cores - 0.25).abs() < 1e-9);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        let s = snapshot(&[me], Some(0));
        assert!(s.threads.as_ref().is_some_and(|t| !t.is_empty()));
        assert!(s.utime.is_some());
        assert!(s.core.is_some());
        assert!(snapshot(&[], None).threads.is_none());
    }
}
