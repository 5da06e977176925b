//! `/v1/ws` frames: each step of the input is one frame (text when it is
//! UTF-8, else binary) on alice's connection, which may subscribe to, read
//! and append to her thread `t-1`, bob's `t-2` (no grant) or any other id.
#![no_main]

use bubble_fuzz::{steps, Host};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut host = Host::new();
    host.create_thread("token-alice", "t-1");
    host.append("token-alice", "t-1");
    host.create_thread("token-bob", "t-2");
    let alice = host.open_threads(Some("token-alice"));
    let watcher = host.open_threads(Some("token-root"));
    host.frame(
        watcher,
        br#"{"type":"thread.subscribe","threadId":"t-1","fromSeq":1}"#,
    );
    for frame in steps(data) {
        host.frame(alice, frame);
    }
});
