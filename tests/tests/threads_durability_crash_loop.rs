//! Crash loop on SQLite: clients append over HTTP and `/v1/ws`, with and
//! without idempotency keys, retrying keyed appends across disconnects,
//! while the server is killed with SIGKILL and restarted again and again.
//! Afterwards every acknowledged event is at its acknowledged seq, seqs
//! have no gap, no keyed append is stored twice, and the file passes
//! `PRAGMA integrity_check`.
//!
//! `BUBBLE_CRASH_CYCLES` sets the number of kill/restart cycles (default
//! 100); e.g. `BUBBLE_CRASH_CYCLES=1000 cargo test -p bubble-tests --test
//! threads_durability_crash_loop` is the long mode.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bubble_tests::threads::{create_thread, message_part, page_all};
use bubble_tests::{HttpClient, Server, WsClient, WsMessage, ALICE, HANG_TIMEOUT, TEST_CONFIG};
use serde_json::{json, Value};

const THREADS: [&str; 2] = ["crash-a", "crash-b"];
/// Acknowledgements to wait for between two kills.
const ACKS_PER_CYCLE: u64 = 6;
/// Pause between attempts against a server that is down.
const RETRY_PAUSE: Duration = Duration::from_millis(5);

fn cycles() -> u64 {
    std::env::var("BUBBLE_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// What the clients share with the test: where the server listens now,
/// how many appends were acknowledged, and when to wind down.
#[derive(Clone)]
struct Shared {
    addr: Arc<Mutex<SocketAddr>>,
    acks: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Shared {
    fn addr(&self) -> SocketAddr {
        *self.addr.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// One acknowledged event: 201/200 over HTTP, or the event delivered back
/// on the writer's own subscription over `/v1/ws`.
#[derive(Debug, Clone)]
struct Acked {
    thread: String,
    marker: String,
    keyed: bool,
    event: Value,
}

/// What a client saw: its acknowledgements, every event delivered live to
/// it, and the markers it sent with a key.
#[derive(Debug, Default)]
struct Seen {
    acked: Vec<Acked>,
    delivered: Vec<(String, Value)>,
    keyed_markers: Vec<(String, String)>,
}

fn marker_of(event: &Value) -> String {
    event["part"]["delta"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Appends over HTTP until told to stop. A keyed client retries each append
/// with the same key until it is acknowledged (201, or 200 for a repeat);
/// a plain one sends each append once and forgets those left unanswered.
async fn http_client(name: String, thread: &'static str, keyed: bool, shared: Shared) -> Seen {
    let mut seen = Seen::default();
    let path = format!("/v1/threads/{thread}/events");
    let mut client: Option<(SocketAddr, HttpClient)> = None;
    for i in 0.. {
        if shared.stopping() {
            break;
        }
        let marker = format!("{name}-{i}");
        let key = format!("key-{marker}");
        let body = message_part(&name, &marker).to_string().into_bytes();
        if keyed {
            seen.keyed_markers.push((thread.to_owned(), marker.clone()));
        }
        loop {
            let addr = shared.addr();
            if client.as_ref().map(|(a, _)| *a) != Some(addr) {
                client = Some((
                    addr,
                    HttpClient::new(&format!("http://{addr}"), Some(ALICE)),
                ));
            }
            let http = &client.as_ref().expect("client").1;
            let mut headers = vec![("content-type", "application/json")];
            if keyed {
                headers.push(("idempotency-key", &key));
            }
            match http
                .try_request("POST", &path, &headers, body.clone())
                .await
            {
                Ok(res) if res.status == 201 || (keyed && res.status == 200) => {
                    let event = res.json()["event"].clone();
                    assert_eq!(marker_of(&event), marker, "{event}");
                    seen.acked.push(Acked {
                        thread: thread.to_owned(),
                        marker,
                        keyed,
                        event,
                    });
                    shared.acks.fetch_add(1, Ordering::SeqCst);
                    break;
                }
                Ok(res) if res.status == 503 => {}
                Ok(res) => panic!("{name}: unexpected {}: {}", res.status, res.text()),
                Err(_) => {}
            }
            if !keyed {
                break;
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
    seen
}

/// Connects and subscribes to `thread` from `from_seq`; `None` while the
/// server is down or the connection drops before the subscription opens.
async fn ws_subscribe(shared: &Shared, thread: &str, from_seq: u64) -> Option<WsClient> {
    let url = format!("ws://{}/v1/ws", shared.addr());
    let mut ws = WsClient::connect(&url, Some(ALICE)).await.ok()?;
    let frame = json!({"type": "thread.subscribe", "threadId": thread, "fromSeq": from_seq});
    ws.send(bubble_tests::Message::text(frame.to_string()))
        .await
        .ok()?;
    match ws.recv().await {
        WsMessage::Text(text) => {
            let opened: Value = serde_json::from_str(&text).expect("JSON frame");
            assert_eq!(opened["type"], "thread.subscription_opened", "{opened}");
            Some(ws)
        }
        _ => None,
    }
}

/// Appends over `/v1/ws` (fire-and-forget) and watches its own
/// subscription: an append is acknowledged when its event comes back. On a
/// disconnect it reconnects, subscribes from the seq after the last one it
/// saw (no gap, no duplicate) and, when keyed, sends the pending append
/// again with its key.
async fn ws_client(name: String, thread: &'static str, keyed: bool, shared: Shared) -> Seen {
    let mut seen = Seen::default();
    let mut last_seq = 0u64;
    let mut pending: Option<(String, Value)> = None;
    let mut i = 0u64;
    'connect: loop {
        let Some(mut ws) = ws_subscribe(&shared, thread, last_seq + 1).await else {
            if shared.stopping() && pending.is_none() {
                break;
            }
            tokio::time::sleep(RETRY_PAUSE).await;
            continue;
        };
        loop {
            if pending.is_none() {
                if shared.stopping() {
                    break 'connect;
                }
                let marker = format!("{name}-{i}");
                i += 1;
                let mut event = message_part(&name, &marker);
                if keyed {
                    event["idempotencyKey"] = json!(format!("key-{marker}"));
                    seen.keyed_markers.push((thread.to_owned(), marker.clone()));
                }
                let frame = json!({"type": "thread.append", "threadId": thread, "event": event});
                pending = Some((marker, frame));
            }
            let (marker, frame) = pending.clone().expect("pending append");
            if ws
                .send(bubble_tests::Message::text(frame.to_string()))
                .await
                .is_err()
            {
                continue 'connect;
            }
            // Read until our event comes back or the connection drops.
            loop {
                let WsMessage::Text(text) = ws.recv().await else {
                    if !keyed {
                        pending = None;
                    }
                    continue 'connect;
                };
                let frame: Value = serde_json::from_str(&text).expect("JSON frame");
                assert_eq!(frame["type"], "thread.event", "{name}: {frame}");
                let event = frame["event"].clone();
                let seq = event["seq"].as_u64().expect("seq");
                assert_eq!(seq, last_seq + 1, "{name}: delivered without gap: {event}");
                last_seq = seq;
                seen.delivered.push((thread.to_owned(), event.clone()));
                if marker_of(&event) == marker {
                    seen.acked.push(Acked {
                        thread: thread.to_owned(),
                        marker: marker.clone(),
                        keyed,
                        event,
                    });
                    shared.acks.fetch_add(1, Ordering::SeqCst);
                    pending = None;
                    break;
                }
            }
        }
    }
    seen
}

/// Kills and restarts the server `cycles` times, each time once
/// [`ACKS_PER_CYCLE`] more appends were acknowledged, after a short pause
/// that moves the kill around inside the commit cycle.
fn crash_loop(server: &mut Server, shared: &Shared, cycles: u64) {
    for cycle in 0..cycles {
        let target = shared.acks.load(Ordering::SeqCst) + ACKS_PER_CYCLE;
        let deadline = std::time::Instant::now() + HANG_TIMEOUT;
        while shared.acks.load(Ordering::SeqCst) < target {
            assert!(
                std::time::Instant::now() < deadline,
                "cycle {cycle}: appends hang"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_micros((cycle * 7919) % 4000));
        server.kill9();
        server.restart();
        *shared.addr.lock().unwrap_or_else(PoisonError::into_inner) = server.addr();
    }
}

fn integrity_check(server: &Server) {
    let conn = rusqlite::Connection::open(server.db_path()).expect("open the database");
    let verdict: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity_check");
    assert_eq!(verdict, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_events_survive_repeated_kill9() {
    let mut server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    for t in THREADS {
        create_thread(&alice, t).await;
    }
    let shared = Shared {
        addr: Arc::new(Mutex::new(server.addr())),
        acks: Arc::new(AtomicU64::new(0)),
        stop: Arc::new(AtomicBool::new(false)),
    };
    let mut clients = Vec::new();
    for (n, thread) in THREADS.iter().enumerate() {
        for keyed in [true, false] {
            let tag = if keyed { "keyed" } else { "plain" };
            let s = shared.clone();
            clients.push(tokio::spawn(http_client(
                format!("http-{tag}-{n}"),
                thread,
                keyed,
                s,
            )));
        }
        let keyed = n == 0;
        let tag = if keyed { "keyed" } else { "plain" };
        let s = shared.clone();
        clients.push(tokio::spawn(ws_client(
            format!("ws-{tag}-{n}"),
            thread,
            keyed,
            s,
        )));
    }

    let cycles = cycles();
    let loop_shared = shared.clone();
    let mut server = tokio::task::spawn_blocking(move || {
        crash_loop(&mut server, &loop_shared, cycles);
        server
    })
    .await
    .expect("crash loop");

    // Let every keyed append still pending get through, then crash once more.
    shared.stop.store(true, Ordering::SeqCst);
    let mut seen = Seen::default();
    for client in clients {
        let mine = tokio::time::timeout(HANG_TIMEOUT, client)
            .await
            .expect("clients wind down")
            .expect("client");
        seen.acked.extend(mine.acked);
        seen.delivered.extend(mine.delivered);
        seen.keyed_markers.extend(mine.keyed_markers);
    }
    server.kill9();
    integrity_check(&server);
    server.restart();

    let alice = server.http(ALICE);
    let mut stored = 0;
    for t in THREADS {
        let (events, _) = page_all(&alice, t, 1000).await;
        stored += events.len();
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "{t}: no gap"
        );
        let by_seq: BTreeMap<u64, &Value> = events
            .iter()
            .map(|e| (e["seq"].as_u64().unwrap(), e))
            .collect();
        for acked in seen.acked.iter().filter(|a| a.thread == t) {
            let seq = acked.event["seq"].as_u64().unwrap();
            assert_eq!(
                by_seq.get(&seq),
                Some(&&acked.event),
                "{t} seq {seq} was acknowledged ({})",
                acked.marker
            );
        }
        for (_, event) in seen.delivered.iter().filter(|(thread, _)| thread == t) {
            let seq = event["seq"].as_u64().unwrap();
            assert_eq!(
                by_seq.get(&seq),
                Some(&event),
                "{t} seq {seq} was delivered"
            );
        }
        let mut copies: HashMap<String, usize> = HashMap::new();
        for event in &events {
            *copies.entry(marker_of(event)).or_default() += 1;
        }
        for (marker, n) in &copies {
            assert_eq!(*n, 1, "{t}: {marker} is stored once");
        }
        for (_, marker) in seen.keyed_markers.iter().filter(|(thread, _)| thread == t) {
            assert_eq!(
                copies.get(marker),
                Some(&1),
                "{t}: keyed {marker} stored exactly once"
            );
        }
    }
    let keyed_acks = seen.acked.iter().filter(|a| a.keyed).count();
    assert!(
        seen.acked.len() as u64 >= cycles * ACKS_PER_CYCLE,
        "{} acks",
        seen.acked.len()
    );
    assert!(
        keyed_acks > 0 && keyed_acks < seen.acked.len(),
        "both kinds acknowledged"
    );
    eprintln!(
        "crash loop: {cycles} kill -9 cycles, {} acknowledged ({keyed_acks} keyed), {stored} stored, 0 lost",
        seen.acked.len()
    );
}

/// A kill -9 cannot notice a weaker sync level (the page cache survives
/// the process): the server reports the settings SQLite runs its writer
/// with, and the file is in WAL mode.
#[test]
fn the_server_runs_sqlite_in_wal_mode_with_synchronous_full() {
    let mut server = Server::start(TEST_CONFIG);
    let logs = server.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("sqlite durability"))
        .unwrap_or_else(|| panic!("no durability line:\n{logs}"));
    assert!(line.contains("journal_mode=wal"), "{line}");
    assert!(line.contains("synchronous=2"), "FULL is 2: {line}");
    server.terminate();
    let conn = rusqlite::Connection::open(server.db_path()).expect("open the database");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");
}
