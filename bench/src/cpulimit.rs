//! A CPU quota for the server under test, as a cgroup (v1 `cpu` controller
//! or v2 `cpu.max`): with the server held below what the generator can
//! read, a saturation search finds the server's limit, not the generator's,
//! and every server gets the same share of a core.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Scheduling period of the quota, µs: short, so that a server at its
/// quota is held back for a few milliseconds at a time, not for most of the
/// kernel's default 100 ms period (which alone would break the 50 ms p99
/// bound of a sustainable step).
const PERIOD_US: u64 = 10_000;

/// A cgroup holding the server's processes; removed when dropped (after
/// they exited).
#[derive(Debug)]
pub struct CpuLimit {
    dir: PathBuf,
}

impl CpuLimit {
    /// Puts `pids` in a new cgroup allowed `cores` of CPU time.
    pub fn apply(pids: &[u32], cores: f64) -> io::Result<CpuLimit> {
        let quota = (cores * PERIOD_US as f64).round() as u64;
        let name = format!(
            "bubble-bench-{}-{}",
            std::process::id(),
            pids.first().copied().unwrap_or(0)
        );
        let v1 = PathBuf::from("/sys/fs/cgroup/cpu");
        let dir = if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(name);
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("cpu.cfs_period_us"), PERIOD_US.to_string())?;
            std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string())?;
            dir
        } else {
            let dir = PathBuf::from("/sys/fs/cgroup").join(name);
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("cpu.max"), format!("{quota} {PERIOD_US}"))?;
            dir
        };
        let limit = CpuLimit { dir };
        for pid in pids {
            std::fs::write(limit.dir.join("cgroup.procs"), pid.to_string())?;
        }
        Ok(limit)
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
