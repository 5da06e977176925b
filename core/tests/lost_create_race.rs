//! Two engines create the same thread id at once; the store keeps one. The
//! loser's caller never learns anything about the winner's thread: every
//! answer it got while its own creation was pending is one it may have.

mod common;

use bubble_core::http::Method;
use bubble_core::store::MemoryStore;
use bubble_core::Millis;
use common::*;
use serde_json::json;

#[test]
fn history_read_during_a_lost_create_does_not_reveal_the_winners_thread() {
    let store = MemoryStore::default();
    let mut a = Harness::engine_over(config(), store.clone(), Millis(T0), 1);
    let mut b = Harness::engine_over(config(), store, Millis(T0), 2);
    a.hold_persistence();
    let create = a.send_request(
        Method::Post,
        Some("alice"),
        "/v1/threads",
        Some(&json!({ "threadId": "t" })),
        None,
    );
    let history = a.send_request(
        Method::Get,
        Some("alice"),
        "/v1/threads/t/events",
        None,
        None,
    );
    b.create_thread("bob", "t");
    a.release_persistence();
    let create = a.response(create).expect("the create is answered");
    create.expect_error(409, "conflict");
    let history = a.response(history).expect("the history read is answered");
    history.expect_error(404, "not_found");
}
