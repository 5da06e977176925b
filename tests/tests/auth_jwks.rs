//! The JWKS driver against a local identity provider: RS256, ES256 and
//! EdDSA tokens signed with keys generated here are accepted over HTTP and
//! on the `/v1/ws` upgrade; a key published after the server started is
//! picked up by the refresh an unknown `kid` triggers, a removed key is
//! refused after a refresh; wrong `iss`/`aud`, expired tokens and algorithm
//! confusion are refused with `unauthorized`, and others keep working. Over
//! `https://`, the key set is fetched when the server trusts the identity
//! provider's certificate authority (`SSL_CERT_FILE`), and not at all when
//! it does not.

use bubble_tests::threads::{
    append, create_thread, error_code, error_frame, expect_event, run_started, subscribe,
};
use bubble_tests::{
    jwks_document, sign_jwt, sign_jwt_with_header, test_ca_pem, unix_now, JwksServer, Server,
    SigningKey, TlsTerminator, WsClient, ALICE, JWT_SECRET, TEST_CONFIG,
};
use serde_json::{json, Value};

const ISSUER: &str = "https://idp.test/";
const AUDIENCE: &str = "bubble-api";

/// [`TEST_CONFIG`] (static tokens, HS256 secret) plus `[auth.jwks]` from
/// `source` (`url = …` or `file = …`), issuer and audience required.
fn config(source: &str, min_refresh_secs: u64) -> String {
    format!(
        "{TEST_CONFIG}\n[auth.jwks]\n{source}\nrefresh_secs = 3600\nmin_refresh_secs = {min_refresh_secs}\n\
         issuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\n"
    )
}

fn claims(sub: &str) -> Value {
    json!({"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "exp": unix_now() + 3600})
}

/// `GET /v1/threads` with `token`: the status and body.
async fn list(server: &Server, token: &str) -> (u16, Value) {
    server.http(token).get("/v1/threads").await
}

async fn expect_refused(server: &Server, name: &str, token: &str, message: &str) {
    let (status, body) = list(server, token).await;
    assert_eq!(status, 401, "{name}: {body}");
    assert_eq!(error_code(&body, "unauthorized"), message, "{name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_algorithm_is_accepted_over_http_and_websocket() {
    let keys = [
        SigningKey::rs256("rsa-1"),
        SigningKey::es256("ec-1"),
        SigningKey::ed_dsa("ed-1"),
    ];
    let idp = JwksServer::start(jwks_document(&keys.iter().collect::<Vec<_>>())).await;
    let server = Server::start(&config(&format!("url = \"{}\"", idp.url()), 0));
    for key in &keys {
        let sub = format!("user-{}", key.kid());
        let token = key.token(&claims(&sub));
        let thread = create_thread(&server.http(&token), &sub).await;
        assert_eq!(thread["threadId"], sub.as_str(), "{}", key.alg());
        let (status, grants) = server
            .http(&token)
            .get(&format!("/v1/threads/{sub}/grants"))
            .await;
        assert_eq!(status, 200, "{grants}");
        assert_eq!(
            grants["grants"][0]["principalId"],
            sub.as_str(),
            "the owner is `sub`"
        );
        let mut ws = WsClient::connect(&server.ws_url("/v1/ws"), Some(&token))
            .await
            .expect("upgrade");
        assert_eq!(subscribe(&mut ws, &sub, None).await, 0, "{}", key.alg());
        let url = server.ws_url(&format!("/v1/ws?access_token={token}"));
        let mut ws = WsClient::connect(&url, None).await.expect("upgrade");
        assert_eq!(
            subscribe(&mut ws, &sub, None).await,
            0,
            "{} via access_token",
            key.alg()
        );
    }
    let (status, _) = list(&server, ALICE).await;
    assert_eq!(status, 200, "static tokens still work beside the JWKS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_keys_are_picked_up_and_removed_keys_refused() {
    let old = SigningKey::es256("2024-01");
    let new = SigningKey::rs256("2024-02");
    let later = SigningKey::ed_dsa("2024-03");
    let idp = JwksServer::start(jwks_document(&[&old])).await;
    let server = Server::start(&config(&format!("url = \"{}\"", idp.url()), 0));
    assert_eq!(list(&server, &old.token(&claims("u1"))).await.0, 200);
    let fetched = idp.fetches();

    // A key published after the start: the first token naming it waits for
    // the refresh it triggers, and is accepted.
    idp.publish(jwks_document(&[&old, &new]));
    assert_eq!(list(&server, &new.token(&claims("u2"))).await.0, 200);
    assert_eq!(idp.fetches(), fetched + 1, "one refresh for the new kid");
    assert_eq!(list(&server, &new.token(&claims("u2"))).await.0, 200);
    assert_eq!(idp.fetches(), fetched + 1, "a known kid needs no refresh");

    // The same on the socket upgrade: it waits, then is authenticated.
    idp.publish(jwks_document(&[&old, &new, &later]));
    let mut ws = WsClient::connect(&server.ws_url("/v1/ws"), Some(&later.token(&claims("u3"))))
        .await
        .expect("upgrade");
    create_thread(&server.http(&later.token(&claims("u3"))), "rotated").await;
    assert_eq!(subscribe(&mut ws, "rotated", None).await, 0);

    // The old key is withdrawn: refused once a refresh (here, the one an
    // unknown kid triggers) has brought the new set.
    idp.publish(jwks_document(&[&new, &later]));
    assert_eq!(
        list(&server, &old.token(&claims("u1"))).await.0,
        200,
        "not refreshed yet"
    );
    let bogus = SigningKey::es256("nobody-knows");
    expect_refused(
        &server,
        "unknown kid",
        &bogus.token(&claims("u4")),
        "The bearer token's signing key is unknown.",
    )
    .await;
    expect_refused(
        &server,
        "removed key",
        &old.token(&claims("u1")),
        "The bearer token's signing key is unknown.",
    )
    .await;
    assert_eq!(list(&server, &new.token(&claims("u2"))).await.0, 200);
    append(
        &server.http(&later.token(&claims("u3"))),
        "rotated",
        &run_started("r1"),
    )
    .await;
    expect_event(&mut ws, "rotated", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unknown_kids_costs_the_identity_provider_nothing() {
    let key = SigningKey::ed_dsa("k1");
    let idp = JwksServer::start(jwks_document(&[&key])).await;
    let server = Server::start(&config(&format!("url = \"{}\"", idp.url()), 3600));
    assert_eq!(list(&server, &key.token(&claims("u"))).await.0, 200);
    assert_eq!(idp.fetches(), 1, "the fetch at start");
    for n in 0..30 {
        let bogus = SigningKey::ed_dsa(&format!("bogus-{n}"));
        expect_refused(
            &server,
            "bogus kid",
            &bogus.token(&claims("u")),
            "The bearer token's signing key is unknown.",
        )
        .await;
    }
    assert_eq!(
        idp.fetches(),
        1,
        "within min_refresh_secs no kid triggers a fetch"
    );
    assert_eq!(list(&server, &key.token(&claims("u"))).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_claims_and_algorithm_confusion_are_refused() {
    let rsa = SigningKey::rs256("rsa");
    let ec = SigningKey::es256("ec");
    let idp = JwksServer::start(jwks_document(&[&rsa, &ec])).await;
    let server = Server::start(&config(&format!("url = \"{}\"", idp.url()), 0));
    let now = unix_now();
    let good = claims("mallory");
    let with = |change: Value| {
        let mut c = good.clone();
        for (k, v) in change.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    };
    let header = |alg: &str, kid: &str| json!({"alg": alg, "kid": kid, "typ": "JWT"});
    let input_of = |token: &str| token.rsplit_once('.').unwrap().0.to_owned();
    let unsigned_none = format!(
        "{}.",
        input_of(&ec.token_with_header(&header("none", "ec"), &good))
    );
    let hmac_with_public_key = |key: &SigningKey| {
        // The public key's bytes as the HMAC secret (lossless as Latin-1).
        let secret: String = key.public_bytes().iter().map(|b| char::from(*b)).collect();
        sign_jwt_with_header(&secret, &header("HS256", key.kid()), &good)
    };
    let wrong_secret_hs256 = sign_jwt("not-the-secret", &good);
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "wrong aud",
            ec.token(&with(json!({"aud": "someone-else"}))),
            "The bearer token's audience is not accepted.",
        ),
        (
            "no aud",
            ec.token(&json!({"sub": "m", "iss": ISSUER})),
            "The bearer token's audience is not accepted.",
        ),
        (
            "wrong iss",
            rsa.token(&with(json!({"iss": "https://evil.test/"}))),
            "The bearer token's issuer is not accepted.",
        ),
        (
            "expired",
            rsa.token(&with(json!({"exp": now - 60}))),
            "The bearer token has expired.",
        ),
        (
            "not yet valid",
            ec.token(&with(json!({"nbf": now + 3600}))),
            "The bearer token is not valid yet.",
        ),
        (
            "HS256 signed with the RSA public key",
            hmac_with_public_key(&rsa),
            "The bearer token is invalid.",
        ),
        (
            "HS256 signed with the EC public key",
            hmac_with_public_key(&ec),
            "The bearer token is invalid.",
        ),
        (
            "HS256 with a wrong secret",
            wrong_secret_hs256,
            "The bearer token is invalid.",
        ),
        (
            "alg none, unsigned",
            unsigned_none,
            "The bearer token is invalid.",
        ),
        (
            "alg none, signed",
            ec.token_with_header(&header("none", "ec"), &good),
            "The bearer token is invalid.",
        ),
        (
            "RS256 header with the EC key",
            ec.token_with_header(&header("RS256", "ec"), &good),
            "The bearer token is invalid.",
        ),
        (
            "ES256 header with the RSA key",
            rsa.token_with_header(&header("ES256", "rsa"), &good),
            "The bearer token is invalid.",
        ),
        (
            "RS512",
            rsa.token_with_header(&header("RS512", "rsa"), &good),
            "The bearer token is invalid.",
        ),
        (
            "signed by another key",
            SigningKey::es256("ec").token(&good),
            "The bearer token is invalid.",
        ),
    ];
    for (name, token, message) in &cases {
        expect_refused(&server, name, token, message).await;
        let mut ws = WsClient::connect(&server.ws_url("/v1/ws"), Some(token))
            .await
            .expect("upgrade");
        assert_eq!(
            error_frame(&ws.recv_json().await, "unauthorized", None),
            *message,
            "{name}"
        );
        assert_eq!(ws.recv_close().await, Some(1008), "{name}");
    }
    assert_eq!(
        list(&server, &ec.token(&good)).await.0,
        200,
        "valid tokens keep working"
    );
    assert_eq!(list(&server, ALICE).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_file_is_read_at_start_and_again_for_a_new_kid() {
    let first = SigningKey::rs256("file-1");
    let second = SigningKey::es256("file-2");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks_document(&[&first])).unwrap();
    let server = Server::start(&config(
        &format!("file = {:?}", path.display().to_string()),
        0,
    ));
    assert_eq!(list(&server, &first.token(&claims("f1"))).await.0, 200);
    expect_refused(
        &server,
        "not in the file",
        &second.token(&claims("f2")),
        "The bearer token's signing key is unknown.",
    )
    .await;
    std::fs::write(&path, jwks_document(&[&first, &second])).unwrap();
    assert_eq!(list(&server, &second.token(&claims("f2"))).await.0, 200);
    std::fs::write(&path, "not a key set").unwrap();
    let third = SigningKey::ed_dsa("file-3");
    expect_refused(
        &server,
        "invalid file",
        &third.token(&claims("f3")),
        "The bearer token's signing key is unknown.",
    )
    .await;
    assert_eq!(
        list(&server, &second.token(&claims("f2"))).await.0,
        200,
        "an invalid file keeps the keys in use"
    );
}

/// `url = "https://localhost:PORT/.well-known/jwks.json"`: `idp` behind a
/// TLS terminator whose certificate the test certificate authority issued.
fn https_source(tls: &TlsTerminator) -> String {
    format!("url = \"{}/.well-known/jwks.json\"", tls.url())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_url_over_https_is_fetched_from_a_trusted_certificate_authority() {
    let rsa = SigningKey::rs256("tls-rsa");
    let ec = SigningKey::es256("tls-ec");
    let idp = JwksServer::start(jwks_document(&[&rsa])).await;
    let tls = TlsTerminator::start(idp.addr()).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, test_ca_pem()).unwrap();
    let server = Server::start_with_env(
        &config(&https_source(&tls), 0),
        &[("SSL_CERT_FILE", ca.to_str().unwrap())],
    );
    assert_eq!(list(&server, &rsa.token(&claims("t1"))).await.0, 200);
    let mut ws = WsClient::connect(&server.ws_url("/v1/ws"), Some(&rsa.token(&claims("t1"))))
        .await
        .expect("upgrade");
    create_thread(&server.http(&rsa.token(&claims("t1"))), "over-tls").await;
    assert_eq!(subscribe(&mut ws, "over-tls", None).await, 0);

    // A key published later is fetched over TLS too.
    let fetched = idp.fetches();
    idp.publish(jwks_document(&[&rsa, &ec]));
    assert_eq!(list(&server, &ec.token(&claims("t2"))).await.0, 200);
    assert_eq!(idp.fetches(), fetched + 1, "one refresh for the new kid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_loads_no_key_and_the_server_keeps_working() {
    let key = SigningKey::es256("untrusted");
    let idp = JwksServer::start(jwks_document(&[&key])).await;
    let tls = TlsTerminator::start(idp.addr()).await;
    // No `SSL_CERT_FILE`: the system's roots, which do not hold the test's.
    let server = Server::start(&config(&https_source(&tls), 0));
    expect_refused(
        &server,
        "a key served by an untrusted host",
        &key.token(&claims("u")),
        "The bearer token's signing key is unknown.",
    )
    .await;
    assert_eq!(
        idp.fetches(),
        0,
        "the handshake failed: no request reached the identity provider"
    );
    assert!(
        server.logs().contains("JWKS not loaded"),
        "the failed fetch is logged:\n{}",
        server.logs()
    );
    let (status, _) = list(&server, ALICE).await;
    assert_eq!(status, 200, "static tokens keep working");
    let token = sign_jwt(JWT_SECRET, &json!({"sub": "hs", "exp": unix_now() + 60}));
    assert_eq!(
        list(&server, &token).await.0,
        200,
        "HS256 tokens keep working"
    );
}
