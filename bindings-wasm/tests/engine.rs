//! The JavaScript-facing API, run in Node by `wasm-bindgen-test-runner`:
//! outputs are plain objects, errors carry `.code`, reads and batches go
//! through the host's storage (here a miniature of `worker/storage.mjs`'s
//! key layout), and a new engine over the same storage has the history.
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

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

fn number(value: &JsValue, key: &str) -> f64 {
    get(value, key).as_f64().unwrap()
}

/// The host's storage in miniature: JSON texts under the keys of
/// `worker/storage.mjs` (records `t/…`, events `e/…`, idempotency keys
/// `k/…`). Clones share the data.
#[derive(Clone, Default)]
struct Storage(Rc<RefCell<BTreeMap<String, String>>>);

impl Storage {
    /// Applies one batch's writes; returns the refused threads.
    fn commit(&self, writes: &JsValue) -> Vec<String> {
        let mut values = self.0.borrow_mut();
        let mut refused = Vec::new();
        for group in Array::from(&get(writes, "threads")).iter() {
            let id = text(&group, "threadId");
            let expect = get(&group, "expect");
            let stored = values
                .get(&format!("t/{id}"))
                .map(|t| JSON::parse(t).unwrap());
            let holds = match &stored {
                None => expect.is_null(),
                Some(record) => ["headSeq", "version"]
                    .iter()
                    .all(|k| !expect.is_null() && get(record, k) == get(&expect, k)),
            };
            if !holds {
                refused.push(id);
                continue;
            }
            let record = JSON::stringify(&get(&group, "record")).unwrap();
            values.insert(format!("t/{id}"), record.as_string().unwrap());
            for write in Array::from(&get(&group, "writes")).iter() {
                let append = get(&write, "appendEvent");
                if append.is_undefined() {
                    continue;
                }
                let seq = number(&append, "seq") as u64;
                values.insert(format!("e/{id}/{seq:016}"), text(&append, "event"));
                if let Some(key) = get(&append, "idempotencyKey").as_string() {
                    values.insert(format!("k/{id}/{key}"), seq.to_string());
                }
            }
        }
        refused
    }

    /// Answers one read query with the JSON `readDone` takes.
    fn read(&self, query: &JsValue) -> String {
        let values = self.0.borrow();
        let id = text(query, "threadId");
        let or_null = |v: Option<&String>| v.map_or("null".to_owned(), Clone::clone);
        match text(query, "kind").as_str() {
            "thread" => format!(
                r#"{{"thread":{}}}"#,
                or_null(values.get(&format!("t/{id}")))
            ),
            "events" => {
                let from = (number(query, "fromSeq") as u64).max(1);
                let through = number(query, "throughSeq") as u64;
                let limit = number(query, "limit") as usize;
                let events: Vec<&str> = if from > through {
                    Vec::new()
                } else {
                    let range = format!("e/{id}/{from:016}")..=format!("e/{id}/{through:016}");
                    values
                        .range(range)
                        .take(limit)
                        .map(|(_, v)| v.as_str())
                        .collect()
                };
                format!(r#"{{"events":[{}]}}"#, events.join(","))
            }
            "idempotent" => {
                let seq = values.get(&format!("k/{id}/{}", text(query, "key")));
                let event = seq
                    .and_then(|s| values.get(&format!("e/{id}/{:016}", s.parse::<u64>().unwrap())));
                format!(r#"{{"event":{}}}"#, or_null(event))
            }
            "threads" => {
                assert!(
                    get(query, "parent").is_null(),
                    "children are not listed here"
                );
                let after = get(query, "after").as_string().unwrap_or_default();
                let records: Vec<&str> = values
                    .range("t/".to_owned()..)
                    .take_while(|(k, _)| k.starts_with("t/"))
                    .filter(|(k, _)| k[2..] > *after)
                    .take(number(query, "limit") as usize)
                    .map(|(_, v)| v.as_str())
                    .collect();
                format!(r#"{{"threads":[{}]}}"#, records.join(","))
            }
            other => panic!("unknown read kind {other}"),
        }
    }
}

/// Drains the engine like a host would, one input at a time: batches are
/// committed to `storage` in order, reads answered last asked first (any
/// order is legal). Returns the other outputs.
fn drain(engine: &mut WasmEngine, storage: &Storage) -> Vec<JsValue> {
    let mut outputs = Vec::new();
    let mut reads = Vec::new();
    let mut batches = Vec::new();
    loop {
        loop {
            let out = engine.poll_output().unwrap();
            if out.is_undefined() {
                break;
            }
            match text(&out, "kind").as_str() {
                "read" => reads.push(out),
                "persist" => batches.push(out),
                _ => outputs.push(out),
            }
        }
        if !batches.is_empty() {
            let out = batches.remove(0);
            let refused = storage.commit(&get(&out, "writes"));
            let batch = number(&out, "batch");
            if refused.is_empty() {
                engine.persisted(NOW, batch).unwrap();
            } else {
                engine.persist_failed(NOW, batch, refused).unwrap();
            }
        } else if let Some(out) = reads.pop() {
            let answer = storage.read(&get(&out, "query"));
            engine
                .read_done(NOW, number(&out, "read"), &answer)
                .unwrap();
        } else {
            return outputs;
        }
    }
}

fn http(
    engine: &mut WasmEngine,
    storage: &Storage,
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
    let outputs = drain(engine, storage);
    let respond = outputs
        .iter()
        .find(|o| text(o, "kind") == "respond")
        .expect("a response");
    assert_eq!(get(respond, "req").as_f64(), Some(7.0));
    let status = number(respond, "status") as u16;
    (
        status,
        JSON::parse(&text(respond, "body")).unwrap_or(JsValue::NULL),
    )
}

fn create_request(engine: &mut WasmEngine, id: &str) {
    let body = format!(r#"{{"threadId":"{id}"}}"#);
    engine
        .handle_http(
            NOW,
            1,
            "POST",
            "/v1/threads",
            "",
            Some("Bearer dev-alice".into()),
            None,
            body.as_bytes(),
        )
        .unwrap();
}

/// The one output pending, which must be of `kind`.
fn next(engine: &mut WasmEngine, kind: &str) -> JsValue {
    let out = engine.poll_output().unwrap();
    assert_eq!(text(&out, "kind"), kind);
    out
}

#[wasm_bindgen_test]
fn a_bad_config_is_an_error_with_a_code() {
    let err = WasmEngine::new(r#"{"limits":{"backlog_pages":1}}"#, 1.0)
        .err()
        .unwrap();
    assert_eq!(text(&err, "code"), "invalid_config");
    assert!(text(&err, "message").contains("backlog_pages"));
}

#[wasm_bindgen_test]
fn host_misuse_is_an_error_with_a_code() {
    let mut engine = WasmEngine::new(CONFIG, 1.0).unwrap();
    assert_eq!(
        text(&engine.closed(NOW, 9).err().unwrap(), "code"),
        "unknown_connection"
    );
    assert_eq!(
        text(&engine.persisted(NOW, 99.0).err().unwrap(), "code"),
        "unknown_batch"
    );
    assert_eq!(
        text(
            &engine.persist_failed(NOW, 99.0, vec![]).err().unwrap(),
            "code"
        ),
        "unknown_batch"
    );
    let bad_id = engine.persist_failed(NOW, 1.0, vec!["no spaces".into()]);
    assert_eq!(text(&bad_id.err().unwrap(), "code"), "invalid_thread_id");
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
fn a_create_reads_then_persists_and_is_answered_only_once_durable() {
    let mut engine = WasmEngine::new(CONFIG, 1.0).unwrap();
    create_request(&mut engine, "t-1");

    let read = next(&mut engine, "read");
    let query = get(&read, "query");
    assert_eq!(text(&query, "kind"), "thread");
    assert_eq!(text(&query, "threadId"), "t-1");
    assert!(engine.poll_output().unwrap().is_undefined());
    engine
        .read_done(NOW, number(&read, "read"), r#"{"thread":null}"#)
        .unwrap();

    let persist = next(&mut engine, "persist");
    let group = Array::from(&get(&get(&persist, "writes"), "threads")).get(0);
    assert_eq!(text(&group, "threadId"), "t-1");
    assert!(
        get(&group, "expect").is_null(),
        "a new thread must not exist"
    );
    let record = get(&group, "record");
    assert_eq!(text(&record, "threadId"), "t-1");
    assert_eq!(number(&record, "headSeq"), 0.0);
    let version = text(&record, "version");
    assert!(
        version.parse::<u64>().is_ok(),
        "the version is a string token: {version:?}"
    );
    let first = Array::from(&get(&group, "writes")).get(0);
    assert_eq!(text(&get(&first, "createThread"), "threadId"), "t-1");
    assert!(
        engine.poll_output().unwrap().is_undefined(),
        "nothing before the batch is durable"
    );

    engine.persisted(NOW, number(&persist, "batch")).unwrap();
    let answer = next(&mut engine, "respond");
    assert_eq!(number(&answer, "status"), 201.0);
    assert_eq!(text(&answer, "contentType"), "application/json");
    assert_eq!(
        text(&JSON::parse(&text(&answer, "body")).unwrap(), "threadId"),
        "t-1"
    );
}

#[wasm_bindgen_test]
fn an_appended_event_is_handed_over_as_its_json_text() {
    let storage = Storage::default();
    let mut engine = WasmEngine::new(CONFIG, 1.0).unwrap();
    http(
        &mut engine,
        &storage,
        "POST",
        "/v1/threads",
        r#"{"threadId":"t-1"}"#,
    );
    let body = r#"{"type":"message_part","runId":"r","part":{"type":"text-delta","id":"x","delta":"hi","n":12345678901234567890},"version":"ai-sdk-v6"}"#;
    engine
        .handle_http(
            NOW,
            2,
            "POST",
            "/v1/threads/t-1/events",
            "",
            Some("Bearer dev-alice".into()),
            Some("key-1".into()),
            body.as_bytes(),
        )
        .unwrap();
    let mut persist = JsValue::UNDEFINED;
    while persist.is_undefined() {
        let out = engine.poll_output().unwrap();
        match text(&out, "kind").as_str() {
            "read" => {
                let answer = storage.read(&get(&out, "query"));
                engine
                    .read_done(NOW, number(&out, "read"), &answer)
                    .unwrap();
            }
            "persist" => persist = out,
            other => panic!("unexpected {other}"),
        }
    }
    let group = Array::from(&get(&get(&persist, "writes"), "threads")).get(0);
    let expect = get(&group, "expect");
    assert_eq!(number(&expect, "headSeq"), 0.0);
    assert!(get(&expect, "version").is_string());
    let append = Array::from(&get(&group, "writes"))
        .iter()
        .map(|w| get(&w, "appendEvent"))
        .find(|a| !a.is_undefined())
        .expect("an append");
    assert_eq!(number(&append, "seq"), 1.0);
    assert_eq!(text(&append, "idempotencyKey"), "key-1");
    let event = text(&append, "event");
    assert!(event.starts_with(r#"{"seq":1,"#), "{event}");
    assert!(event.contains("12345678901234567890"), "{event}");
}

#[wasm_bindgen_test]
fn a_new_engine_over_the_same_storage_has_the_history() {
    let storage = Storage::default();
    let mut engine = WasmEngine::new(CONFIG, 1.0).unwrap();
    let created = http(
        &mut engine,
        &storage,
        "POST",
        "/v1/threads",
        r#"{"threadId":"t-1"}"#,
    );
    assert_eq!(created.0, 201);
    let event = r#"{"type":"run_started","runId":"run-1"}"#;
    assert_eq!(
        http(
            &mut engine,
            &storage,
            "POST",
            "/v1/threads/t-1/events",
            event
        )
        .0,
        201
    );

    let mut again = WasmEngine::new(CONFIG, 2.0).unwrap();
    let (status, page) = http(&mut again, &storage, "GET", "/v1/threads/t-1/events", "");
    assert_eq!(status, 200);
    let events = Array::from(&get(&page, "events"));
    assert_eq!(events.length(), 1);
    assert_eq!(text(&events.get(0), "runId"), "run-1");
    let (status, list) = http(&mut again, &storage, "GET", "/v1/threads", "");
    assert_eq!(status, 200);
    let threads = Array::from(&get(&list, "threads"));
    assert_eq!(threads.length(), 1);
    assert_eq!(number(&threads.get(0), "headSeq"), 1.0);
}

#[wasm_bindgen_test]
fn a_refused_group_is_read_again_and_decided_again() {
    let mut engine = WasmEngine::new(CONFIG, 1.0).unwrap();
    create_request(&mut engine, "t-1");
    let read = next(&mut engine, "read");
    engine
        .read_done(NOW, number(&read, "read"), r#"{"thread":null}"#)
        .unwrap();
    let persist = next(&mut engine, "persist");
    engine
        .persist_failed(NOW, number(&persist, "batch"), vec!["t-1".into()])
        .unwrap();

    let again = next(&mut engine, "read");
    assert_eq!(text(&get(&again, "query"), "threadId"), "t-1");
    engine
        .read_done(NOW, number(&again, "read"), r#"{"thread":null}"#)
        .unwrap();
    let retry = next(&mut engine, "persist");
    assert!(number(&retry, "batch") > number(&persist, "batch"));
    engine.persisted(NOW, number(&retry, "batch")).unwrap();
    assert_eq!(number(&next(&mut engine, "respond"), "status"), 201.0);
}

#[wasm_bindgen_test]
fn a_change_heard_from_another_engine_reads_the_thread_again() {
    let storage = Storage::default();
    let mut engine = WasmEngine::new(CONFIG, 1.0).unwrap();
    http(
        &mut engine,
        &storage,
        "POST",
        "/v1/threads",
        r#"{"threadId":"t-1"}"#,
    );
    assert!(engine.poll_output().unwrap().is_undefined());

    // Nobody follows t-1 here: the change evicts it, and its next use
    // reads it again.
    engine
        .changed(NOW, "t-1", 1.0, "9223372036854775807")
        .unwrap();
    assert!(engine.poll_output().unwrap().is_undefined());
    create_request(&mut engine, "t-1");
    let read = next(&mut engine, "read");
    assert_eq!(text(&get(&read, "query"), "kind"), "thread");
    assert_eq!(text(&get(&read, "query"), "threadId"), "t-1");

    let err = engine
        .changed(NOW, "t-1", 1.0, "not a number")
        .err()
        .unwrap();
    assert_eq!(text(&err, "code"), "invalid_version");
    let err = engine.changed(NOW, "no spaces", 1.0, "1").err().unwrap();
    assert_eq!(text(&err, "code"), "invalid_thread_id");
}

#[wasm_bindgen_test]
fn a_failed_or_unreadable_read_answers_internal() {
    let mut engine = WasmEngine::new(CONFIG, 1.0).unwrap();
    create_request(&mut engine, "t-1");
    let read = next(&mut engine, "read");
    engine
        .read_failed(NOW, number(&read, "read"), "disk on fire".into())
        .unwrap();
    let answer = next(&mut engine, "respond");
    assert_eq!(number(&answer, "status"), 500.0);
    assert!(text(&answer, "body").contains("internal"));

    create_request(&mut engine, "t-2");
    let read = next(&mut engine, "read");
    let err = engine
        .read_done(NOW, number(&read, "read"), r#"{"thread":"#)
        .err()
        .unwrap();
    assert_eq!(text(&err, "code"), "invalid_read_result");
    assert_eq!(number(&next(&mut engine, "respond"), "status"), 500.0);
}

#[wasm_bindgen_test]
fn a_subscriber_gets_opened_backlog_and_live_frames() {
    let storage = Storage::default();
    let mut engine = WasmEngine::new(CONFIG, 1.0).unwrap();
    http(
        &mut engine,
        &storage,
        "POST",
        "/v1/threads",
        r#"{"threadId":"t-1"}"#,
    );
    http(
        &mut engine,
        &storage,
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
        for out in drain(&mut engine, &storage) {
            match text(&out, "kind").as_str() {
                "send" => frames.push(JSON::parse(&text(&out, "frame")).unwrap()),
                "sendAll" => {
                    assert_eq!(recipients(&out), [3]);
                    frames.push(JSON::parse(&text(&out, "frame")).unwrap());
                }
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
        .map(|f| number(&get(f, "event"), "seq"))
        .collect();
    assert_eq!(seqs, [1.0, 2.0]);
}

/// The connections of a `sendAll` output.
fn recipients(out: &JsValue) -> Vec<u32> {
    Array::from(&get(out, "conns"))
        .iter()
        .map(|c| c.as_f64().unwrap() as u32)
        .collect()
}

/// The frames of `conn` in what `engine` outputs next (drains answered).
fn frames_of(engine: &mut WasmEngine, storage: &Storage, conn: u32) -> Vec<JsValue> {
    let mut frames = Vec::new();
    for _ in 0..4 {
        for out in drain(engine, storage) {
            match text(&out, "kind").as_str() {
                "send" if number(&out, "conn") as u32 == conn => {
                    frames.push(JSON::parse(&text(&out, "frame")).unwrap());
                }
                "sendAll" if recipients(&out).contains(&conn) => {
                    frames.push(JSON::parse(&text(&out, "frame")).unwrap());
                }
                "wantDrained" => engine.drained(NOW, conn).unwrap(),
                _ => {}
            }
        }
    }
    frames
}

#[wasm_bindgen_test]
fn a_socket_resumes_on_a_new_engine_where_it_stood() {
    let storage = Storage::default();
    let mut engine = WasmEngine::new(CONFIG, 1.0).unwrap();
    http(
        &mut engine,
        &storage,
        "POST",
        "/v1/threads",
        r#"{"threadId":"t-1"}"#,
    );
    let append = r#"{"type":"run_started","runId":"a"}"#;
    http(
        &mut engine,
        &storage,
        "POST",
        "/v1/threads/t-1/events",
        append,
    );
    engine
        .open_threads(NOW, 3, Some("dev-alice".into()))
        .unwrap();
    engine
        .frame(
            NOW,
            3,
            r#"{"type":"thread.subscribe","threadId":"t-1","fromSeq":1}"#,
        )
        .unwrap();
    assert_eq!(frames_of(&mut engine, &storage, 3).len(), 2);
    let positions = Array::from(&engine.thread_subscriptions(3));
    assert_eq!(
        JSON::stringify(&positions).unwrap().as_string().unwrap(),
        r#"[["t-1",2]]"#
    );
    assert!(engine.thread_subscriptions(4).is_undefined());

    let mut again = WasmEngine::new(CONFIG, 2.0).unwrap();
    let bad = again
        .resume_threads(NOW, 5, Some("dev-alice".into()), vec!["t-1".into()], vec![])
        .err()
        .unwrap();
    assert_eq!(text(&bad, "code"), "invalid_subscriptions");
    again
        .resume_threads(
            NOW,
            5,
            Some("dev-alice".into()),
            vec!["t-1".into()],
            vec![2.0],
        )
        .unwrap();
    assert!(
        frames_of(&mut again, &storage, 5).is_empty(),
        "no second opened frame"
    );
    again
        .handle_http(
            NOW,
            8,
            "POST",
            "/v1/threads/t-1/events",
            "",
            Some("Bearer dev-alice".into()),
            None,
            append.as_bytes(),
        )
        .unwrap();
    let frames = frames_of(&mut again, &storage, 5);
    let seqs: Vec<f64> = frames
        .iter()
        .map(|f| number(&get(f, "event"), "seq"))
        .collect();
    assert_eq!(seqs, [2.0]);
}

#[wasm_bindgen_test]
fn a_silent_peer_is_dropped_without_a_close_code() {
    let config = r#"{"auth":{"tokens":[{"token":"dev-alice","principal":"alice"}]},
        "heartbeat":{"ping_interval_ms":10,"pong_timeout_ms":10}}"#;
    let mut engine = WasmEngine::new(config, 1.0).unwrap();
    engine
        .open_threads(NOW, 1, Some("dev-alice".into()))
        .unwrap();
    let mut close = None;
    for _ in 0..10 {
        let due = engine.poll_timeout().expect("a heartbeat deadline");
        engine.tick(due).unwrap();
        loop {
            let out = engine.poll_output().unwrap();
            if out.is_undefined() {
                break;
            }
            if text(&out, "kind") == "close" {
                close = Some(out);
            }
        }
        if close.is_some() {
            break;
        }
    }
    let close = close.expect("the silent peer is closed");
    assert_eq!(number(&close, "conn"), 1.0);
    assert!(get(&close, "code").is_null(), "dropped: no close frame");
}

#[wasm_bindgen_test]
fn a_socket_for_an_unknown_app_is_refused_before_the_upgrade() {
    let engine = WasmEngine::new(CONFIG, 1.0).unwrap();
    let accepted = engine.channel_handshake(Some("app-key".into()), true, None, None);
    assert!(get(&accepted, "accepted").is_object());
    assert!(get(&accepted, "refused").is_undefined());
    let refused = get(
        &engine.channel_handshake(Some("nope".into()), true, None, None),
        "refused",
    );
    assert_eq!(get(&refused, "status").as_f64(), Some(404.0));
    assert_eq!(text(&refused, "body"), "Application not found");
    assert_eq!(
        get(
            &get(
                &engine.channel_handshake(None, false, None, None),
                "refused"
            ),
            "status"
        )
        .as_f64(),
        Some(400.0)
    );
}
