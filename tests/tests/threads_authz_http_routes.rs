//! Authorization over HTTP (SPEC §3, §4): for each role and each route,
//! allowed / `forbidden` (with the seed's message form) / `not_found`
//! (denial hiding), plus `unauthorized` without a valid bearer.

use bubble_tests::threads::{
    create_thread, create_with_roles, error_code, grant, message_part, run_finished, run_started,
    tool_call_approval,
};
use bubble_tests::{config_with_eve, HttpClient, Server, ALICE, BOB, CAROL, DAVE, EVE, ROOT};
use serde_json::{json, Value};

/// The principals under test, by role on the thread.
const ROLES: [(&str, &str, &str); 6] = [
    ("owner", ALICE, "alice"),
    ("thread_manager", BOB, "bob"),
    ("member", CAROL, "carol"),
    ("reader", DAVE, "dave"),
    ("none", EVE, "eve"),
    ("admin", ROOT, "root"),
];

/// What a call should do for a role.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// This success status.
    Ok(u16),
    /// 403 naming this capability.
    Forbidden(&'static str),
    /// 404, as if the thread did not exist.
    Hidden,
}

use Expect::{Forbidden, Hidden, Ok as Allow};

/// A fresh thread owned by alice: bob thread_manager, carol member, dave
/// reader; frank holds a reader grant and is a participant.
async fn setup(server: &Server, id: &str) {
    let alice = server.http(ALICE);
    create_with_roles(&alice, id).await;
    grant(&alice, id, "frank", "reader").await;
    let (status, body) = alice
        .post(
            &format!("/v1/threads/{id}/participants"),
            &json!({"principalId": "frank"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

fn check(
    route: &str,
    role: &str,
    principal: &str,
    thread: &str,
    expect: Expect,
    got: (u16, Value),
) {
    let (status, body) = got;
    match expect {
        Allow(want) => assert_eq!(status, want, "{route} as {role}: {body}"),
        Forbidden(cap) => {
            assert_eq!(status, 403, "{route} as {role}: {body}");
            let message = error_code(&body, "forbidden");
            assert_eq!(
                message,
                format!("Principal \"{principal}\" lacks \"{cap}\" on thread \"{thread}\"."),
                "{route} as {role}"
            );
        }
        Hidden => {
            assert_eq!(status, 404, "{route} as {role}: {body}");
            error_code(&body, "not_found");
        }
    }
}

type Call = fn(
    HttpClient,
    String,
    String,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = (u16, Value)> + Send>>;

/// One route: its name, how to call it on thread `t` as `principal`, and
/// the expectation for [owner, thread_manager, member, reader, none, admin].
fn routes() -> Vec<(&'static str, Call, [Expect; 6])> {
    let read = [
        Allow(200),
        Allow(200),
        Allow(200),
        Allow(200),
        Hidden,
        Allow(200),
    ];
    let append = |cap| {
        [
            Allow(201),
            Allow(201),
            Allow(201),
            Forbidden(cap),
            Hidden,
            Allow(201),
        ]
    };
    let grants = [
        Allow(200),
        Forbidden("grants.manage"),
        Forbidden("grants.manage"),
        Forbidden("grants.manage"),
        Hidden,
        Allow(200),
    ];
    vec![
        (
            "GET /v1/threads/:id",
            |c, t, _| Box::pin(async move { c.get(&format!("/v1/threads/{t}")).await }),
            read,
        ),
        (
            "GET /v1/threads/:id/events",
            |c, t, _| {
                Box::pin(async move {
                    c.get(&format!("/v1/threads/{t}/events?fromSeq=1&limit=10"))
                        .await
                })
            },
            read,
        ),
        (
            "GET /v1/threads/:id/messages",
            |c, t, _| Box::pin(async move { c.get(&format!("/v1/threads/{t}/messages")).await }),
            read,
        ),
        (
            "PATCH /v1/threads/:id",
            |c, t, _| {
                Box::pin(async move {
                    c.patch(&format!("/v1/threads/{t}"), &json!({"title": "renamed"}))
                        .await
                })
            },
            [
                Allow(200),
                Allow(200),
                Forbidden("thread.manage"),
                Forbidden("thread.manage"),
                Hidden,
                Allow(200),
            ],
        ),
        (
            "POST events run_started",
            |c, t, _| {
                Box::pin(async move {
                    c.post(&format!("/v1/threads/{t}/events"), &run_started("r"))
                        .await
                })
            },
            append("events.run_started"),
        ),
        (
            "POST events message_part",
            |c, t, _| {
                Box::pin(async move {
                    c.post(&format!("/v1/threads/{t}/events"), &message_part("r", "x"))
                        .await
                })
            },
            append("events.message_part"),
        ),
        (
            "POST events tool_call_approval",
            |c, t, _| {
                Box::pin(async move {
                    c.post(
                        &format!("/v1/threads/{t}/events"),
                        &tool_call_approval("r", "c", true),
                    )
                    .await
                })
            },
            append("events.tool_call_approval"),
        ),
        (
            "POST events run_finished",
            |c, t, _| {
                Box::pin(async move {
                    c.post(&format!("/v1/threads/{t}/events"), &run_finished("r"))
                        .await
                })
            },
            append("events.run_finished"),
        ),
        (
            "GET grants",
            |c, t, _| Box::pin(async move { c.get(&format!("/v1/threads/{t}/grants")).await }),
            grants,
        ),
        (
            "PUT grant",
            |c, t, _| {
                Box::pin(async move {
                    c.put(
                        &format!("/v1/threads/{t}/grants/grace"),
                        &json!({"role": "reader"}),
                    )
                    .await
                })
            },
            grants,
        ),
        (
            "DELETE grant",
            |c, t, _| {
                Box::pin(async move { c.delete(&format!("/v1/threads/{t}/grants/frank")).await })
            },
            [
                Allow(204),
                Forbidden("grants.manage"),
                Forbidden("grants.manage"),
                Forbidden("grants.manage"),
                Hidden,
                Allow(204),
            ],
        ),
        (
            "POST participants (self-join)",
            |c, t, _| {
                Box::pin(async move {
                    c.post(&format!("/v1/threads/{t}/participants"), &json!({}))
                        .await
                })
            },
            [
                Allow(201),
                Allow(201),
                Allow(201),
                Forbidden("events.message_part"),
                Hidden,
                Allow(201),
            ],
        ),
        (
            "POST participants (someone else)",
            |c, t, _| {
                Box::pin(async move {
                    c.post(
                        &format!("/v1/threads/{t}/participants"),
                        &json!({"principalId": "grace"}),
                    )
                    .await
                })
            },
            [
                Allow(201),
                Allow(201),
                Forbidden("participants.manage"),
                Forbidden("participants.manage"),
                Hidden,
                Allow(201),
            ],
        ),
        (
            "DELETE participants (someone else)",
            |c, t, _| {
                Box::pin(async move {
                    c.delete(&format!("/v1/threads/{t}/participants/frank"))
                        .await
                })
            },
            [
                Allow(204),
                Allow(204),
                Forbidden("participants.manage"),
                Forbidden("participants.manage"),
                Hidden,
                Allow(204),
            ],
        ),
        (
            "POST /v1/threads (subthread)",
            |c, t, _| {
                Box::pin(async move {
                    c.post(
                        "/v1/threads",
                        &json!({"threadId": format!("{t}.child"), "parentThreadId": t}),
                    )
                    .await
                })
            },
            [
                Allow(201),
                Allow(201),
                Allow(201),
                Forbidden("subthreads.create"),
                Hidden,
                Allow(201),
            ],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_on_every_route() {
    let server = Server::start(&config_with_eve());
    for (n, (route, call, expects)) in routes().into_iter().enumerate() {
        for (i, (role, token, principal)) in ROLES.iter().enumerate() {
            let thread = format!("t{n}-{role}");
            setup(&server, &thread).await;
            let got = call(server.http(token), thread.clone(), principal.to_string()).await;
            check(route, role, principal, &thread, expects[i], got);
        }
    }
}

/// Leaving is allowed to any participant who can read the thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reader_may_leave() {
    let server = Server::start(&config_with_eve());
    let alice = server.http(ALICE);
    for (role, token, principal) in ROLES {
        let thread = format!("leave-{role}");
        setup(&server, &thread).await;
        if role != "none" {
            let (status, body) = alice
                .post(
                    &format!("/v1/threads/{thread}/participants"),
                    &json!({"principalId": principal}),
                )
                .await;
            assert_eq!(status, 201, "{body}");
        }
        let got = server
            .http(token)
            .delete(&format!("/v1/threads/{thread}/participants/{principal}"))
            .await;
        let expect = if role == "none" { Hidden } else { Allow(204) };
        check(
            "DELETE participants (self)",
            role,
            principal,
            &thread,
            expect,
            got,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_only_readable_threads() {
    let server = Server::start(&config_with_eve());
    setup(&server, "listed").await;
    create_thread(&server.http(BOB), "bobs-own").await;
    for (role, token, _) in ROLES {
        let (status, body) = server.http(token).get("/v1/threads?limit=1000").await;
        assert_eq!(status, 200, "{role}: {body}");
        let ids: Vec<&str> = body["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["threadId"].as_str().unwrap())
            .collect();
        assert_eq!(ids.contains(&"listed"), role != "none", "{role}: {ids:?}");
        assert_eq!(
            ids.contains(&"bobs-own"),
            matches!(role, "thread_manager" | "admin"),
            "{role}: {ids:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_requests_get_401() {
    let server = Server::start(&config_with_eve());
    setup(&server, "t").await;
    let anonymous = server.http_anonymous();
    let bad = server.http("not-a-token");
    let calls: [(&str, &str, Option<Value>); 12] = [
        ("POST", "/v1/threads", Some(json!({"threadId": "x"}))),
        ("GET", "/v1/threads", None),
        ("GET", "/v1/threads/t", None),
        ("PATCH", "/v1/threads/t", Some(json!({"title": "x"}))),
        ("GET", "/v1/threads/t/events", None),
        ("GET", "/v1/threads/t/messages", None),
        ("POST", "/v1/threads/t/events", Some(run_started("r"))),
        ("GET", "/v1/threads/t/grants", None),
        (
            "PUT",
            "/v1/threads/t/grants/eve",
            Some(json!({"role": "owner"})),
        ),
        ("DELETE", "/v1/threads/t/grants/bob", None),
        ("POST", "/v1/threads/t/participants", Some(json!({}))),
        ("DELETE", "/v1/threads/t/participants/frank", None),
    ];
    for client in [&anonymous, &bad] {
        for (method, path, body) in &calls {
            let bytes = body
                .as_ref()
                .map(|b| b.to_string().into_bytes())
                .unwrap_or_default();
            let res = client
                .request(method, path, &[("content-type", "application/json")], bytes)
                .await;
            assert_eq!(res.status, 401, "{method} {path}: {}", res.text());
            error_code(&res.json(), "unauthorized");
        }
    }
    let basic = server
        .http_anonymous()
        .request(
            "GET",
            "/v1/threads/t",
            &[("authorization", "Basic dG9rZW4tYWxpY2U=")],
            Vec::new(),
        )
        .await;
    assert_eq!(basic.status, 401);
    // Nothing changed.
    let (_, thread) = server.http(ALICE).get("/v1/threads/t").await;
    assert_eq!(
        thread["headSeq"], 1,
        "only frank's participant_joined: {thread}"
    );
    assert!(thread.get("title").is_none());
}
