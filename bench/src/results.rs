//! Result files: each scenario appends one JSON object per run to
//! `<results>/<scenario>.json`, a JSON array. The records already there are
//! kept as written: the new one is added to the file's text, so that a run
//! changes only its own lines (a record parsed and written again can
//! change in its floats' last digits).

use std::path::Path;

use serde::de::IgnoredAny;
use serde_json::Value;

/// Appends `record` (plus the machine description) to `<dir>/<scenario>.json`.
/// A file that is not a JSON array is an error, not overwritten.
pub fn append(dir: &Path, scenario: &str, mut record: Value) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{scenario}.json"));
    if let Value::Object(m) = &mut record {
        m.insert("scenario".into(), scenario.into());
        m.insert("machine".into(), machine());
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        m.insert("unix_time".into(), secs.into());
    }
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let text = appended(existing.as_deref(), &record).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })?;
    std::fs::write(path, text)
}

/// The text of a results file holding the records of `existing` (the
/// file's text, if any) followed by `record`, formatted as
/// `serde_json::to_string_pretty` formats the whole array.
fn appended(existing: Option<&str>, record: &Value) -> Result<String, String> {
    let entry: String = serde_json::to_string_pretty(record)
        .map_err(|e| e.to_string())?
        .lines()
        .map(|line| format!("  {line}\n"))
        .collect();
    let records = match existing {
        Some(text) => serde_json::from_str::<Vec<IgnoredAny>>(text)
            .map_err(|e| format!("not a JSON array: {e}"))?
            .len(),
        None => 0,
    };
    // A JSON array's text ends in `]`: the new record goes before it.
    let head = match existing
        .filter(|_| records > 0)
        .and_then(|text| text.trim_end().strip_suffix(']'))
    {
        Some(head) => format!("{},", head.trim_end()),
        None => "[".to_owned(),
    };
    Ok(format!("{head}\n{entry}]\n"))
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

#[cfg(test)]
mod tests {
    use super::appended;
    use serde_json::{json, Value};

    #[test]
    fn a_record_is_added_without_rewriting_the_ones_before() {
        // 0.09035357723057419 is written back as 0.0903535772305742 once
        // parsed without float_roundtrip: the old record must stay as it is.
        let old = "[\n  {\n    \"x\": 0.09035357723057419\n  }\n]\n";
        let text = appended(Some(old), &json!({ "y": 1 })).expect("appended");
        assert_eq!(
            text,
            "[\n  {\n    \"x\": 0.09035357723057419\n  },\n  {\n    \"y\": 1\n  }\n]\n"
        );
        let all: Vec<Value> = serde_json::from_str(&text).expect("a JSON array");
        assert_eq!(all.len(), 2);
    }

    #[test]
    fn a_new_or_empty_file_gets_the_pretty_array() {
        let record = json!({ "a": [1, 2], "b": "c" });
        let expected = serde_json::to_string_pretty(&vec![record.clone()]).expect("json") + "\n";
        assert_eq!(appended(None, &record).expect("new"), expected);
        assert_eq!(appended(Some("[]\n"), &record).expect("empty"), expected);
    }

    #[test]
    fn a_file_that_is_not_an_array_is_refused() {
        assert!(appended(Some("{\"runs\": []}"), &json!({})).is_err());
        assert!(appended(Some("[{\"cut\": 1}, "), &json!({})).is_err());
    }
}
