//! Both HTTP APIs through the request edge and the engine. Each step of the
//! input is one request:
//!
//! ```text
//! <who> <METHOD> <path>[?<query>]
//! <Idempotency-Key, or nothing>
//! <body bytes>
//! ```
//!
//! `<who>` is `alice`, `bob` or `root` (a static token), `app` (the channel
//! app's secret), `jwt:<token>` or anything else for no `Authorization`
//! header. alice owns `t-1` (with one
//! event); bob owns `t-2`.
#![no_main]

use bubble_fuzz::{steps, Host, APP};
use libfuzzer_sys::fuzz_target;

fn split_line(bytes: &[u8]) -> (&[u8], &[u8]) {
    match bytes.iter().position(|b| *b == b'\n') {
        Some(at) => (&bytes[..at], &bytes[at + 1..]),
        None => (bytes, &[]),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut host = Host::new();
    host.create_thread("token-alice", "t-1");
    host.append("token-alice", "t-1");
    host.create_thread("token-bob", "t-2");
    for step in steps(data) {
        let (line, rest) = split_line(step);
        let (key, body) = split_line(rest);
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let mut words = line.splitn(3, ' ');
        let (Some(who), Some(method), Some(target)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let authorization = match who {
            "alice" | "bob" | "root" => Some(format!("Bearer token-{who}")),
            "app" => Some(format!("Bearer {}", APP.2)),
            _ => who.strip_prefix("jwt:").map(|t| format!("Bearer {t}")),
        };
        let key = std::str::from_utf8(key).ok().filter(|k| !k.is_empty());
        host.request(method, target, authorization.as_deref(), key, body);
    }
});
