//! The Rust client (`clients/rust`) against the real `bubble` binary:
//! history pages, scoped errors (a thread the caller may not read or write
//! fails on its own; other threads go on), requests the client refuses
//! itself, the token refresh hook, and a clean close.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bubble_client::{
    Client, ConnectionState, Error, Event, Options, Page, ScopedError, Subscription, TokenSource,
};
use bubble_tests::threads::{append, create_thread, grant, page_all, run_started};
use bubble_tests::{
    sign_jwt, unix_now, Proxy, Server, ALICE, BOB, CAROL, HANG_TIMEOUT, JWT_SECRET, TEST_CONFIG,
};
use futures_util::{Stream, StreamExt as _};
use serde_json::{json, Value};
use tokio::time::timeout;

fn options() -> Options {
    Options {
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(200),
        ..Options::default()
    }
}

async fn connect(server: &Server, tokens: impl Into<TokenSource>) -> Client {
    Client::connect_with(&server.base_url(), tokens, options())
        .await
        .expect("connect")
}

/// The next item of `stream`, failing on a hang.
async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    timeout(HANG_TIMEOUT, stream.next())
        .await
        .expect("an item before the hang timeout")
}

async fn next_event(subscription: &mut Subscription) -> Event {
    next(subscription)
        .await
        .expect("the subscription goes on")
        .expect("an event, not an error")
}

fn server_code(error: &Error) -> &str {
    match error {
        Error::Server { code, .. } => code,
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_pages_until_the_last() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "pages-1").await;
    for i in 1..=17 {
        append(&alice, "pages-1", &run_started(&format!("p-{i}"))).await;
    }
    let client = connect(&server, ALICE).await;
    let thread = client.thread("pages-1");

    let pages: Vec<Page> = thread
        .history()
        .limit(5)
        .map(|page| page.expect("a page"))
        .collect()
        .await;
    let sizes: Vec<usize> = pages.iter().map(|p| p.events.len()).collect();
    assert_eq!(sizes, [5, 5, 5, 2]);
    let nexts: Vec<Option<u64>> = pages.iter().map(|p| p.next_seq).collect();
    assert_eq!(nexts, [Some(6), Some(11), Some(16), None]);
    let (stored, _) = page_all(&alice, "pages-1", 100).await;
    let paged: Vec<&Value> = pages
        .iter()
        .flat_map(|p| p.events.iter().map(|e| &e.value))
        .collect();
    assert_eq!(paged, stored.iter().collect::<Vec<_>>());

    let tail: Vec<Page> = thread
        .history()
        .from_seq(16)
        .map(|page| page.expect("a page"))
        .collect()
        .await;
    assert_eq!(tail.len(), 1);
    let seqs: Vec<u64> = tail[0].events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [16, 17]);
    assert_eq!(tail[0].events[0].kind(), Some("run_started"));

    // A thread alice may not read: one error, then the stream ends.
    create_thread(&server.http(BOB), "bobs-1").await;
    let mut denied = client.thread("bobs-1").history();
    let error = next(&mut denied)
        .await
        .expect("an item")
        .expect_err("refused");
    assert_eq!(server_code(&error), "not_found");
    assert!(next(&mut denied).await.is_none());
    // The server's own refusal of a bad page size.
    let mut bad = thread.history().limit(0);
    let error = next(&mut bad).await.expect("an item").expect_err("refused");
    assert_eq!(server_code(&error), "invalid_request");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_or_unwritable_thread_fails_alone() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "open-1").await;
    create_thread(&alice, "shared-1").await;
    grant(&alice, "shared-1", "carol", "reader").await;
    create_thread(&server.http(BOB), "bobs-1").await;
    let client = connect(&server, CAROL).await;
    grant(&alice, "open-1", "carol", "member").await;
    let mut all_errors = client.errors();

    // A thread carol may not read: not_found, scoped to it.
    let bobs = client.thread("bobs-1");
    let mut errors = bobs.errors();
    let mut denied = bobs.subscribe(1);
    let error = next(&mut denied)
        .await
        .expect("an item")
        .expect_err("closed");
    assert_eq!(server_code(&error), "not_found");
    assert!(next(&mut denied).await.is_none(), "the stream ends");
    assert_eq!(denied.caught_up().await, Err(error));
    let scoped = next(&mut errors).await.expect("a scoped error");
    assert_eq!(scoped.thread.as_deref(), Some("bobs-1"));
    assert_eq!(scoped.code, "not_found");
    assert_eq!(next(&mut all_errors).await, Some(scoped));
    let refused = bobs.append(run_started("x")).await.expect_err("refused");
    assert_eq!(server_code(&refused), "not_found");

    // A thread carol reads but may not write: the append is forbidden, the
    // subscription goes on.
    let shared = client.thread("shared-1");
    let mut readable = shared.subscribe(1);
    assert_eq!(
        timeout(HANG_TIMEOUT, readable.caught_up())
            .await
            .expect("in time"),
        Ok(0)
    );
    let refused = shared.append(run_started("x")).await.expect_err("refused");
    assert_eq!(server_code(&refused), "forbidden");
    let first = append(&alice, "shared-1", &run_started("by-alice")).await;
    assert_eq!(next_event(&mut readable).await.value, first);

    // The other thread is unaffected: appends land and stream live.
    let open = client.thread("open-1");
    let mut live = open.subscribe(1);
    let stored = open.append(run_started("by-carol")).await.expect("lands");
    assert_eq!(stored.seq, 1);
    assert_eq!(next_event(&mut live).await, stored);
    let invalid = open
        .append(json!({"type": "participant_joined"}))
        .await
        .expect_err("a server-emitted type");
    assert_eq!(server_code(&invalid), "invalid_request");

    // Losing read access ends that subscription alone, with the reason the
    // server gave and its message.
    let (status, body) = alice.delete("/v1/threads/shared-1/grants/carol").await;
    assert_eq!(status, 204, "{body}");
    let ended = next(&mut readable)
        .await
        .expect("an item")
        .expect_err("closed");
    assert_eq!(server_code(&ended), "not_found");
    let revoked: ScopedError = next(&mut all_errors).await.expect("the error frame");
    assert_eq!(revoked.thread.as_deref(), Some("shared-1"));
    assert_eq!(
        ended,
        Error::Server {
            code: revoked.code,
            message: revoked.message
        }
    );
    let second = open.append(run_started("again")).await.expect("lands");
    assert_eq!(next_event(&mut live).await, second);
    assert_eq!(*client.state().borrow(), ConnectionState::Open);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_client_refuses_itself() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "t-1").await;
    let client = connect(&server, ALICE).await;
    let thread = client.thread("t-1");

    let mut first = thread.subscribe(1);
    assert_eq!(
        timeout(HANG_TIMEOUT, first.caught_up())
            .await
            .expect("in time"),
        Ok(0)
    );
    // One subscription per thread; dropping the refused one leaves the first.
    let mut second = thread.subscribe(1);
    assert_eq!(
        next(&mut second).await.expect("an item"),
        Err(Error::AlreadySubscribed("t-1".into()))
    );
    drop(second);
    let stored = thread.append(run_started("r")).await.expect("lands");
    assert_eq!(next_event(&mut first).await, stored);

    let mut zero = client.thread("t-2").subscribe(0);
    assert_eq!(
        next(&mut zero).await.expect("an item"),
        Err(Error::InvalidFromSeq)
    );
    let bad = client.thread("not a thread id");
    let mut bad_subscription = bad.subscribe(1);
    let invalid = Error::InvalidThreadId("not a thread id".into());
    assert_eq!(
        next(&mut bad_subscription).await.expect("an item"),
        Err(invalid.clone())
    );
    assert_eq!(bad.append(run_started("r")).await, Err(invalid.clone()));
    assert_eq!(invalid.code(), "invalid_request");
    assert_eq!(
        thread.append(json!(["not", "an", "object"])).await,
        Err(Error::InvalidEvent)
    );
    for url in [
        "ftp://127.0.0.1:1",
        "http://127.0.0.1:1/prefix",
        "not a url",
    ] {
        let refused = Client::connect(url, ALICE).await.err();
        assert!(
            matches!(refused, Some(Error::InvalidUrl(_))),
            "{url}: {refused:?}"
        );
    }
    client.close().await;
}

/// A token source that answers `first` once, then alice's token; counts calls.
fn first_then_alice(first: String, asked: &Arc<AtomicUsize>) -> TokenSource {
    let counted = asked.clone();
    TokenSource::refreshing(move || {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        let token = if n == 0 {
            first.clone()
        } else {
            ALICE.to_owned()
        };
        async move { Some(token) }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_refused_at_connection_is_refreshed() {
    let server = Server::start(TEST_CONFIG);
    create_thread(&server.http(ALICE), "t-1").await;
    let asked = Arc::new(AtomicUsize::new(0));
    let client = connect(&server, first_then_alice("stale-token".into(), &asked)).await;
    let thread = client.thread("t-1");
    // The server upgrades the stale token's socket, then refuses it
    // (`unauthorized`, close 1008); an append posted meanwhile is answered
    // 401. Both go again with a fresh token.
    let stored = timeout(HANG_TIMEOUT, thread.append(run_started("r")))
        .await
        .expect("in time")
        .expect("lands with the fresh token");
    assert_eq!(stored.value["principalId"], "alice");
    let mut subscription = thread.subscribe(1);
    assert_eq!(next_event(&mut subscription).await, stored);
    assert!(asked.load(Ordering::SeqCst) >= 2);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_refused_as_unauthorized_is_retried_with_a_fresh_token() {
    let server = Server::start(TEST_CONFIG);
    create_thread(&server.http(ALICE), "t-1").await;
    let exp = unix_now() + 2;
    let short_lived = sign_jwt(JWT_SECRET, &json!({"sub": "alice", "exp": exp}));
    let asked = Arc::new(AtomicUsize::new(0));
    let client = connect(&server, first_then_alice(short_lived, &asked)).await;
    let mut state = client.state();
    timeout(
        HANG_TIMEOUT,
        state.wait_for(|s| *s == ConnectionState::Open),
    )
    .await
    .expect("in time")
    .expect("running");
    // The open socket outlives the token; the next HTTP append does not.
    while unix_now() <= exp {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stored = timeout(HANG_TIMEOUT, client.thread("t-1").append(run_started("r")))
        .await
        .expect("in time")
        .expect("lands after a refresh");
    assert_eq!(stored.value["principalId"], "alice");
    // Once at connection, once for the 401; the socket never dropped.
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    assert_eq!(*client.state().borrow(), ConnectionState::Open);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_fails_pending_appends_and_ends_streams() {
    let server = Server::start(TEST_CONFIG);
    create_thread(&server.http(ALICE), "t-1").await;
    let proxy = Proxy::start(server.addr()).await;
    proxy.cut();
    let url = format!("http://{}", proxy.addr());
    let client = Client::connect_with(&url, ALICE, options())
        .await
        .expect("connect");
    let thread = client.thread("t-1");
    let mut subscription = thread.subscribe(1);
    let pending = thread.append(run_started("never"));
    let mut state = client.state();
    timeout(
        HANG_TIMEOUT,
        state.wait_for(|s| matches!(s, ConnectionState::Reconnecting { .. })),
    )
    .await
    .expect("in time")
    .expect("running");

    client.close().await;
    assert_eq!(*client.state().borrow(), ConnectionState::Closed);
    assert_eq!(pending.await, Err(Error::Closed));
    assert!(next(&mut subscription).await.is_none(), "the stream ends");
    assert_eq!(subscription.caught_up().await, Err(Error::Closed));
    assert_eq!(thread.append(run_started("late")).await, Err(Error::Closed));
    let mut late = thread.subscribe(1);
    assert!(next(&mut late).await.is_none());
    client.close().await;
    let (stored, _) = page_all(&server.http(ALICE), "t-1", 100).await;
    assert!(stored.is_empty(), "nothing landed: {stored:?}");
}
