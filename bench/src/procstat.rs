//! CPU time and memory of processes, read from `/proc`.

use std::fs;

/// Clock ticks per second of `/proc/<pid>/stat` times.
pub fn ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// User and system CPU seconds used so far by `pid` (all its threads).
pub fn user_system_seconds(pid: u32) -> Option<(f64, f64)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat(5), counted from after the command name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let tick = ticks_per_sec() as f64;
    Some((utime as f64 / tick, stime as f64 / tick))
}

/// Field `field` of `/proc/<pid>/task/*/schedstat`, summed over the
/// threads of `pid` (0: ns on CPU, 1: ns runnable but waiting).
fn schedstat_sum(pid: u32, field: usize) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().nth(field)?.parse::<u64>().ok())
        .sum()
}

/// Nanoseconds `pid`'s threads have run so far (exact, not sampled).
pub fn run_ns(pid: u32) -> u64 {
    schedstat_sum(pid, 0)
}

/// The process id of `ksoftirqd/<core>`, the kernel thread that finishes
/// the network work interrupts on that core could not.
pub fn ksoftirqd(core: usize) -> Option<u32> {
    let want = format!("ksoftirqd/{core}");
    fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let comm = fs::read_to_string(e.path().join("comm")).ok()?;
        (comm.trim() == want).then_some(pid)
    })
}

/// A `VmRSS`-style field of `/proc/<pid>/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Resident memory of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// Peak resident memory of `pid` in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmHWM:")
}

/// Direct children of `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        if let Ok(list) = fs::read_to_string(t.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Nanoseconds the threads of `pid` have spent runnable but waiting for a
/// CPU.
pub fn runqueue_wait_ns(pid: u32) -> u64 {
    schedstat_sum(pid, 1)
}

/// One reading of the machine's CPU times (`/proc/stat`), in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTimes {
    /// The machine's CPUs.
    pub cpus: usize,
    /// Time all CPUs together spent idle, waiting for I/O or stolen by the
    /// hypervisor. Idle time is exact on a tickless kernel; busy time
    /// sampled at ticks is not (it misses short bursts), so busy time is
    /// what the rest of the wall time is.
    pub idle: f64,
    /// Time the hypervisor ran something else while a CPU of this guest
    /// wanted to run (steal), all CPUs together.
    pub steal: f64,
    /// The steal of the one CPU asked for, when there is such a CPU.
    pub core_steal: Option<f64>,
}

impl CpuTimes {
    /// Reads `/proc/stat` once; `core` names the CPU whose steal is read
    /// apart.
    pub fn read(core: Option<usize>) -> Option<CpuTimes> {
        let stat = fs::read_to_string("/proc/stat").ok()?;
        CpuTimes::parse(&stat, core, ticks_per_sec() as f64)
    }

    /// The times in `/proc/stat`'s text, whose ticks last `1 / tick` s.
    fn parse(stat: &str, core: Option<usize>, tick: f64) -> Option<CpuTimes> {
        let core_name = core.map(|c| format!("cpu{c}"));
        let mut lines = cpu_lines(stat);
        let (_, machine) = lines.next().filter(|(name, _)| *name == "cpu")?;
        let idle: u64 = IDLE
            .iter()
            .map(|&i| machine.get(i).copied())
            .sum::<Option<u64>>()?;
        let steal = *machine.get(STEAL)?;
        let mut cpus = 0;
        let mut core_steal = None;
        for (name, fields) in lines {
            cpus += 1;
            if core_name.as_deref() == Some(name) {
                core_steal = fields.get(STEAL).map(|&t| t as f64 / tick);
            }
        }
        Some(CpuTimes {
            cpus,
            idle: idle as f64 / tick,
            steal: steal as f64 / tick,
            core_steal,
        })
    }
}

/// The `cpu` lines of `/proc/stat` (`cpu` for the whole machine, then
/// `cpuN`), each with its fields in clock ticks.
fn cpu_lines(stat: &str) -> impl Iterator<Item = (&str, Vec<u64>)> {
    stat.lines()
        .take_while(|l| l.starts_with("cpu"))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?;
            let fields = words.map(|f| f.parse().ok()).collect::<Option<_>>()?;
            Some((name, fields))
        })
}

/// Fields 4, 5 and 8 of a `cpu` line: idle, waiting for I/O, and steal.
const IDLE: [usize; 3] = [3, 4, STEAL];

/// Field 8 of a `cpu` line: steal.
const STEAL: usize = 7;

/// CPU used by a set of processes over an interval, and the time their
/// threads spent waiting for a CPU.
#[derive(Debug, Clone)]
pub struct CpuMeter {
    pids: Vec<u32>,
    start_run_ns: u64,
    start_user: f64,
    start_wait: u64,
    start_ns: u64,
    /// `ksoftirqd` of the server's core and its run time at the start.
    softirq: Option<(u32, u64)>,
}

fn user_seconds(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|&p| user_system_seconds(p))
        .map(|(u, _)| u)
        .sum()
}

impl CpuMeter {
    /// Starts measuring `pids`, and the whole of `core` if given.
    pub fn start(pids: Vec<u32>, core: Option<usize>) -> Self {
        let start_run_ns = pids.iter().map(|&p| run_ns(p)).sum();
        let start_user = user_seconds(&pids);
        let start_wait = pids.iter().map(|&p| runqueue_wait_ns(p)).sum();
        CpuMeter {
            start_user,
            softirq: core.and_then(ksoftirqd).map(|pid| (pid, run_ns(pid))),
            pids,
            start_run_ns,
            start_wait,
            start_ns: crate::clock::now_ns(),
        }
    }

    /// User-space CPU since `start`, in cores.
    pub fn user_cores(&self) -> f64 {
        let wall = (crate::clock::now_ns() - self.start_ns) as f64 / 1e9;
        if wall <= 0.0 {
            0.0
        } else {
            (user_seconds(&self.pids) - self.start_user) / wall
        }
    }

    /// What `ksoftirqd` of the core given at `start` ran since, in cores:
    /// network work done for the server outside its own time.
    pub fn softirq_cores(&self) -> f64 {
        let Some((pid, start)) = self.softirq else {
            return 0.0;
        };
        let wall = (crate::clock::now_ns() - self.start_ns) as f64;
        if wall <= 0.0 {
            0.0
        } else {
            run_ns(pid).saturating_sub(start) as f64 / wall
        }
    }

    /// Run-queue waiting since `start`, in cores (1.0 = one thread always
    /// runnable and never running).
    pub fn waiting(&self) -> f64 {
        let wait: u64 = self.pids.iter().map(|&p| runqueue_wait_ns(p)).sum();
        let wall = crate::clock::now_ns() - self.start_ns;
        if wall == 0 {
            0.0
        } else {
            wait.saturating_sub(self.start_wait) as f64 / wall as f64
        }
    }

    /// Cores used on average since `start` (1.0 = one core busy): the
    /// exact run time of the processes' threads (`schedstat`), not the
    /// kernel's tick sampling of `/proc/<pid>/stat`, which in a VM is coarse
    /// and biased by how a server's work lines up with the ticks.
    pub fn cores(&self) -> f64 {
        let run: u64 = self.pids.iter().map(|&p| run_ns(p)).sum();
        let wall = crate::clock::now_ns() - self.start_ns;
        if wall == 0 {
            0.0
        } else {
            run.saturating_sub(self.start_run_ns) as f64 / wall as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let me = std::process::id();
        assert!(user_system_seconds(me).is_some());
        assert!(run_ns(me) > 0);
        assert!(ksoftirqd(0).is_some(), "every core has a ksoftirqd");
        assert!(rss_kib(me).unwrap() > 0);
        assert!(peak_rss_kib(me).unwrap() >= rss_kib(me).unwrap() / 2);
        let times = CpuTimes::read(Some(0)).unwrap();
        assert!(times.cpus >= 1 && times.idle > 0.0);
        assert!(times.steal >= 0.0 && times.core_steal.is_some());
    }

    #[test]
    fn reads_idle_and_steal_of_the_machine_and_of_one_cpu() {
        let stat = "cpu  100 0 50 900 7 0 40 30 0 0\n\
                    cpu0 60 0 30 400 3 0 20 25 0 0\n\
                    cpu1 40 0 20 500 4 0 20 5 0 0\n\
                    intr 12345\n";
        let times = |core| CpuTimes::parse(stat, core, 10.0);
        assert_eq!(
            times(Some(1)),
            Some(CpuTimes {
                cpus: 2,
                idle: 93.7,
                steal: 3.0,
                core_steal: Some(0.5)
            })
        );
        assert_eq!(times(Some(0)).unwrap().core_steal, Some(2.5));
        assert_eq!(times(Some(7)).unwrap().core_steal, None);
        assert_eq!(times(None).unwrap().core_steal, None);
        assert_eq!(CpuTimes::parse("intr 1\n", None, 10.0), None);
    }
}
