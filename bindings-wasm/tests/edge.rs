//! The request edge as JavaScript sees it: routes are plain objects, headers
//! come from a `Headers`-like object or a plain one, and the slow-consumer
//! and clock decisions are the core's.
#![cfg(target_arch = "wasm32")]

use bubble_wasm::{MonotonicClock, WasmEdge};
use js_sys::{Function, Object, Reflect};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

fn get(value: &JsValue, key: &str) -> JsValue {
    Reflect::get(value, &JsValue::from_str(key)).unwrap()
}

fn text(value: &JsValue, key: &str) -> String {
    get(value, key).as_string().unwrap_or_default()
}

/// A plain object of lower-case header names, like Node's `req.headers`.
fn plain(headers: &[(&str, &str)]) -> JsValue {
    let obj = Object::new();
    for (name, value) in headers {
        Reflect::set(&obj, &JsValue::from_str(name), &JsValue::from_str(value)).unwrap();
    }
    obj.into()
}

/// An object with `get(name)`, like a `Headers`.
fn with_get(headers: &[(&str, &str)]) -> JsValue {
    let obj = Object::new();
    let map = plain(headers);
    Reflect::set(&obj, &"map".into(), &map).unwrap();
    let get = Function::new_with_args("name", "return this.map[name.toLowerCase()] ?? null");
    Reflect::set(&obj, &"get".into(), &get).unwrap();
    obj.into()
}

#[wasm_bindgen_test]
fn routes_are_plain_objects() {
    let edge = WasmEdge::new("{}").unwrap();
    assert_eq!(edge.ws_path(), "/v1/ws");
    let route = edge.route_request("POST", "/v1/threads", "", JsValue::UNDEFINED);
    assert_eq!(text(&route, "kind"), "engine");

    let headers = with_get(&[
        ("upgrade", "websocket"),
        ("authorization", "Bearer dev-alice"),
    ]);
    let route = edge.route_request("GET", "/v1/ws", "", headers);
    assert_eq!(text(&route, "kind"), "threadsSocket");
    assert_eq!(text(&route, "token"), "dev-alice");

    let tab = plain(&[
        ("upgrade", "websocket"),
        ("authorization", "Bearer\tdev-alice"),
    ]);
    let route = edge.route_request("GET", "/v1/ws", "", tab);
    assert!(get(&route, "token").is_null());

    let route = edge.route_request(
        "GET",
        "/socket",
        "appKey=k&protocol=2",
        plain(&[("upgrade", "websocket")]),
    );
    assert_eq!(text(&route, "kind"), "channelsSocket");
    assert_eq!(text(&route, "appKey"), "k");
    assert_eq!(get(&route, "protocol2").as_bool(), Some(true));
    assert_eq!(get(&route, "pusher").as_bool(), Some(false));

    let route = edge.route_request(
        "GET",
        "/app/k",
        "protocol=7&client=js",
        plain(&[("upgrade", "websocket")]),
    );
    assert_eq!(text(&route, "kind"), "channelsSocket");
    assert_eq!(text(&route, "appKey"), "k");
    assert_eq!(get(&route, "pusher").as_bool(), Some(true));
    assert_eq!(text(&route, "version"), "7");

    let route = edge.route_request("GET", "/v1/threads/a%zz", "", JsValue::NULL);
    assert_eq!(text(&route, "kind"), "answer");
    assert_eq!(get(&route, "status").as_f64(), Some(400.0));
    assert_eq!(text(&route, "contentType"), "application/json");
    assert_eq!(
        text(
            &edge.route_request("GET", "/healthz", "", JsValue::NULL),
            "kind"
        ),
        "health"
    );
    assert_eq!(
        text(&edge.route_request("GET", "/x", "", JsValue::NULL), "kind"),
        "page"
    );
    assert_eq!(get(&WasmEdge::not_found(), "status").as_f64(), Some(404.0));
}

#[wasm_bindgen_test]
fn ws_path_and_limits_come_from_the_config() {
    let edge =
        WasmEdge::new(r#"{"ws_path":"/live","limits":{"outbound_queue_frames":2}}"#).unwrap();
    let route = edge.route_request(
        "GET",
        "/live",
        "access_token=t",
        plain(&[("upgrade", "websocket")]),
    );
    assert_eq!(text(&route, "token"), "t");
    assert_eq!(edge.admit_frame(1), None);
    assert_eq!(edge.admit_frame(2), Some(1013));
    let Err(err) = WasmEdge::new(r#"{"ws_path":"/socket"}"#) else {
        panic!("a ws_path that shadows /socket was accepted");
    };
    assert_eq!(text(&err, "code"), "invalid_config");
}

#[wasm_bindgen_test]
fn the_clock_never_goes_backwards() {
    let mut clock = MonotonicClock::new();
    assert_eq!(clock.now(2_000.0), 2_000.0);
    assert_eq!(clock.now(1_000.0), 2_000.0);
    assert_eq!(clock.now(3_000.0), 3_000.0);
}
