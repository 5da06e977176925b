//! Clients for crash loops: they append over HTTP and `/v1/ws`, with and
//! without idempotency keys, to servers that are being killed and
//! restarted, retrying keyed appends across disconnects (on the next
//! server of a cluster), and record what was acknowledged; [`verify`]
//! checks it against the history afterwards.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::http::HttpClient;
use crate::threads::{message_part, page_all};
use crate::ws::{WsClient, WsMessage};
use crate::{ALICE, HANG_TIMEOUT};

/// Pause between attempts against a server that is down.
const RETRY_PAUSE: Duration = Duration::from_millis(5);

/// What the clients share with the test: where the server listens now,
/// how many appends were acknowledged, and when to wind down.
#[derive(Clone)]
pub struct Shared {
    addrs: Arc<Mutex<Vec<SocketAddr>>>,
    acks: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Shared {
    /// Clients of the servers (cluster nodes) at `addrs`.
    pub fn new(addrs: Vec<SocketAddr>) -> Shared {
        Shared {
            addrs: Arc::new(Mutex::new(addrs)),
            acks: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Server `i` (re)started at `addr`.
    pub fn set_addr(&self, i: usize, addr: SocketAddr) {
        self.addrs.lock().unwrap_or_else(PoisonError::into_inner)[i] = addr;
    }

    /// The server a client's `attempt`-th try goes to: each failure moves
    /// it to the next one.
    fn addr(&self, attempt: usize) -> SocketAddr {
        let addrs = self.addrs.lock().unwrap_or_else(PoisonError::into_inner);
        addrs[attempt % addrs.len()]
    }

    /// Appends acknowledged so far.
    pub fn acks(&self) -> u64 {
        self.acks.load(Ordering::SeqCst)
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// One acknowledged event: 201/200 over HTTP, or the event delivered back
/// on the writer's own subscription over `/v1/ws`.
#[derive(Debug, Clone)]
pub struct Acked {
    /// The thread.
    pub thread: String,
    /// The append's unique text (its `part.delta`).
    pub marker: String,
    /// Whether it carried an idempotency key.
    pub keyed: bool,
    /// The event as acknowledged.
    pub event: Value,
}

/// What a client saw: its acknowledgements, every event delivered live to
/// it, and the markers it sent with a key.
#[derive(Debug, Default)]
pub struct Seen {
    /// Every acknowledgement.
    pub acked: Vec<Acked>,
    /// Every event delivered on a subscription, by thread.
    pub delivered: Vec<(String, Value)>,
    /// Every keyed append sent: `(thread, marker)`.
    pub keyed_markers: Vec<(String, String)>,
}

/// The unique text of an event appended by these clients.
pub fn marker_of(event: &Value) -> String {
    event["part"]["delta"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Appends over HTTP until told to stop. A keyed client retries each append
/// with the same key until it is acknowledged (201, or 200 for a repeat);
/// a plain one sends each append once and forgets those left unanswered.
pub async fn http_client(name: String, thread: &'static str, keyed: bool, shared: Shared) -> Seen {
    let mut seen = Seen::default();
    let path = format!("/v1/threads/{thread}/events");
    let mut client: Option<(SocketAddr, HttpClient)> = None;
    let mut attempt = 0usize;
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
            let addr = shared.addr(attempt);
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
                Ok(res) if res.status == 503 => attempt += 1,
                Ok(res) => panic!("{name}: unexpected {}: {}", res.status, res.text()),
                Err(_) => attempt += 1,
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
async fn ws_subscribe(
    shared: &Shared,
    attempt: usize,
    thread: &str,
    from_seq: u64,
) -> Option<WsClient> {
    let url = format!("ws://{}/v1/ws", shared.addr(attempt));
    let mut ws = WsClient::connect(&url, Some(ALICE)).await.ok()?;
    let frame = json!({"type": "thread.subscribe", "threadId": thread, "fromSeq": from_seq});
    ws.send(Message::text(frame.to_string())).await.ok()?;
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
pub async fn ws_client(name: String, thread: &'static str, keyed: bool, shared: Shared) -> Seen {
    let mut seen = Seen::default();
    let mut last_seq = 0u64;
    let mut pending: Option<(String, Value)> = None;
    let mut i = 0u64;
    let mut attempt = 0usize;
    'connect: loop {
        attempt += 1;
        let Some(mut ws) = ws_subscribe(&shared, attempt, thread, last_seq + 1).await else {
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
            if ws.send(Message::text(frame.to_string())).await.is_err() {
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
                if frame["type"] == "error" && frame["code"] == "unavailable" {
                    // The node lost its store or broker: try again elsewhere.
                    if !keyed {
                        pending = None;
                    }
                    continue 'connect;
                }
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

/// Per thread, a keyed and a plain HTTP appender, and one `/v1/ws`
/// appender: keyed on the first thread, plain on the others.
pub fn spawn_clients(shared: &Shared, threads: &[&'static str]) -> Vec<JoinHandle<Seen>> {
    let mut clients = Vec::new();
    for (n, thread) in threads.iter().enumerate() {
        for keyed in [true, false] {
            let tag = if keyed { "keyed" } else { "plain" };
            let name = format!("http-{tag}-{n}");
            clients.push(tokio::spawn(http_client(
                name,
                thread,
                keyed,
                shared.clone(),
            )));
        }
        let keyed = n == 0;
        let tag = if keyed { "keyed" } else { "plain" };
        let name = format!("ws-{tag}-{n}");
        clients.push(tokio::spawn(ws_client(name, thread, keyed, shared.clone())));
    }
    clients
}

/// Tells the clients to stop, lets every pending keyed append through and
/// gathers what they saw.
pub async fn wind_down(shared: &Shared, clients: Vec<JoinHandle<Seen>>) -> Seen {
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
    seen
}

/// What [`verify`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// Events stored, over all threads.
    pub stored: usize,
    /// Acknowledged or delivered events not found at their seq as
    /// acknowledged (counted, then asserted to be 0 by the caller).
    pub lost: usize,
}

/// Reads every thread's history through `client` and checks it: seqs have
/// no gap; no append is stored twice and every keyed one exactly once.
/// Counts the acknowledged and delivered events that are not at their seq
/// as acknowledged: the lost ones.
pub async fn verify(client: &HttpClient, threads: &[&str], seen: &Seen) -> Verified {
    let mut found = Verified { stored: 0, lost: 0 };
    for &t in threads {
        let (events, _) = page_all(client, t, 1000).await;
        found.stored += events.len();
        let seqs: Vec<u64> = events
            .iter()
            .map(|e| e["seq"].as_u64().expect("seq"))
            .collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "{t}: no gap"
        );
        let by_seq: BTreeMap<u64, &Value> = events
            .iter()
            .map(|e| (e["seq"].as_u64().expect("seq"), e))
            .collect();
        let acked = seen
            .acked
            .iter()
            .filter(|a| a.thread == t)
            .map(|a| (&a.event, a.marker.as_str()));
        let delivered = seen
            .delivered
            .iter()
            .filter(|(thread, _)| thread == t)
            .map(|(_, event)| (event, "delivered"));
        for (event, what) in acked.chain(delivered) {
            let seq = event["seq"].as_u64().expect("seq");
            if by_seq.get(&seq) != Some(&event) {
                eprintln!("{t} seq {seq} ({what}) lost: stored {:?}", by_seq.get(&seq));
                found.lost += 1;
            }
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
    found
}
