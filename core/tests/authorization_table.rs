//! Every role × every capability × {direct grant, inherited from the parent,
//! inherited from the grandparent, no grant, admin}, each exercised through
//! the real operation that needs the capability (SPEC §3).
//!
//! The target is always `thread-1`, a grandchild: `thread-gp` → `thread-p`
//! → `thread-1`. Inheritance confers only `thread.read`, `events.subscribe`
//! and `thread.manage`; a caller who cannot read gets `not_found`, exactly as
//! for a thread that does not exist; a caller who can read but lacks the
//! capability gets `forbidden` with the seed's message.

mod common;

use bubble_core::http::Method;
use common::{body_of, forbidden_message, Harness, ADMIN};
use serde_json::{json, Value};

const ROLES: [&str; 4] = ["owner", "thread_manager", "member", "reader"];

const CAPABILITIES: [&str; 10] = [
    "thread.read",
    "thread.manage",
    "grants.manage",
    "participants.manage",
    "subthreads.create",
    "events.subscribe",
    "events.run_started",
    "events.message_part",
    "events.tool_call_approval",
    "events.run_finished",
];

const INHERITABLE: [&str; 3] = ["thread.read", "events.subscribe", "thread.manage"];

const TARGET: &str = "thread-1";
const MISSING: &str = "thread-0";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Direct,
    Parent,
    Grandparent,
    NoGrant,
    Admin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Allowed,
    Forbidden,
    NotFound,
}

/// What an operation observed: success, or an error code and message.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Allowed,
    Error { code: String, message: String },
}

fn role_has(role: &str, capability: &str) -> bool {
    match role {
        "owner" => true,
        "thread_manager" => capability != "grants.manage",
        "member" => {
            matches!(
                capability,
                "thread.read" | "events.subscribe" | "subthreads.create"
            ) || capability.starts_with("events.")
        }
        "reader" => matches!(capability, "thread.read" | "events.subscribe"),
        other => panic!("unknown role {other}"),
    }
}

fn expected(role: &str, capability: &str, scenario: Scenario) -> Expect {
    let granted = match scenario {
        Scenario::Admin => return Expect::Allowed,
        Scenario::NoGrant => return Expect::NotFound,
        Scenario::Direct => role_has(role, capability),
        Scenario::Parent | Scenario::Grandparent => {
            INHERITABLE.contains(&capability) && role_has(role, capability)
        }
    };
    if granted {
        Expect::Allowed
    } else {
        Expect::Forbidden
    }
}

/// The chain of threads, with `alice` granted `role` where `scenario` says.
fn setup(role: &str, scenario: Scenario) -> Harness {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-gp");
    h.create_subthread(ADMIN, "thread-p", "thread-gp");
    h.create_subthread(ADMIN, TARGET, "thread-p");
    h.create_thread(ADMIN, "thread-elsewhere");
    h.grant(TARGET, "zed", "member");
    h.post(
        "zed",
        &format!("/v1/threads/{TARGET}/participants"),
        json!({}),
    )
    .expect_ok();
    let granted_on = match scenario {
        Scenario::Direct => Some(TARGET),
        Scenario::Parent => Some("thread-p"),
        Scenario::Grandparent => Some("thread-gp"),
        Scenario::NoGrant => Some("thread-elsewhere"),
        Scenario::Admin => None,
    };
    if let Some(thread) = granted_on {
        h.grant(thread, "alice", role);
    }
    h
}

fn http_seen(status: u16, body: &Value) -> Seen {
    if (200..300).contains(&status) {
        Seen::Allowed
    } else {
        Seen::Error {
            code: body["error"]["code"].as_str().unwrap_or("?").to_owned(),
            message: body["error"]["message"].as_str().unwrap_or("?").to_owned(),
        }
    }
}

fn frame_error(frame: &Value) -> Seen {
    Seen::Error {
        code: frame["code"].as_str().unwrap_or("?").to_owned(),
        message: frame["message"].as_str().unwrap_or("?").to_owned(),
    }
}

/// Performs the operations that need `capability` on `thread` as `who`.
/// Every operation must observe the same outcome; a disagreement is reported
/// in the returned problems.
fn exercise(h: &mut Harness, who: &str, capability: &str, thread: &str) -> (Seen, Vec<String>) {
    let mut seen = Vec::new();
    let mut problems = Vec::new();
    let base = format!("/v1/threads/{thread}");
    match capability {
        "thread.read" => {
            let r = h.get(who, &base);
            seen.push(http_seen(r.status, &r.body));
            let r = h.get(who, &format!("{base}/events"));
            seen.push(http_seen(r.status, &r.body));
            let r = h.get(who, &format!("{base}/messages"));
            seen.push(http_seen(r.status, &r.body));
        }
        "thread.manage" => {
            let r = h.patch(who, &base, json!({ "title": "Renamed" }));
            seen.push(http_seen(r.status, &r.body));
        }
        "grants.manage" => {
            let r = h.get(who, &format!("{base}/grants"));
            seen.push(http_seen(r.status, &r.body));
            let r = h.put(
                who,
                &format!("{base}/grants/carol"),
                json!({ "role": "reader" }),
            );
            seen.push(http_seen(r.status, &r.body));
            let r = h.delete(who, &format!("{base}/grants/carol"));
            seen.push(http_seen(r.status, &r.body));
        }
        "participants.manage" => {
            let r = h.post(
                who,
                &format!("{base}/participants"),
                json!({ "principalId": "carol" }),
            );
            seen.push(http_seen(r.status, &r.body));
            let r = h.delete(who, &format!("{base}/participants/zed"));
            seen.push(http_seen(r.status, &r.body));
        }
        "subthreads.create" => {
            let body = json!({ "threadId": "thread-new", "parentThreadId": thread });
            let r = h.post(who, "/v1/threads", body);
            seen.push(http_seen(r.status, &r.body));
        }
        "events.subscribe" => {
            let conn = h.connect(who);
            h.subscribe(conn, thread, Some(1));
            let frames = h.frames(conn);
            match frames.first() {
                Some(f) if f["type"] == "thread.subscription_opened" => seen.push(Seen::Allowed),
                Some(f) if f["type"] == "error" => {
                    seen.push(frame_error(f));
                    if f["code"] == "not_found"
                        && frames.get(1) != Some(&common::closed(thread, "not_found"))
                    {
                        problems.push(format!("not_found without subscription_closed: {frames:?}"));
                    }
                }
                _ => problems.push(format!("subscribe answered with {frames:?}")),
            }
            h.disconnect(conn);
        }
        kind => {
            let kind = kind.strip_prefix("events.").expect("an append capability");
            let r = h.post(who, &format!("{base}/events"), body_of(kind, "run-http"));
            seen.push(http_seen(r.status, &r.body));
            let conn = h.connect(who);
            let before = if seen[0] == Seen::Allowed {
                h.thread(thread)["headSeq"].clone()
            } else {
                Value::Null
            };
            h.ws_append(conn, thread, body_of(kind, "run-ws"));
            let frames = h.frames(conn);
            match frames.as_slice() {
                [] => {
                    seen.push(Seen::Allowed);
                    let history = h.history(thread);
                    let last = history.last().cloned().unwrap_or(Value::Null);
                    let appended = last["runId"] == "run-ws" && last["principalId"] == who;
                    if !appended
                        || Some(last["seq"].as_u64().unwrap_or(0)) != before.as_u64().map(|s| s + 1)
                    {
                        problems.push(format!("ws append left no event (last: {last})"));
                    }
                }
                [f] if f["type"] == "error" && f["threadId"] == thread => seen.push(frame_error(f)),
                other => problems.push(format!("ws append answered with {other:?}")),
            }
            h.disconnect(conn);
        }
    }
    if let Some(first) = seen.first().cloned() {
        if seen.iter().any(|s| *s != first) {
            problems.push(format!("operations disagree: {seen:?}"));
        }
        (first, problems)
    } else {
        (
            Seen::Error {
                code: "?".into(),
                message: "?".into(),
            },
            problems,
        )
    }
}

/// Runs every role × capability for `scenario`; panics listing every
/// mismatch.
fn run(scenario: Scenario) {
    let mut failures = Vec::new();
    for role in ROLES {
        for capability in CAPABILITIES {
            let who = if scenario == Scenario::Admin {
                ADMIN
            } else {
                "alice"
            };
            let mut h = setup(role, scenario);
            let (seen, problems) = exercise(&mut h, who, capability, TARGET);
            let want = expected(role, capability, scenario);
            let case = format!("{scenario:?} {role} {capability}");
            for p in problems {
                failures.push(format!("{case}: {p}"));
            }
            match (want, &seen) {
                (Expect::Allowed, Seen::Allowed) => {}
                (Expect::Forbidden, Seen::Error { code, message }) if code == "forbidden" => {
                    let want_message = forbidden_message(who, capability, TARGET);
                    if *message != want_message {
                        failures.push(format!(
                            "{case}: message {message:?}, want {want_message:?}"
                        ));
                    }
                }
                (Expect::NotFound, Seen::Error { code, message }) if code == "not_found" => {
                    // Denial hiding: the same answer as for a thread that does not exist.
                    let mut fresh = setup(role, scenario);
                    let (missing, _) = exercise(&mut fresh, who, capability, MISSING);
                    let hidden = message.replace(TARGET, MISSING);
                    let alike = matches!(&missing, Seen::Error { code, message: m }
                        if code == "not_found" && *m == hidden);
                    if !alike {
                        failures.push(format!(
                            "{case}: not_found {message:?} differs from a missing thread's {missing:?}"
                        ));
                    }
                }
                _ => failures.push(format!("{case}: want {want:?}, saw {seen:?}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn direct_grant() {
    run(Scenario::Direct);
}

#[test]
fn inherited_from_parent() {
    run(Scenario::Parent);
}

#[test]
fn inherited_from_grandparent() {
    run(Scenario::Grandparent);
}

#[test]
fn no_grant_hides_the_thread() {
    run(Scenario::NoGrant);
}

#[test]
fn admin_holds_every_capability() {
    run(Scenario::Admin);
}

/// The seed's forbidden frame, byte for byte in meaning.
#[test]
fn forbidden_append_frame_matches_seed() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, TARGET);
    h.grant(TARGET, "alice", "reader");
    let conn = h.connect("alice");
    h.ws_append(
        conn,
        TARGET,
        common::by("alice", common::message_part("run-001", "hi")),
    );
    assert_eq!(
        h.frames(conn),
        [json!({
            "type": "error", "threadId": "thread-1", "code": "forbidden",
            "message": "Principal \"alice\" lacks \"events.message_part\" on thread \"thread-1\"."
        })]
    );
    let r = h.request(
        Method::Post,
        "alice",
        "/v1/threads/thread-1/events",
        Some(&common::message_part("r", "x")),
        None,
    );
    assert_eq!(
        r.body,
        json!({ "error": { "code": "forbidden",
            "message": "Principal \"alice\" lacks \"events.message_part\" on thread \"thread-1\"." } })
    );
    assert_eq!(r.status, 403);
}
