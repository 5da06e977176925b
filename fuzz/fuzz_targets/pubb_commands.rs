//! pubb commands on `/socket`: each step of the input is one frame (text
//! when it is UTF-8, else binary) on one connection, next to a second
//! connection subscribed to `public-room`.
#![no_main]

use bubble_fuzz::{steps, Host};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut host = Host::new();
    let peer = host.open_channels();
    host.frame(peer, br#"{"action":"subscribe","channel":"public-room"}"#);
    let conn = host.open_channels();
    for frame in steps(data) {
        host.frame(conn, frame);
    }
});
