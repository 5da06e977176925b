//! Authorization over `/v1/ws` (SPEC §3, §5): for each role and each frame
//! type, allowed / scoped `forbidden` / scoped `not_found`.

use std::time::Duration;

use bubble_tests::threads::{
    create_with_roles, error_frame, expect_event, message_part, run_finished, run_started,
    subscribe, tool_call_approval,
};
use bubble_tests::{config_with_eve, Server, ALICE, BOB, CAROL, DAVE, EVE, ROOT};
use serde_json::json;

const ROLES: [(&str, &str, &str); 6] = [
    ("owner", ALICE, "alice"),
    ("thread_manager", BOB, "bob"),
    ("member", CAROL, "carol"),
    ("reader", DAVE, "dave"),
    ("none", EVE, "eve"),
    ("admin", ROOT, "root"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_per_role() {
    let server = Server::start(&config_with_eve());
    create_with_roles(&server.http(ALICE), "thread-1").await;
    for (role, token, _) in ROLES {
        let mut ws = server.ws(token).await;
        ws.send_json(&json!({"type": "thread.subscribe", "threadId": "thread-1"}))
            .await;
        let frame = ws.recv_json().await;
        if role == "none" {
            error_frame(&frame, "not_found", Some("thread-1"));
            let closed = ws.recv_json().await;
            assert_eq!(closed["type"], "thread.subscription_closed", "{closed}");
            assert_eq!(closed["reason"], "not_found");
        } else {
            assert_eq!(
                frame["type"], "thread.subscription_opened",
                "{role}: {frame}"
            );
            assert_eq!(frame["throughSeq"], 0);
        }
        // Unsubscribe is silent for everyone, subscribed or not.
        ws.send_json(&json!({"type": "thread.unsubscribe", "threadId": "thread-1"}))
            .await;
        ws.expect_no_frame_within(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_per_role_and_type() {
    let server = Server::start(&config_with_eve());
    create_with_roles(&server.http(ALICE), "thread-1").await;
    let mut watcher = server.ws(ALICE).await;
    subscribe(&mut watcher, "thread-1", None).await;
    let mut seq = 0;
    let bodies = [
        ("run_started", run_started("r")),
        ("message_part", message_part("r", "x")),
        ("tool_call_approval", tool_call_approval("r", "c", true)),
        ("run_finished", run_finished("r")),
    ];
    for (role, token, principal) in ROLES {
        let mut ws = server.ws(token).await;
        for (ty, body) in &bodies {
            ws.send_json(&json!({"type": "thread.append", "threadId": "thread-1", "event": body}))
                .await;
            match role {
                "reader" => {
                    let frame = ws.recv_json().await;
                    let message = error_frame(&frame, "forbidden", Some("thread-1"));
                    assert_eq!(
                        message,
                        format!("Principal \"{principal}\" lacks \"events.{ty}\" on thread \"thread-1\".")
                    );
                }
                "none" => {
                    let frame = ws.recv_json().await;
                    error_frame(&frame, "not_found", Some("thread-1"));
                }
                _ => {
                    seq += 1;
                    let event = expect_event(&mut watcher, "thread-1", seq).await;
                    assert_eq!(event["type"], *ty);
                    assert_eq!(event["principalId"], principal, "{role}");
                }
            }
        }
        ws.expect_no_frame_within(Duration::from_millis(200)).await;
    }
    watcher
        .expect_no_frame_within(Duration::from_millis(200))
        .await;
}
