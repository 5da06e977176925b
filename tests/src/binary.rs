//! Finding (building, if need be) the `bubble` binary under test.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The path of the `bubble` binary.
///
/// `BUBBLE_BIN` names a prebuilt binary. Otherwise the binary of this
/// workspace is built once per test process with `cargo build -p
/// bubble-server --bin bubble` (in release when the tests themselves are
/// built without debug assertions), so `cargo test --workspace` from a clean
/// clone needs no extra step.
pub fn bubble_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("BUBBLE_BIN") {
        Some(path) => PathBuf::from(path),
        None => build(),
    })
}

fn build() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&workspace)
        .args(["build", "-p", "bubble-server", "--bin", "bubble"])
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // Cargo describes the test's own package to the test process; a build
    // script that watches those variables (ring's) would otherwise run again,
    // and everything above it relink, on every test run.
    for (name, _) in std::env::vars_os() {
        let name_text = name.to_string_lossy();
        if name_text.starts_with("CARGO_PKG_")
            || name_text.starts_with("CARGO_BIN_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
            ]
            .contains(&name_text.as_ref())
        {
            cmd.env_remove(&name);
        }
    }
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let output = cmd
        .output()
        .expect("running cargo to build the bubble binary");
    assert!(
        output.status.success(),
        "cargo build -p bubble-server failed"
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact" && msg["target"]["name"] == "bubble")
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported no executable for the bubble binary")
}
