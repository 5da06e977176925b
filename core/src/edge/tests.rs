use super::*;
use crate::http::ContentType;
use crate::ChannelProtocol;

fn head<'a>(method: &'a str, path: &'a str, query: &'a str) -> RequestHead<'a> {
    RequestHead {
        method,
        path,
        query,
        ..RequestHead::default()
    }
}

fn upgrade<'a>(path: &'a str, query: &'a str) -> RequestHead<'a> {
    RequestHead {
        upgrade: Some("websocket"),
        ..head("GET", path, query)
    }
}

fn route(request: &RequestHead<'_>) -> Endpoint {
    Edge::default().route(request)
}

fn status(endpoint: Endpoint) -> u16 {
    match endpoint {
        Endpoint::Answer(response) => response.status,
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[test]
fn engine_apis_go_to_the_engine_whatever_the_method() {
    for (method, path) in [
        ("GET", "/v1/threads"),
        ("POST", "/v1/threads"),
        ("GET", "/v1/threads/"),
        ("DELETE", "/v1/threads/t/grants/a%2Fb"),
        ("HEAD", "/v1/threads/t"),
        ("GET", "/v1/%74hreads/t"),
        ("POST", "/api/apps/app-1/events"),
        ("GET", "/api/apps/app-1/nothing"),
        ("POST", "/api/apps/"),
    ] {
        assert_eq!(
            route(&head(method, path, "")),
            Endpoint::Engine,
            "{method} {path}"
        );
    }
}

#[test]
fn bad_paths_are_refused_before_anything_else() {
    for path in [
        "/v1/threads/a%zz",
        "/v1/threads/%FF",
        "/v1/threads/../x",
        "/socket%",
        "/x/%2e%2e",
    ] {
        let Endpoint::Answer(answer) = route(&upgrade(path, "")) else {
            panic!("{path} was routed");
        };
        assert_eq!(answer.status, 400, "{path}");
        assert_eq!(answer.content_type, ContentType::Json);
        assert!(answer.body.contains("invalid_request"), "{}", answer.body);
    }
    assert_eq!(route(&head("GET", "//v1/threads", "")), Endpoint::Page);
    assert_eq!(route(&head("GET", "/v1%2Fthreads", "")), Endpoint::Page);
}

#[test]
fn threads_socket_takes_the_header_bearer_or_the_query() {
    let with_header = RequestHead {
        authorization: Some("Bearer dev-alice"),
        ..upgrade("/v1/ws", "access_token=other")
    };
    assert_eq!(
        route(&with_header),
        Endpoint::ThreadsSocket {
            token: Some("dev-alice".into())
        }
    );
    let tab = RequestHead {
        authorization: Some("Bearer\tdev-alice"),
        ..upgrade("/v1/ws", "")
    };
    assert_eq!(route(&tab), Endpoint::ThreadsSocket { token: None });
    assert_eq!(
        route(&upgrade("/v1/ws", "access_token=a%2Bb+c")),
        Endpoint::ThreadsSocket {
            token: Some("a+b c".into())
        }
    );
    assert_eq!(status(route(&upgrade("/v1/ws", "access_token=%zz"))), 400);
}

#[test]
fn sockets_need_get_and_an_upgrade() {
    assert_eq!(status(route(&head("GET", "/v1/ws", ""))), 400);
    assert_eq!(status(route(&head("GET", "/socket", "appKey=k"))), 400);
    let post = RequestHead {
        upgrade: Some("websocket"),
        ..head("POST", "/socket", "")
    };
    assert_eq!(status(route(&post)), 405);
    let listed = RequestHead {
        upgrade: Some("h2c, WebSocket"),
        ..head("GET", "/socket", "appKey=k&protocol=2")
    };
    assert_eq!(
        route(&listed),
        Endpoint::ChannelsSocket(ChannelsUpgrade {
            app_key: Some("k".into()),
            protocol: ChannelProtocol::V2,
            version: None,
        })
    );
    let pusher = RequestHead {
        upgrade: Some("websocket"),
        ..head("GET", "/app/k%2D1", "protocol=7&client=js&version=8.4.0")
    };
    assert_eq!(
        route(&pusher),
        Endpoint::ChannelsSocket(ChannelsUpgrade {
            app_key: Some("k-1".into()),
            protocol: ChannelProtocol::Pusher,
            version: Some("7".into()),
        })
    );
    for path in ["/app", "/app/", "/app/k/extra", "/app//k"] {
        let other = RequestHead {
            upgrade: Some("websocket"),
            ..head("GET", path, "protocol=7")
        };
        assert_eq!(
            route(&other),
            Endpoint::ChannelsSocket(ChannelsUpgrade {
                app_key: None,
                protocol: ChannelProtocol::Pusher,
                version: Some("7".into()),
            }),
            "{path}: upgraded, then refused with 4005"
        );
    }
    assert_eq!(route(&head("POST", "/apps/1/events", "")), Endpoint::Engine);
    let Endpoint::Answer(bad) = route(&upgrade("/socket", "appKey=%zz")) else {
        panic!("routed");
    };
    assert_eq!((bad.status, bad.content_type), (400, ContentType::Text));
}

#[test]
fn host_endpoints_and_the_page() {
    assert_eq!(route(&head("GET", "/healthz", "")), Endpoint::Health);
    assert_eq!(route(&head("HEAD", "/readyz", "")), Endpoint::Ready);
    assert_eq!(route(&head("GET", "/metrics", "x=%zz")), Endpoint::Metrics);
    assert_eq!(status(route(&head("POST", "/metrics", ""))), 405);
    assert_eq!(route(&head("GET", "/", "")), Endpoint::Page);
    assert_eq!(route(&head("GET", "/app.mjs", "")), Endpoint::Page);
    assert_eq!(route(&head("GET", "/healthz/", "")), Endpoint::Page);
    assert_eq!(status(route(&head("PUT", "/app.mjs", ""))), 405);
    assert_eq!(
        route(&head("OPTIONS", "*", "")),
        Endpoint::Answer(method_not_allowed())
    );
}

#[test]
fn the_ws_path_is_configurable_and_checked() {
    let edge = Edge::new("/live/socket").unwrap();
    assert_eq!(edge.ws_path(), "/live/socket");
    assert!(matches!(
        edge.route(&upgrade("/live/socket", "")),
        Endpoint::ThreadsSocket { token: None }
    ));
    assert_eq!(edge.route(&head("GET", "/v1/ws", "")), Endpoint::Page);
    for bad in [
        "",
        "v1/ws",
        "/",
        "/socket",
        "/healthz",
        "/readyz",
        "/metrics",
        "/v1/threads",
        "/v1/threads/ws",
        "/api/apps",
        "/api/apps/x/ws",
        "/ws?x",
        "/ws#x",
        "/a%zz",
        "/a/../b",
    ] {
        assert_eq!(Edge::new(bad), Err(InvalidWsPath(bad.into())), "{bad}");
    }
    assert_eq!(Edge::new(DEFAULT_WS_PATH).unwrap(), Edge::default());
}

fn cross_origin_edge() -> Edge {
    let origins = AllowedOrigins::parse(&["https://app.example"]).unwrap();
    Edge::default()
        .with_cors(Cors::new(origins.clone(), false, 600).unwrap())
        .with_socket_origins(origins)
}

fn preflight<'a>(path: &'a str, origin: &'a str) -> RequestHead<'a> {
    RequestHead {
        origin: Some(origin),
        access_control_request_method: Some("POST"),
        access_control_request_headers: Some("authorization,content-type"),
        ..head("OPTIONS", path, "")
    }
}

#[test]
fn preflights_of_api_paths_are_answered_by_the_edge() {
    let edge = cross_origin_edge();
    for path in [
        "/v1/threads",
        "/v1/threads/t/events",
        "/api/apps/a/events",
        "/apps/a/events",
    ] {
        match edge.route(&preflight(path, "https://app.example")) {
            Endpoint::Answer(ok) => assert_eq!(ok.status, 204, "{path}"),
            other => panic!("{path}: {other:?}"),
        }
        assert_eq!(
            status(edge.route(&preflight(path, "https://evil.example"))),
            403
        );
        assert_eq!(
            status(Edge::default().route(&preflight(path, "https://app.example"))),
            403,
            "no CORS configured: {path}"
        );
    }
    let not_a_preflight = head("OPTIONS", "/v1/threads", "");
    assert_eq!(edge.route(&not_a_preflight), Endpoint::Engine);
}

#[test]
fn cors_headers_go_on_api_responses_only() {
    let edge = cross_origin_edge();
    let from = |path: &'static str, origin: &'static str| RequestHead {
        origin: Some(origin),
        ..head("GET", path, "")
    };
    let api = edge.cors_headers(&from("/v1/threads", "https://app.example"));
    assert!(api.contains(&("access-control-allow-origin", "https://app.example".into())));
    assert!(edge
        .cors_headers(&from("/healthz", "https://app.example"))
        .is_empty());
    assert!(edge
        .cors_headers(&preflight("/v1/threads", "https://app.example"))
        .is_empty());
    assert!(Edge::default()
        .cors_headers(&from("/v1/threads", "https://app.example"))
        .is_empty());
}

#[test]
fn socket_upgrades_from_other_origins_are_refused() {
    let edge = cross_origin_edge();
    for path in ["/v1/ws", "/socket", "/app/app-key"] {
        let from = |origin| RequestHead {
            origin,
            ..upgrade(path, "appKey=app-key")
        };
        match edge.route(&from(Some("https://evil.example"))) {
            Endpoint::Answer(refused) => {
                assert_eq!(
                    (refused.status, refused.body.as_str()),
                    (403, "Origin not allowed.")
                );
                assert_eq!(refused.content_type, ContentType::Text);
            }
            other => panic!("{path}: {other:?}"),
        }
        assert!(
            !matches!(
                edge.route(&from(Some("https://app.example"))),
                Endpoint::Answer(_)
            ),
            "{path}"
        );
        assert!(
            !matches!(edge.route(&from(None)), Endpoint::Answer(_)),
            "{path} without Origin"
        );
        assert!(
            !matches!(
                Edge::default().route(&from(Some("https://evil.example"))),
                Endpoint::Answer(_)
            ),
            "{path}: no list, any origin"
        );
    }
}
