//! The Rust client over TLS: an `https://` server (the `bubble` binary
//! behind a TLS terminator whose certificate a test authority issued) is
//! reached once the client trusts that authority, for the WebSocket and
//! the HTTP API alike; without it, the certificate is refused.

use std::time::Duration;

use bubble_client::{Client, ConnectionState, Options};
use bubble_tests::threads::{create_thread, run_started};
use bubble_tests::{test_ca_der, Server, TlsTerminator, ALICE, HANG_TIMEOUT, TEST_CONFIG};
use futures_util::StreamExt as _;
use tokio::time::timeout;

fn options(root_certificates: Vec<Vec<u8>>) -> Options {
    Options {
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(200),
        system_roots: false,
        root_certificates,
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_server_is_reached_when_its_authority_is_trusted() {
    let server = Server::start(TEST_CONFIG);
    create_thread(&server.http(ALICE), "tls-1").await;
    let tls = TlsTerminator::start(server.addr()).await;

    let client = Client::connect_with(&tls.url(), ALICE, options(vec![test_ca_der()]))
        .await
        .expect("connect");
    let thread = client.thread("tls-1");
    let mut events = thread.subscribe(1);
    let through = timeout(HANG_TIMEOUT, events.caught_up())
        .await
        .expect("caught up before the hang timeout")
        .expect("the subscription opens over wss://");
    assert_eq!(through, 0);
    assert_eq!(*client.state().borrow(), ConnectionState::Open);

    let stored = timeout(HANG_TIMEOUT, thread.append(run_started("over-tls")))
        .await
        .expect("an answer before the hang timeout")
        .expect("the append lands over https://");
    assert_eq!(stored.seq, 1);
    let live = timeout(HANG_TIMEOUT, events.next())
        .await
        .expect("the event before the hang timeout")
        .expect("the subscription goes on")
        .expect("an event");
    assert_eq!(live, stored);

    let page = timeout(HANG_TIMEOUT, thread.history().next())
        .await
        .expect("a page before the hang timeout")
        .expect("one page")
        .expect("history over https://");
    assert_eq!(page.events, vec![stored]);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused() {
    let server = Server::start(TEST_CONFIG);
    create_thread(&server.http(ALICE), "tls-2").await;
    let tls = TlsTerminator::start(server.addr()).await;

    let client = Client::connect_with(&tls.url(), ALICE, options(Vec::new()))
        .await
        .expect("connect");
    let error = timeout(HANG_TIMEOUT, client.thread("tls-2").history().next())
        .await
        .expect("an answer before the hang timeout")
        .expect("one item")
        .expect_err("a server whose authority is not trusted");
    assert_eq!(error.code(), "network", "{error}");
    assert!(
        error.to_string().to_lowercase().contains("certificate"),
        "{error}"
    );
    assert_ne!(*client.state().borrow(), ConnectionState::Open);
    client.close().await;

    // A root certificate rustls cannot use is refused at connection.
    let refused = Client::connect_with(&tls.url(), ALICE, options(vec![b"not DER".to_vec()])).await;
    assert_eq!(
        refused.err().map(|e| e.code().to_owned()),
        Some("invalid_request".into())
    );
}
