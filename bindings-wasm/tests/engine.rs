//! The JavaScript-facing API, run in Node by `wasm-bindgen-test-runner`:
//! outputs are plain objects, errors carry `.code`, persistence goes through
//! the host, and a stored log rebuilds the engine.
#![cfg(target_arch = "wasm32")]

use bubble_wasm::WasmEngine;
use js_sys::{Array, Reflect, JSON};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

const CONFIG: &str = r#"{
  "auth": {"tokens": [{"token": "dev-alice", "principal": "alice"}]},
  "apps": [{"id": "app-1", "key": "app-key", "secret": "app-secret"}]
}"#;
const NOW: f64 = 1_700_000_000_000.0;

fn get(value: &JsValue, key: &str) -> JsValue {
    Reflect::get(value, &JsValue::from_str(key)).unwrap()
}

fn text(value: &JsValue, key: &str) -> String {
    get(value, key).as_string().unwrap_or_default()
}

/// Drains the engine like a host with synchronous storage: each round's
/// `persist` writes go to `log` and are reported durable at once. Returns the
/// other outputs.
fn drain(engine: &mut WasmEngine, log: &Array) -> Vec<JsValue> {
    let mut outputs = Vec::new();
    loop {
        let mut durable = None;
        loop {
            let out = engine.poll_output().unwrap();
            if out.is_undefined() {
                break;
            }
            if text(&out, "kind") == "persist" {
                for write in Array::from(&get(&out, "writes")).iter() {
                    log.push(&write);
                }
                durable = get(&out, "batch").as_f64();
            } else {
                outputs.push(out);
            }
        }
        match durable {
            Some(batch) => engine.persisted(NOW, batch).unwrap(),
            None => return outputs,
        }
    }
}

fn http(
    engine: &mut WasmEngine,
    log: &Array,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, JsValue) {
    engine
        .handle_http(
            NOW,
            7,
            method,
            path,
            "",
            Some("Bearer dev-alice".into()),
            None,
            body.as_bytes(),
        )
        .unwrap();
    let outputs = drain(engine, log);
    let respond = outputs
        .iter()
        .find(|o| text(o, "kind") == "respond")
        .expect("a response");
    assert_eq!(get(respond, "req").as_f64(), Some(7.0));
    let status = get(respond, "status").as_f64().unwrap() as u16;
    (
        status,
        JSON::parse(&text(respond, "body")).unwrap_or(JsValue::NULL),
    )
}

#[wasm_bindgen_test]
fn a_bad_config_is_an_error_with_a_code() {
    let err = WasmEngine::new(r#"{"limits":{"backlog_pages":1}}"#, 1.0, None)
        .err()
        .unwrap();
    assert_eq!(text(&err, "code"), "invalid_config");
    assert!(text(&err, "message").contains("backlog_pages"));
}

#[wasm_bindgen_test]
fn host_misuse_is_an_error_with_a_code() {
    let mut engine = WasmEngine::new(CONFIG, 1.0, None).unwrap();
    assert_eq!(
        text(&engine.closed(NOW, 9).err().unwrap(), "code"),
        "unknown_connection"
    );
    assert_eq!(
        text(&engine.persisted(NOW, 99.0).err().unwrap(), "code"),
        "unknown_batch"
    );
    engine
        .open_threads(NOW, 1, Some("dev-alice".into()))
        .unwrap();
    let err = engine
        .open_threads(NOW, 1, Some("dev-alice".into()))
        .err()
        .unwrap();
    assert_eq!(text(&err, "code"), "connection_in_use");
}

#[wasm_bindgen_test]
fn a_create_is_answered_only_once_durable() {
    let mut engine = WasmEngine::new(CONFIG, 1.0, None).unwrap();
    engine
        .handle_http(
            NOW,
            1,
            "POST",
            "/v1/threads",
            "",
            Some("Bearer dev-alice".into()),
            None,
            br#"{"threadId":"t-1"}"#,
        )
        .unwrap();
    let first = engine.poll_output().unwrap();
    assert_eq!(text(&first, "kind"), "persist");
    let writes = Array::from(&get(&first, "writes"));
    assert!(writes.length() >= 1);
    assert_eq!(
        text(&get(&writes.get(0), "createThread"), "threadId"),
        "t-1"
    );
    assert!(
        engine.poll_output().unwrap().is_undefined(),
        "nothing before the batch is durable"
    );

    engine
        .persisted(NOW, get(&first, "batch").as_f64().unwrap())
        .unwrap();
    let answer = engine.poll_output().unwrap();
    assert_eq!(text(&answer, "kind"), "respond");
    assert_eq!(get(&answer, "status").as_f64(), Some(201.0));
    assert_eq!(text(&answer, "contentType"), "application/json");
    assert_eq!(
        text(&JSON::parse(&text(&answer, "body")).unwrap(), "threadId"),
        "t-1"
    );
}

#[wasm_bindgen_test]
fn a_stored_log_rebuilds_history() {
    let log = Array::new();
    let mut engine = WasmEngine::new(CONFIG, 1.0, None).unwrap();
    assert_eq!(
        http(
            &mut engine,
            &log,
            "POST",
            "/v1/threads",
            r#"{"threadId":"t-1"}"#
        )
        .0,
        201
    );
    let event = r#"{"type":"run_started","runId":"run-1"}"#;
    assert_eq!(
        http(&mut engine, &log, "POST", "/v1/threads/t-1/events", event).0,
        201
    );

    let log_json = JSON::stringify(&log).unwrap().as_string().unwrap();
    let mut again = WasmEngine::new(CONFIG, 2.0, Some(log_json)).unwrap();
    let (status, page) = http(
        &mut again,
        &Array::new(),
        "GET",
        "/v1/threads/t-1/events",
        "",
    );
    assert_eq!(status, 200);
    let events = Array::from(&get(&page, "events"));
    assert_eq!(events.length(), 1);
    assert_eq!(text(&events.get(0), "runId"), "run-1");
}

#[wasm_bindgen_test]
fn a_subscriber_gets_opened_backlog_and_live_frames() {
    let log = Array::new();
    let mut engine = WasmEngine::new(CONFIG, 1.0, None).unwrap();
    http(
        &mut engine,
        &log,
        "POST",
        "/v1/threads",
        r#"{"threadId":"t-1"}"#,
    );
    http(
        &mut engine,
        &log,
        "POST",
        "/v1/threads/t-1/events",
        r#"{"type":"run_started","runId":"a"}"#,
    );

    engine
        .open_threads(NOW, 3, Some("dev-alice".into()))
        .unwrap();
    engine
        .frame(NOW, 3, r#"{"type":"thread.subscribe","threadId":"t-1"}"#)
        .unwrap();
    engine
        .frame(NOW, 3, r#"{"type":"thread.append","threadId":"t-1","event":{"type":"run_started","runId":"b"}}"#)
        .unwrap();
    let mut frames = Vec::new();
    for _ in 0..4 {
        for out in drain(&mut engine, &log) {
            match text(&out, "kind").as_str() {
                "send" => frames.push(JSON::parse(&text(&out, "frame")).unwrap()),
                "wantDrained" => engine.drained(NOW, 3).unwrap(),
                _ => {}
            }
        }
    }
    let kinds: Vec<String> = frames.iter().map(|f| text(f, "type")).collect();
    assert_eq!(
        kinds,
        ["thread.subscription_opened", "thread.event", "thread.event"]
    );
    assert_eq!(get(&frames[0], "throughSeq").as_f64(), Some(1.0));
    let seqs: Vec<f64> = frames[1..]
        .iter()
        .map(|f| get(&get(f, "event"), "seq").as_f64().unwrap())
        .collect();
    assert_eq!(seqs, [1.0, 2.0]);
}

#[wasm_bindgen_test]
fn a_socket_for_an_unknown_app_is_refused_before_the_upgrade() {
    let engine = WasmEngine::new(CONFIG, 1.0, None).unwrap();
    let accepted = engine.channel_handshake(Some("app-key".into()), true);
    assert!(get(&accepted, "accepted").is_object());
    assert!(get(&accepted, "refused").is_undefined());
    let refused = get(
        &engine.channel_handshake(Some("nope".into()), true),
        "refused",
    );
    assert_eq!(get(&refused, "status").as_f64(), Some(404.0));
    assert_eq!(text(&refused, "body"), "Application not found");
    assert_eq!(
        get(
            &get(&engine.channel_handshake(None, false), "refused"),
            "status"
        )
        .as_f64(),
        Some(400.0)
    );
}
