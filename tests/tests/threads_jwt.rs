//! The JWT HS256 driver: `sub` is the principal, `exp` and `nbf` are
//! honoured, the signature must verify and the header must name HS256
//! (no algorithm confusion); over HTTP and on the `/v1/ws` upgrade.

use bubble_tests::threads::{create_thread, error_code, error_frame, subscribe};
use bubble_tests::{
    sign_jwt, sign_jwt_with_header, unix_now, Server, WsClient, JWT_SECRET, TEST_CONFIG,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_expired_and_forged_tokens() {
    let server = Server::start(TEST_CONFIG);
    let valid = sign_jwt(JWT_SECRET, &json!({"sub": "zoe", "exp": unix_now() + 3600}));
    let no_exp = sign_jwt(JWT_SECRET, &json!({"sub": "zoe"}));
    let expired = sign_jwt(JWT_SECRET, &json!({"sub": "zoe", "exp": unix_now() - 60}));
    let forged = sign_jwt(
        "some-other-secret",
        &json!({"sub": "zoe", "exp": unix_now() + 3600}),
    );
    // The same signature over another payload (`sub` changed).
    let other = sign_jwt(
        JWT_SECRET,
        &json!({"sub": "root", "exp": unix_now() + 3600}),
    );
    let signature = valid.rsplit('.').next().unwrap();
    let (unsigned, _) = other.rsplit_once('.').unwrap();
    let tampered = format!("{unsigned}.{signature}");
    let claims = json!({"sub": "zoe", "exp": unix_now() + 3600});
    let not_yet = sign_jwt(
        JWT_SECRET,
        &json!({"sub": "zoe", "nbf": unix_now() + 3600, "exp": unix_now() + 7200}),
    );
    let started = sign_jwt(JWT_SECRET, &json!({"sub": "zoe", "nbf": unix_now() - 60}));
    // Algorithm confusion: `none` (unsigned, or signed anyway), and RS256 or
    // HS512 headers over an HMAC-SHA256 signature made with the secret.
    let alg =
        |alg: &str| sign_jwt_with_header(JWT_SECRET, &json!({"alg": alg, "typ": "JWT"}), &claims);
    let none_signed = alg("none");
    let (none_input, _) = none_signed.rsplit_once('.').unwrap();
    let none_unsigned = format!("{none_input}.");
    let rs256 = alg("RS256");
    let hs512 = alg("HS512");

    // A valid token acts as its `sub`: the creator is the owner.
    let zoe = server.http(&valid);
    let thread = create_thread(&zoe, "zoes").await;
    assert_eq!(thread["threadId"], "zoes");
    let (status, grants) = zoe.get("/v1/threads/zoes/grants").await;
    assert_eq!(status, 200, "{grants}");
    assert_eq!(grants["grants"][0]["principalId"], "zoe");
    let (status, _) = server.http(&no_exp).get("/v1/threads/zoes").await;
    assert_eq!(status, 200, "a token without exp does not expire");
    let (status, _) = server.http(&started).get("/v1/threads/zoes").await;
    assert_eq!(status, 200, "a token whose nbf has passed is valid");

    for (name, token) in [
        ("expired", &expired),
        ("forged", &forged),
        ("tampered", &tampered),
        ("nbf ahead", &not_yet),
        ("alg none, signed", &none_signed),
        ("alg none, unsigned", &none_unsigned),
        ("alg RS256", &rs256),
        ("alg HS512", &hs512),
    ] {
        let (status, body) = server.http(token).get("/v1/threads/zoes").await;
        assert_eq!(status, 401, "{name}: {body}");
        error_code(&body, "unauthorized");

        let mut ws = WsClient::connect(&server.ws_url("/v1/ws"), Some(token))
            .await
            .expect("upgrade");
        error_frame(&ws.recv_json().await, "unauthorized", None);
        assert_eq!(ws.recv_close().await, Some(1008), "{name}");
    }

    let mut ws = WsClient::connect(&server.ws_url("/v1/ws"), Some(&valid))
        .await
        .expect("upgrade");
    assert_eq!(subscribe(&mut ws, "zoes", None).await, 0);
    let url = server.ws_url(&format!("/v1/ws?access_token={valid}"));
    let mut ws = WsClient::connect(&url, None).await.expect("upgrade");
    assert_eq!(subscribe(&mut ws, "zoes", None).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_is_refused_without_the_driver() {
    let config = TEST_CONFIG.replace("[auth.jwt]\nsecret = \"test-jwt-secret\"\n", "");
    assert!(!config.contains("auth.jwt"));
    let server = Server::start(&config);
    let token = sign_jwt(JWT_SECRET, &json!({"sub": "zoe"}));
    let (status, body) = server.http(&token).get("/v1/threads").await;
    assert_eq!(status, 401, "{body}");
}
