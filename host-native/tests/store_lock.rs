//! One server per SQLite file: a second `bubble serve` on the same store is
//! refused at start-up with a clear message and exit status 3, and the
//! store is free again once the first server stops.

mod support;

use std::process::{Command, Stdio};

use support::Bubble;

/// Runs `bubble serve` on `store` expecting it to refuse to start.
fn refused(dir: &std::path::Path, store: &str) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_bubble"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store", store])
        .current_dir(dir)
        .env_remove("BUBBLE_CONFIG")
        .env_remove("BUBBLE_LISTEN")
        .env_remove("BUBBLE_STORE")
        .stdin(Stdio::null())
        .output()
        .expect("run bubble");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_second_server_on_the_same_sqlite_file_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("data").join("bubble.db");
    let store = format!("sqlite:{}", db.display());
    let mut first = Bubble::start(dir.path(), &["--store", &store]);

    let (code, stderr) = refused(dir.path(), &store);
    assert_eq!(code, Some(3), "exit status; stderr: {stderr}");
    assert!(
        stderr.contains("in use by another bubble server"),
        "stderr: {stderr}"
    );

    // The first server still runs and stops cleanly.
    first.sigterm();
    assert!(first.wait().success(), "first server exit status");

    // Once it stopped, the store opens again.
    let mut again = Bubble::start(dir.path(), &["--store", &store]);
    again.sigterm();
    assert!(again.wait().success(), "restarted server exit status");
}
