//! An append acknowledged to anyone (HTTP 201, or delivered to a
//! subscriber) survives `kill -9` of the server: many clients append
//! concurrently while a WebSocket subscriber watches, the server is killed
//! mid-load, and after a restart on the same SQLite file every acknowledged
//! or delivered event is there, at its seq, with no gap.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{http, request, Bubble, HANG_TIMEOUT};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const CLIENTS: usize = 16;
/// Acknowledged appends to wait for before the kill.
const ACKED_BEFORE_KILL: usize = 300;
const THREAD: &str = "durable";

async fn append_until_error(
    client: support::Http,
    url: String,
    worker: usize,
    acked: Arc<Mutex<Vec<(u64, String)>>>,
    stop: Arc<AtomicBool>,
) {
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let run = format!("w{worker}-{i}");
        let body = json!({ "type": "run_started", "runId": run }).to_string();
        match request(&client, "POST", &url, Some("dev-alice"), body).await {
            Ok(reply) if reply.status == 201 => {
                let seq = reply.json["event"]["seq"].as_u64().expect("seq in a 201");
                acked.lock().expect("lock").push((seq, run));
            }
            Ok(reply) => panic!("append answered {}: {}", reply.status, reply.text),
            // The server was killed: this append was never acknowledged.
            Err(_) => return,
        }
    }
}

/// Subscribes from seq 1 and records every delivered event until the
/// connection breaks.
async fn watch(
    url: String,
    delivered: Arc<Mutex<Vec<(u64, String)>>>,
    subscribed: Arc<AtomicBool>,
) {
    let mut req = url.into_client_request().expect("request");
    req.headers_mut()
        .insert("authorization", "Bearer dev-alice".parse().expect("header"));
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("connect");
    let subscribe = json!({ "type": "thread.subscribe", "threadId": THREAD, "fromSeq": 1 });
    ws.send(Message::text(subscribe.to_string()))
        .await
        .expect("subscribe");
    while let Some(Ok(msg)) = ws.next().await {
        let Message::Text(text) = msg else { continue };
        let frame: Value = serde_json::from_str(&text).expect("json frame");
        match frame["type"].as_str() {
            Some("thread.subscription_opened") => subscribed.store(true, Ordering::Release),
            Some("thread.event") => {
                let event = &frame["event"];
                let seq = event["seq"].as_u64().expect("seq");
                let run = event["runId"].as_str().unwrap_or_default().to_owned();
                delivered.lock().expect("lock").push((seq, run));
            }
            _ => panic!("unexpected frame {frame}"),
        }
    }
}

async fn all_events(server: &Bubble) -> Vec<Value> {
    let client = http();
    let mut events = Vec::new();
    let mut from = 1;
    loop {
        let url = server.url(&format!(
            "/v1/threads/{THREAD}/events?fromSeq={from}&limit=1000"
        ));
        let reply = request(&client, "GET", &url, Some("dev-alice"), "")
            .await
            .expect("page");
        assert_eq!(reply.status, 200, "{}", reply.text);
        let page = reply.json["events"].as_array().expect("events").clone();
        events.extend(page);
        match reply.json["nextSeq"].as_u64() {
            Some(next) => from = next,
            None => return events,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_mid_load_loses_no_acknowledged_append() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!(
        "sqlite:{}",
        dir.path().join("data").join("bubble.db").display()
    );
    let mut server = Bubble::start(dir.path(), &["--store", &store]);

    let client = http();
    let created = request(
        &client,
        "POST",
        &server.url("/v1/threads"),
        Some("dev-alice"),
        json!({ "threadId": THREAD }).to_string(),
    )
    .await
    .expect("create");
    assert_eq!(created.status, 201, "{}", created.text);

    let delivered = Arc::new(Mutex::new(Vec::new()));
    let subscribed = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(watch(
        server.ws_url("/v1/ws"),
        delivered.clone(),
        subscribed.clone(),
    ));
    let started = Instant::now();
    while !subscribed.load(Ordering::Acquire) {
        assert!(started.elapsed() < HANG_TIMEOUT, "no subscription_opened");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let url = server.url(&format!("/v1/threads/{THREAD}/events"));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            tokio::spawn(append_until_error(
                http(),
                url.clone(),
                w,
                acked.clone(),
                stop.clone(),
            ))
        })
        .collect();

    let started = Instant::now();
    while acked.lock().expect("lock").len() < ACKED_BEFORE_KILL {
        assert!(started.elapsed() < HANG_TIMEOUT, "appends did not progress");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.expect("worker");
    }
    watcher.await.expect("watcher");
    let acked = std::mem::take(&mut *acked.lock().expect("lock"));
    assert!(acked.len() >= ACKED_BEFORE_KILL);

    let server = Bubble::start(dir.path(), &["--store", &store]);
    let events = all_events(&server).await;
    for (i, event) in events.iter().enumerate() {
        assert_eq!(
            event["seq"].as_u64(),
            Some(i as u64 + 1),
            "gap or disorder at index {i}"
        );
        assert_eq!(event["threadId"], THREAD);
    }
    let delivered = std::mem::take(&mut *delivered.lock().expect("lock"));
    assert!(!delivered.is_empty(), "the subscriber saw no event");
    eprintln!(
        "{} appends acknowledged and {} delivered before the kill; {} events after restart",
        acked.len(),
        delivered.len(),
        events.len()
    );
    for (i, (seq, _)) in delivered.iter().enumerate() {
        assert_eq!(
            *seq,
            i as u64 + 1,
            "the subscriber saw a gap or a duplicate"
        );
    }
    for (seq, run) in acked.iter().chain(&delivered) {
        let index = usize::try_from(*seq - 1).expect("seq");
        let event = events.get(index).unwrap_or_else(|| {
            panic!(
                "acknowledged seq {seq} is missing after kill -9 ({} events)",
                events.len()
            )
        });
        assert_eq!(
            event["runId"],
            run.as_str(),
            "seq {seq} holds another event"
        );
    }
    let thread = request(
        &http(),
        "GET",
        &server.url(&format!("/v1/threads/{THREAD}")),
        Some("dev-alice"),
        "",
    )
    .await
    .expect("thread");
    assert_eq!(thread.json["headSeq"].as_u64(), Some(events.len() as u64));

    // The restarted server goes on from the durable head.
    let next = request(
        &http(),
        "POST",
        &server.url(&format!("/v1/threads/{THREAD}/events")),
        Some("dev-alice"),
        json!({ "type": "run_started", "runId": "after-restart" }).to_string(),
    )
    .await
    .expect("append after restart");
    assert_eq!(next.status, 201, "{}", next.text);
    assert_eq!(
        next.json["event"]["seq"].as_u64(),
        Some(events.len() as u64 + 1)
    );
}
