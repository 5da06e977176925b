//! The Rust client (`clients/rust`) against the real `bubble` binary on
//! SQLite, reached through a TCP proxy the test cuts: a subscription
//! resumes after its connection is cut mid-stream and after the server is
//! killed and restarted on the same database file, yielding every event
//! once and in order; appends made while the server is unreachable land
//! exactly once, each answered with its stored event.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bubble_client::{Client, ConnectionState, Event, Options, Subscription, TokenSource};
use bubble_tests::threads::{append, create_thread, page_all, run_started};
use bubble_tests::{HttpClient, Proxy, Server, ALICE, HANG_TIMEOUT, TEST_CONFIG};
use futures_util::future::join_all;
use futures_util::StreamExt as _;
use serde_json::Value;
use tokio::time::timeout;

/// Short reconnection delays, so a test spends its time on behaviour.
fn options() -> Options {
    Options {
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(200),
        ..Options::default()
    }
}

async fn connect(proxy: &Proxy, tokens: impl Into<TokenSource>) -> Client {
    let url = format!("http://{}", proxy.addr());
    Client::connect_with(&url, tokens, options())
        .await
        .expect("connect")
}

/// The next event of `subscription`; fails on an error, an end or a hang.
async fn next_event(subscription: &mut Subscription) -> Event {
    timeout(HANG_TIMEOUT, subscription.next())
        .await
        .expect("an event before the hang timeout")
        .expect("the subscription goes on")
        .expect("an event, not an error")
}

/// Waits until the client's state satisfies `wanted`.
async fn wait_state(client: &Client, what: &str, wanted: impl FnMut(&ConnectionState) -> bool) {
    let mut state = client.state();
    timeout(HANG_TIMEOUT, state.wait_for(wanted))
        .await
        .unwrap_or_else(|_| panic!("the client never became {what}"))
        .expect("the client runs");
}

/// Reads from `subscription` until it has yielded `count` events in all.
async fn collect(subscription: &mut Subscription, seen: &mut Vec<Event>, count: usize) {
    while seen.len() < count {
        seen.push(next_event(subscription).await);
    }
}

/// Checks that `seen` is the whole stored thread, once and in order, then
/// that nothing else is pending: the next event is a fresh one, the
/// thread's next seq.
async fn assert_exactly_once(
    http: &HttpClient,
    thread: &str,
    subscription: &mut Subscription,
    seen: &[Event],
) {
    let (stored, next) = page_all(http, thread, 1000).await;
    let seqs: Vec<u64> = seen.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..next).collect::<Vec<_>>());
    let values: Vec<&Value> = seen.iter().map(|e| &e.value).collect();
    assert_eq!(values, stored.iter().collect::<Vec<_>>());
    let sentinel = append(http, thread, &run_started("sentinel")).await;
    let after = next_event(subscription).await;
    assert_eq!(
        after.value, sentinel,
        "a duplicate or stray event came first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cut_mid_stream_resumes_every_event_once_in_order() {
    let server = Server::start(TEST_CONFIG);
    let proxy = Proxy::start(server.addr()).await;
    let alice = server.http(ALICE);
    create_thread(&alice, "cut-1").await;
    let refreshes = Arc::new(AtomicUsize::new(0));
    let counted = refreshes.clone();
    let tokens = TokenSource::refreshing(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Some(ALICE.to_owned()) }
    });
    let client = connect(&proxy, tokens).await;
    let mut subscription = client.thread("cut-1").subscribe(1);
    let through = timeout(HANG_TIMEOUT, subscription.caught_up()).await;
    assert_eq!(through.expect("caught up in time"), Ok(0));

    let mut seen = Vec::new();
    for i in 1..=60 {
        append(&alice, "cut-1", &run_started(&format!("run-{i}"))).await;
        if i == 20 || i == 40 {
            // Some events delivered, the rest in flight or still to come.
            collect(&mut subscription, &mut seen, i - 10).await;
            proxy.cut();
            proxy.restore();
        }
    }
    collect(&mut subscription, &mut seen, 60).await;
    assert_exactly_once(&alice, "cut-1", &mut subscription, &seen).await;
    assert_eq!(*client.state().borrow(), ConnectionState::Open);
    // Once at connection, then before every reconnection (two cuts at least).
    let refreshed = refreshes.load(Ordering::SeqCst);
    assert!(
        refreshed >= 3,
        "the token source was asked {refreshed} times"
    );
    client.close().await;
    assert_eq!(*client.state().borrow(), ConnectionState::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_made_while_the_server_is_unreachable_land_once() {
    let server = Server::start(TEST_CONFIG);
    let proxy = Proxy::start(server.addr()).await;
    let alice = server.http(ALICE);
    create_thread(&alice, "offline-1").await;
    let client = connect(&proxy, ALICE).await;
    let thread = client.thread("offline-1");
    let mut subscription = thread.subscribe(1);
    let through = timeout(HANG_TIMEOUT, subscription.caught_up()).await;
    assert_eq!(through.expect("caught up in time"), Ok(0));

    proxy.cut();
    wait_state(&client, "reconnecting", |s| {
        matches!(s, ConnectionState::Reconnecting { .. })
    })
    .await;
    let appends: Vec<_> = (0..8)
        .map(|i| thread.append(run_started(&format!("offline-{i}"))))
        .collect();
    let (stored, _) = page_all(&alice, "offline-1", 100).await;
    assert!(stored.is_empty(), "nothing lands while offline: {stored:?}");

    proxy.restore();
    wait_state(&client, "open", |s| *s == ConnectionState::Open).await;
    // Cut again while some appends may be on the wire: their retries carry
    // the same idempotency keys.
    proxy.cut();
    proxy.restore();
    let landed = timeout(HANG_TIMEOUT, join_all(appends))
        .await
        .expect("every append lands in time");
    let landed: Vec<Event> = landed
        .into_iter()
        .map(|a| a.expect("the append lands"))
        .collect();

    let (stored, _) = page_all(&alice, "offline-1", 100).await;
    let run_ids: Vec<&str> = stored.iter().filter_map(|e| e["runId"].as_str()).collect();
    let made: Vec<String> = (0..8).map(|i| format!("offline-{i}")).collect();
    assert_eq!(run_ids, made, "each append once, in the order made");
    let landed_values: Vec<&Value> = landed.iter().map(|e| &e.value).collect();
    assert_eq!(landed_values, stored.iter().collect::<Vec<_>>());

    let mut seen = Vec::new();
    collect(&mut subscription, &mut seen, 8).await;
    assert_eq!(seen, landed);
    assert_exactly_once(&alice, "offline-1", &mut subscription, &seen).await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_and_restarted_on_the_same_sqlite_file_resumes_once_in_order() {
    let mut server = Server::start(TEST_CONFIG);
    let proxy = Proxy::start(server.addr()).await;
    let alice = server.http(ALICE);
    create_thread(&alice, "restart-1").await;
    let client = connect(&proxy, ALICE).await;
    let thread = client.thread("restart-1");
    let mut subscription = thread.subscribe(1);
    let through = timeout(HANG_TIMEOUT, subscription.caught_up()).await;
    assert_eq!(through.expect("caught up in time"), Ok(0));

    for i in 1..=15 {
        append(&alice, "restart-1", &run_started(&format!("before-{i}"))).await;
    }
    let mut seen = Vec::new();
    collect(&mut subscription, &mut seen, 5).await;
    server.kill9();
    let pending = thread.append(run_started("during-restart"));
    wait_state(&client, "reconnecting", |s| {
        matches!(s, ConnectionState::Reconnecting { .. })
    })
    .await;
    server.restart();
    proxy.retarget(server.addr());
    let alice = server.http(ALICE);
    for i in 1..=15 {
        append(&alice, "restart-1", &run_started(&format!("after-{i}"))).await;
    }
    let landed = timeout(HANG_TIMEOUT, pending)
        .await
        .expect("the append lands in time")
        .expect("the append lands");

    collect(&mut subscription, &mut seen, 31).await;
    let (stored, _) = page_all(&alice, "restart-1", 100).await;
    let during: Vec<&Value> = stored
        .iter()
        .filter(|e| e["runId"] == "during-restart")
        .collect();
    assert_eq!(during, vec![&landed.value], "the append landed once");
    assert_exactly_once(&alice, "restart-1", &mut subscription, &seen).await;
    client.close().await;
}
