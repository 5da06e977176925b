//! Result files: each scenario appends one JSON object per run to
//! `<results>/<scenario>.json`, a JSON array.

use std::path::Path;

use serde_json::Value;

/// Appends `record` (plus the machine description) to `<dir>/<scenario>.json`.
pub fn append(dir: &Path, scenario: &str, mut record: Value) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{scenario}.json"));
    let mut all: Vec<Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    if let Value::Object(m) = &mut record {
        m.insert("scenario".into(), scenario.into());
        m.insert("machine".into(), machine());
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        m.insert("unix_time".into(), secs.into());
    }
    all.push(record);
    let text = serde_json::to_string_pretty(&all).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}

/// CPU model, core count and kernel of this machine.
pub fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    serde_json::json!({
        "cpu": model,
        "cpus": online_cpus(),
        "kernel": kernel.trim(),
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
    })
}

/// The machine's online CPUs (not the ones this thread may use: the
/// generator pins itself).
fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}
