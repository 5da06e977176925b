//! A token naming a `kid` the key set lacks: the engine asks for the set
//! (at most once per minimum interval), holds the request or socket until
//! it arrives, then decides it with the new set. Time is simulated.

mod common;

use base64::Engine as _;
use bubble_core::auth::KeySet;
use bubble_core::http::{HttpRequest, Method};
use bubble_core::{Input, JwksConfig, KeyRefresh, RequestId};
use common::{config, opened, Harness, Resp};
use ed25519_dalek::Signer as _;
use serde_json::{json, Value};

const EVERY_MS: u64 = 300_000;
const MIN_INTERVAL_MS: u64 = 10_000;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn key(seed: u8) -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
}

fn jwk(seed: u8) -> Value {
    json!({"kty": "OKP", "crv": "Ed25519", "kid": format!("k{seed}"),
           "x": b64(key(seed).verifying_key().as_bytes())})
}

fn keys(seeds: &[u8]) -> KeySet {
    let keys: Vec<Value> = seeds.iter().map(|s| jwk(*s)).collect();
    KeySet::parse(&json!({ "keys": keys }).to_string()).unwrap()
}

fn token(seed: u8, sub: &str) -> String {
    let header = b64(json!({"alg": "EdDSA", "kid": format!("k{seed}")})
        .to_string()
        .as_bytes());
    let claims = b64(json!({"sub": sub}).to_string().as_bytes());
    let input = format!("{header}.{claims}");
    format!(
        "{input}.{}",
        b64(&key(seed).sign(input.as_bytes()).to_bytes())
    )
}

fn harness() -> Harness {
    let mut config = config();
    config.auth.jwks = Some(JwksConfig {
        keys: None,
        refresh: Some(KeyRefresh {
            every_ms: EVERY_MS,
            min_interval_ms: MIN_INTERVAL_MS,
        }),
        claims: Default::default(),
    });
    let mut h = Harness::with_config(config);
    assert!(h.advance_to_timeout());
    assert_eq!(
        h.take_key_fetches(),
        1,
        "the first fetch is asked for at once"
    );
    h.input(Input::KeysLoaded { keys: keys(&[1]) });
    h
}

/// Sends `POST /v1/threads` with `token`; the answer, if any yet.
fn create(h: &mut Harness, req: u64, token: &str, thread: &str) -> (RequestId, Option<Resp>) {
    let req = RequestId(1_000 + req);
    let authorization = format!("Bearer {token}");
    let body = json!({ "threadId": thread }).to_string();
    let request = HttpRequest {
        method: Method::Post,
        path: "/v1/threads",
        query: "",
        authorization: Some(&authorization),
        idempotency_key: None,
        body: body.as_bytes(),
    };
    h.input(Input::Http { req, request });
    (req, h.response(req))
}

#[test]
fn a_request_with_a_new_kid_waits_for_the_fetch_it_starts() {
    let mut h = harness();
    let (_, known) = create(&mut h, 1, &token(1, "alice"), "t1");
    assert_eq!(known.unwrap().status, 201);
    h.advance(MIN_INTERVAL_MS);
    let (req, waiting) = create(&mut h, 2, &token(2, "bob"), "t2");
    assert!(waiting.is_none(), "held until the key set arrives");
    assert_eq!(h.take_key_fetches(), 1);
    // A socket with the same new kid waits for the same fetch; its frames queue.
    let conn = h.connect_with_token(Some(&token(2, "bob")));
    h.send(
        conn,
        json!({"type": "thread.subscribe", "threadId": "t2", "fromSeq": 1}),
    );
    assert!(h.frames(conn).is_empty());
    assert_eq!(h.take_key_fetches(), 0, "one fetch in flight at a time");
    h.input(Input::KeysLoaded {
        keys: keys(&[1, 2]),
    });
    assert_eq!(h.response(req).unwrap().status, 201);
    let frames = h.frames(conn);
    assert_eq!(frames.first(), Some(&opened("t2", 0)), "{frames:?}");
    assert!(h.is_open(conn));
}

#[test]
fn a_kid_still_unknown_after_the_fetch_is_refused() {
    let mut h = harness();
    h.advance(MIN_INTERVAL_MS);
    let (req, waiting) = create(&mut h, 1, &token(3, "eve"), "t1");
    assert!(waiting.is_none());
    let conn = h.connect_with_token(Some(&token(3, "eve")));
    h.input(Input::KeysLoaded { keys: keys(&[1]) });
    let refused = h.response(req).unwrap();
    refused.expect_error(401, "unauthorized");
    let frames = h.frames(conn);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["code"], "unauthorized");
    assert_eq!(h.close_code(conn), Some(1008));
    let (_, known) = create(&mut h, 2, &token(1, "alice"), "t2");
    assert_eq!(known.unwrap().status, 201, "others keep working");
}

#[test]
fn unknown_kids_within_the_interval_are_refused_at_once() {
    let mut h = harness();
    for n in 0..50 {
        let (_, answer) = create(&mut h, n, &token(9, "eve"), "t");
        answer.unwrap().expect_error(401, "unauthorized");
    }
    assert_eq!(
        h.take_key_fetches(),
        0,
        "a flood of unknown kids costs no fetch"
    );
    h.advance(MIN_INTERVAL_MS);
    let (req, waiting) = create(&mut h, 100, &token(9, "eve"), "t");
    assert!(waiting.is_none());
    assert_eq!(h.take_key_fetches(), 1);
    h.input(Input::KeysFailed);
    h.response(req).unwrap().expect_error(401, "unauthorized");
}

#[test]
fn a_removed_key_is_refused_after_the_scheduled_refresh() {
    let mut h = harness();
    assert_eq!(
        create(&mut h, 1, &token(1, "alice"), "t1")
            .1
            .unwrap()
            .status,
        201
    );
    assert!(h.advance_to_timeout());
    assert_eq!(h.now().0 - common::T0, EVERY_MS, "refreshed on schedule");
    assert_eq!(h.take_key_fetches(), 1);
    h.input(Input::KeysLoaded { keys: keys(&[2]) });
    let (_, refused) = create(&mut h, 2, &token(1, "alice"), "t2");
    refused.unwrap().expect_error(401, "unauthorized");
    assert_eq!(
        create(&mut h, 3, &token(2, "bob"), "t3").1.unwrap().status,
        201
    );
}

#[test]
fn a_fetch_the_host_never_answers_times_out() {
    let mut h = harness();
    h.advance(MIN_INTERVAL_MS);
    let (req, waiting) = create(&mut h, 1, &token(2, "bob"), "t");
    assert!(waiting.is_none());
    assert!(h.advance_to_timeout());
    assert_eq!(
        h.now().0 - common::T0,
        MIN_INTERVAL_MS + bubble_core::auth::refresh::FETCH_TIMEOUT_MS
    );
    h.response(req).unwrap().expect_error(401, "unauthorized");
}

#[test]
fn a_socket_closed_while_waiting_is_forgotten() {
    let mut h = harness();
    h.advance(MIN_INTERVAL_MS);
    let conn = h.connect_with_token(Some(&token(2, "bob")));
    h.disconnect(conn);
    h.input(Input::KeysLoaded {
        keys: keys(&[1, 2]),
    });
    assert!(h.frames(conn).is_empty());
    assert_eq!(h.engine.metrics().thread_connections, 0);
}
