//! The page's wasm package, www/pkg, is committed (the `bubble` binary
//! embeds it) and must match the sources: `www/pkg/INPUTS.sha256` records
//! the sha256 of every input `scripts/build-page-pkg.sh` built it from, and
//! of the package files it wrote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

const REBUILD: &str = "run scripts/build-page-pkg.sh and commit www/pkg";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_owned()
}

/// `sha256  path` lines as a map from path to hash (comments skipped).
fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (hash, path) = line
                .split_once("  ")
                .unwrap_or_else(|| panic!("not a `sha256  path` line: {line:?}"));
            (path.to_owned(), hash.to_owned())
        })
        .collect()
}

/// What differs between two `path -> hash` maps, one line per path.
fn differences(recorded: &BTreeMap<String, String>, now: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (path, hash) in now {
        match recorded.get(path) {
            None => out.push(format!("  new:     {path}")),
            Some(old) if old != hash => out.push(format!("  changed: {path}")),
            Some(_) => {}
        }
    }
    for path in recorded.keys().filter(|p| !now.contains_key(*p)) {
        out.push(format!("  removed: {path}"));
    }
    out
}

fn recorded() -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let path = repo().join("www/pkg/INPUTS.sha256");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {}: {e}; {REBUILD}", path.display()));
    parse(&text)
        .into_iter()
        .partition(|(path, _)| !path.starts_with("www/pkg/"))
}

#[test]
fn committed_package_matches_the_sources() {
    let output = Command::new("bash")
        .arg(repo().join("scripts/build-page-pkg.sh"))
        .arg("--inputs")
        .output()
        .expect("run scripts/build-page-pkg.sh --inputs");
    assert!(
        output.status.success(),
        "scripts/build-page-pkg.sh --inputs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let now = parse(&String::from_utf8_lossy(&output.stdout));
    assert!(
        now.contains_key("Cargo.lock") && now.keys().any(|p| p.starts_with("core/src/")),
        "the input list looks wrong: {now:?}"
    );
    let (inputs, _) = recorded();
    let changed = differences(&inputs, &now);
    assert!(
        changed.is_empty(),
        "the committed wasm package is stale: run scripts/build-page-pkg.sh and commit \
         www/pkg (the bubble binary embeds it). Sources changed since it was built:\n{}",
        changed.join("\n")
    );
}

/// Every file under `dir`, as paths relative to `root` with `/` separators.
fn files_under(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files_under(root, &path, out);
        } else {
            let rel = path.strip_prefix(root).expect("under the repository");
            let parts: Vec<_> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect();
            out.push(parts.join("/"));
        }
    }
}

#[test]
fn committed_package_is_what_the_build_wrote() {
    let (_, outputs) = recorded();
    for file in ["bubble_wasm.js", "bubble_wasm_bg.wasm"] {
        let path = format!("www/pkg/{file}");
        assert!(
            outputs.contains_key(&path),
            "www/pkg/INPUTS.sha256 has no hash of {path}; {REBUILD}"
        );
    }
    let root = repo();
    let mut present = Vec::new();
    files_under(&root, &root.join("www/pkg"), &mut present);
    present.retain(|p| p != "www/pkg/INPUTS.sha256");
    present.sort();
    let listed: Vec<String> = outputs.keys().cloned().collect();
    assert_eq!(
        present, listed,
        "www/pkg holds other files than the build wrote; {REBUILD}"
    );
    for (path, recorded) in &outputs {
        let bytes = std::fs::read(root.join(path))
            .unwrap_or_else(|e| panic!("read {path}: {e}; {REBUILD}"));
        let hash = format!("{:x}", Sha256::digest(&bytes));
        assert_eq!(
            &hash, recorded,
            "{path} is not the file scripts/build-page-pkg.sh built; {REBUILD}"
        );
    }
}
