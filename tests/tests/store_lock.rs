//! One server per SQLite file: a second `bubble serve` on the same store is
//! refused at start-up with a clear message and exit status 3, and the
//! store opens again once the first server stops.

use std::process::{Command, Stdio};

use bubble_tests::{bubble_binary, Server, TEST_CONFIG};

#[test]
fn a_second_server_on_the_same_sqlite_file_is_refused() {
    let mut first = Server::start(TEST_CONFIG);
    let store = format!("sqlite:{}", first.db_path().display());
    let second = Command::new(bubble_binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--store", &store])
        .current_dir(first.dir())
        .env_remove("BUBBLE_CONFIG")
        .env_remove("BUBBLE_LISTEN")
        .env_remove("BUBBLE_STORE")
        .stdin(Stdio::null())
        .output()
        .expect("run bubble");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(3), "stderr: {stderr}");
    assert!(
        stderr.contains("in use by another bubble server"),
        "stderr: {stderr}"
    );

    // The first server is unaffected, and after it stops the store opens again.
    first.restart();
}
