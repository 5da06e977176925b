//! CORS for the HTTP APIs and the `Origin` allow-list of WebSocket
//! upgrades, configured per deployment; without a configuration, only
//! same-origin pages (no CORS header, every preflight refused).

use bubble_tests::threads::{create_thread, error_code, subscribe};
use bubble_tests::{Server, WsClient, ALICE, APP_KEY, TEST_CONFIG};
use tokio_tungstenite::tungstenite::Error;

const APP: &str = "http://app.test:8080";
const EVIL: &str = "http://evil.test";

fn config() -> String {
    format!(
        "{TEST_CONFIG}\n[cors]\nallowed_origins = [\"{APP}\"]\nmax_age_secs = 1234\n\
         [websocket]\nallowed_origins = [\"{APP}\"]\n"
    )
}

async fn preflight(
    server: &Server,
    path: &str,
    origin: &str,
    headers: &str,
) -> bubble_tests::HttpResponse {
    server
        .http_anonymous()
        .request(
            "OPTIONS",
            path,
            &[
                ("origin", origin),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", headers),
            ],
            Vec::new(),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflights_are_answered_for_allowed_origins_only() {
    let server = Server::start(&config());
    for path in [
        "/v1/threads",
        "/v1/threads/t/events",
        "/api/apps/app-1/events",
    ] {
        let ok = preflight(
            &server,
            path,
            APP,
            "authorization, content-type, idempotency-key",
        )
        .await;
        assert_eq!(ok.status, 204, "{path}");
        assert_eq!(
            ok.header("access-control-allow-origin").as_deref(),
            Some(APP)
        );
        assert_eq!(ok.header("access-control-max-age").as_deref(), Some("1234"));
        assert_eq!(
            ok.header("access-control-allow-headers").as_deref(),
            Some("Authorization, Content-Type, Idempotency-Key")
        );
        assert_eq!(
            ok.header("access-control-allow-methods").as_deref(),
            Some("GET, HEAD, POST, PUT, PATCH, DELETE")
        );
        assert_eq!(
            ok.header("access-control-allow-credentials"),
            None,
            "credentials are off by default"
        );
        for (origin, headers) in [(EVIL, "authorization"), (APP, "authorization, x-other")] {
            let refused = preflight(&server, path, origin, headers).await;
            assert_eq!(refused.status, 403, "{path} {origin} {headers}");
            error_code(&refused.json(), "forbidden");
            assert_eq!(refused.header("access-control-allow-origin"), None);
        }
    }
    let (status, _) = server.http(ALICE).get("/v1/threads").await;
    assert_eq!(status, 200, "the server keeps serving");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actual_responses_carry_the_allowed_origin() {
    let server = Server::start(&config());
    let alice = server.http(ALICE);
    let from = |origin| [("origin", origin), ("content-type", "application/json")];
    let created = alice
        .request(
            "POST",
            "/v1/threads",
            &from(APP),
            br#"{"threadId":"t"}"#.to_vec(),
        )
        .await;
    assert_eq!(created.status, 201);
    assert_eq!(
        created.header("access-control-allow-origin").as_deref(),
        Some(APP)
    );
    assert_eq!(
        created.header("access-control-expose-headers").as_deref(),
        Some("Retry-After")
    );
    assert_eq!(created.header("vary").as_deref(), Some("Origin"));
    let refused = server
        .http_anonymous()
        .request("GET", "/v1/threads/t", &from(APP), Vec::new())
        .await;
    assert_eq!(refused.status, 401, "errors carry the headers too");
    assert_eq!(
        refused.header("access-control-allow-origin").as_deref(),
        Some(APP)
    );
    // Another origin is served (the browser withholds the answer), without CORS headers.
    let other = alice
        .request("GET", "/v1/threads/t", &from(EVIL), Vec::new())
        .await;
    assert_eq!(other.status, 200);
    assert_eq!(other.header("access-control-allow-origin"), None);
    assert_eq!(other.header("vary").as_deref(), Some("Origin"));
    let health = alice
        .request("GET", "/healthz", &from(APP), Vec::new())
        .await;
    assert_eq!(
        health.header("access-control-allow-origin"),
        None,
        "only the APIs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_configuration_only_same_origin() {
    let server = Server::start(TEST_CONFIG);
    let refused = preflight(&server, "/v1/threads", APP, "authorization").await;
    assert_eq!(refused.status, 403);
    error_code(&refused.json(), "forbidden");
    let response = server
        .http(ALICE)
        .request("GET", "/v1/threads", &[("origin", APP)], Vec::new())
        .await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("access-control-allow-origin"), None);
    assert_eq!(response.header("vary"), None);
    let ws = WsClient::connect_with_headers(
        &server.ws_url("/v1/ws?access_token=token-alice"),
        &[("origin", EVIL)],
    )
    .await;
    assert!(ws.is_ok(), "no allow-list: any origin may upgrade");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_upgrades_from_other_origins_are_refused_before_upgrading() {
    let server = Server::start(&config());
    create_thread(&server.http(ALICE), "t").await;
    let mut kept = WsClient::connect(&server.ws_url("/v1/ws"), Some(ALICE))
        .await
        .expect("no Origin: allowed");
    assert_eq!(subscribe(&mut kept, "t", None).await, 0);
    let paths = [
        "/v1/ws?access_token=token-alice".to_owned(),
        format!("/socket?appKey={APP_KEY}&protocol=2"),
        format!("/app/{APP_KEY}?protocol=7"),
    ];
    for path in &paths {
        match WsClient::connect_with_headers(&server.ws_url(path), &[("origin", EVIL)]).await {
            Err(Error::Http(response)) => {
                assert_eq!(response.status(), 403, "{path}");
                let body = response.body().as_deref().map(String::from_utf8_lossy);
                assert_eq!(body.as_deref(), Some("Origin not allowed."), "{path}");
            }
            Err(other) => panic!("{path}: {other}"),
            Ok(_) => panic!("{path}: upgraded from a refused origin"),
        }
        let allowed =
            WsClient::connect_with_headers(&server.ws_url(path), &[("origin", APP)]).await;
        assert!(allowed.is_ok(), "{path}: allowed origin");
    }
    let mut ws = WsClient::connect_with_headers(&server.ws_url(&paths[0]), &[("origin", APP)])
        .await
        .unwrap();
    create_thread(&server.http(ALICE), "u").await;
    assert_eq!(subscribe(&mut ws, "u", None).await, 0);
    assert_eq!(
        subscribe(&mut kept, "u", None).await,
        0,
        "other connections keep working"
    );
}
