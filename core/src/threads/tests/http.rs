//! The HTTP decisions of docs/threads-engine.md.

use serde_json::{json, Value};

use super::Host;
use crate::http::Method;

#[test]
fn list_pages_by_thread_id_over_readable_threads() {
    let mut host = Host::new(256);
    for id in ["a", "b", "c", "d"] {
        host.create("alice", id, None);
    }
    host.create("bob", "bb", None);
    host.create("alice", "a.1", Some("a"));
    let ids = |v: &Value| -> Vec<String> {
        v["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["threadId"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, page) = host.http(Method::Get, "alice", "/v1/threads?limit=2", Value::Null);
    assert_eq!(
        (status, ids(&page), page["nextCursor"].clone()),
        (200, vec!["a".into(), "a.1".into()], json!("a.1"))
    );
    let (_, page) = host.http(
        Method::Get,
        "alice",
        "/v1/threads?limit=2&cursor=a.1",
        Value::Null,
    );
    assert_eq!(
        (ids(&page), page["nextCursor"].clone()),
        (vec!["b".into(), "c".into()], json!("c"))
    );
    let (_, page) = host.http(
        Method::Get,
        "alice",
        "/v1/threads?limit=2&cursor=c",
        Value::Null,
    );
    assert_eq!(
        (ids(&page), page["nextCursor"].clone()),
        (vec!["d".into()], Value::Null)
    );
    let (_, page) = host.http(
        Method::Get,
        "alice",
        "/v1/threads?parentThreadId=a",
        Value::Null,
    );
    assert_eq!(ids(&page), ["a.1"]);
    assert_eq!(
        host.status(Method::Get, "alice", "/v1/threads?limit=0"),
        400
    );
}

#[test]
fn participants_join_leave_and_title_events() {
    let mut host = Host::new(256);
    host.create("alice", "t", None);
    let (status, row) = host.http(
        Method::Post,
        "alice",
        "/v1/threads/t/participants",
        Value::Null,
    );
    assert_eq!(
        (status, row["principalId"].clone(), row["role"].clone()),
        (201, json!("alice"), json!("owner"))
    );
    assert_eq!(
        host.http(
            Method::Post,
            "alice",
            "/v1/threads/t/participants",
            json!({})
        )
        .0,
        200
    );
    let (status, row) = host.http(
        Method::Post,
        "alice",
        "/v1/threads/t/participants",
        json!({ "principalId": "bob" }),
    );
    assert_eq!((status, row["role"].clone()), (201, json!("member")));
    assert_eq!(
        host.status(Method::Delete, "alice", "/v1/threads/t/participants/bob"),
        204
    );
    assert_eq!(
        host.status(Method::Delete, "alice", "/v1/threads/t/participants/bob"),
        404
    );
    host.http(
        Method::Patch,
        "alice",
        "/v1/threads/t",
        json!({ "title": "Q3" }),
    );
    host.http(
        Method::Patch,
        "alice",
        "/v1/threads/t",
        json!({ "title": "Q3" }),
    );
    host.http(
        Method::Patch,
        "alice",
        "/v1/threads/t",
        json!({ "title": null }),
    );
    let (_, page) = host.http(Method::Get, "alice", "/v1/threads/t/events", Value::Null);
    let types: Vec<&str> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "participant_joined",
            "participant_joined",
            "participant_left",
            "thread_title_updated",
            "thread_title_updated"
        ]
    );
    assert_eq!(page["events"][4]["title"], Value::Null);
    assert_eq!(page["nextSeq"], Value::Null);
}

#[test]
fn routing_statuses() {
    let mut host = Host::new(256);
    host.create("alice", "t", None);
    assert_eq!(host.status(Method::Delete, "alice", "/v1/threads/t"), 405);
    assert_eq!(host.status(Method::Get, "alice", "/v1/threads/t/nope"), 404);
    assert_eq!(host.status(Method::Get, "alice", "/v1/threads/bad id"), 400);
    assert_eq!(host.status(Method::Get, "nobody", "/v1/threads/t"), 401);
    assert_eq!(host.status(Method::Get, "bob", "/v1/threads/t"), 404);
    host.http(
        Method::Put,
        "alice",
        "/v1/threads/t/grants/bob",
        json!({ "role": "reader" }),
    );
    let (status, body) = host.http(
        Method::Post,
        "bob",
        "/v1/threads/t/events",
        json!({ "type": "run_started", "runId": "r" }),
    );
    assert_eq!(status, 403);
    assert_eq!(
        body["error"]["message"],
        "Principal \"bob\" lacks \"events.run_started\" on thread \"t\"."
    );
    assert_eq!(
        host.http(
            Method::Post,
            "alice",
            "/v1/threads",
            json!({ "threadId": "t", "parentThreadId": "t" })
        )
        .0,
        400
    );
}
