//! `POST /api/apps/:appId/auth` and `POST /api/apps/:appId/events`.

use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use crate::cluster::ClaimOutcome;
use crate::ctx::Ctx;
use crate::edge::{bearer, channels_endpoint, ChannelsEndpoint as Endpoint};
use crate::http::{HttpRequest, HttpResponse, Method};
use crate::ids::{ClaimId, RequestId};
use crate::io::Output;
use crate::json::push_json_str;

use super::fanout;
use super::frames;
use super::names::ChannelKind;
use super::publish::{
    check_idempotency_key, parse_publication, Accepted, Pending, Publication, PublishError,
};
use super::registry::{App, AppIdx, Registry};
use super::signature;

/// 404 for an unknown `:appId`.
pub(crate) const APP_NOT_FOUND: &str = "Application not found";
/// 401 for a missing or wrong app secret.
pub(crate) const BAD_SECRET: &str = "A valid application secret is required";
/// 400 from the auth endpoint: a required field is missing.
pub(crate) const AUTH_FIELDS_REQUIRED: &str = "socket_id and channel_name are required";
/// 400 from the auth endpoint: a public channel.
pub(crate) const AUTH_NOT_NEEDED: &str = "Channel does not require authentication";
/// 400 from the auth endpoint: a presence channel without a valid `user_id`.
pub(crate) const AUTH_USER_REQUIRED: &str = "user_id is required for presence channels";
/// 429: the app is over `limits.http_rate` (the seed's capacity error).
pub(crate) const THROUGHPUT_BUSY: &str =
    "Workspace throughput is busy. Retry after the indicated delay.";

/// Answers one `/api/apps/…` request.
pub(crate) fn handle(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    req: RequestId,
    request: &HttpRequest<'_>,
) {
    if let Some(response) = route(reg, cx, req, request) {
        cx.out.push_unfenced(Output::Respond { req, response });
    }
}

fn error(status: u16, message: &str) -> HttpResponse {
    HttpResponse::json(status, json!({ "error": message }).to_string())
}

/// An error of this API: `{"error": message, "code": code}`.
pub(crate) fn coded_error(status: u16, message: &str, code: &str) -> HttpResponse {
    HttpResponse::json(
        status,
        json!({ "error": message, "code": code }).to_string(),
    )
}

/// The response, or `None` while a publication waits for its key's claim.
fn route(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    req: RequestId,
    request: &HttpRequest<'_>,
) -> Option<HttpResponse> {
    let Some((app_id, endpoint)) = channels_endpoint(request.path) else {
        return Some(coded_error(404, "Not found", "not_found"));
    };
    if request.method != Method::Post {
        return Some(coded_error(405, "Method not allowed", "method_not_allowed"));
    }
    let Some(app) = reg.app_by_id(&app_id) else {
        return Some(error(404, APP_NOT_FOUND));
    };
    if !secret_matches(&reg.apps[app].config.secret, request.authorization) {
        return Some(error(401, BAD_SECRET));
    }
    let limits = cx.limits;
    if let Err(limited) =
        reg.rates
            .check(&app, cx.now, limits.http_rate, limits.http_rate_window_ms)
    {
        cx.metrics.count_error(crate::ErrorCode::RateLimited);
        let mut response = coded_error(429, THROUGHPUT_BUSY, "rate_limit_exceeded");
        response.retry_after = Some(limited.retry_after_s);
        return Some(response);
    }
    match endpoint {
        Endpoint::Auth => Some(authorize(reg, app, request.body)),
        Endpoint::Events => match publish(reg, cx, app, req, request) {
            Ok(response) => response,
            Err(err) => Some(coded_error(err.http_status(), &err.to_string(), err.code())),
        },
    }
}

fn secret_matches(secret: &str, authorization: Option<&str>) -> bool {
    let Ok(given) = bearer(authorization) else {
        return false;
    };
    given.as_bytes().ct_eq(secret.as_bytes()).into()
}

fn nonblank_string(body: &serde_json::Map<String, Value>, field: &str) -> Option<String> {
    match body.get(field) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// Signs a subscription for the app's backend.
fn authorize(reg: &Registry, app: AppIdx, body: &[u8]) -> HttpResponse {
    let fields = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    let (Some(socket_id), Some(channel)) = (
        nonblank_string(&fields, "socket_id"),
        nonblank_string(&fields, "channel_name"),
    ) else {
        return error(400, AUTH_FIELDS_REQUIRED);
    };
    let config = &reg.apps[app].config;
    match ChannelKind::of(&channel) {
        ChannelKind::Public => error(400, AUTH_NOT_NEEDED),
        ChannelKind::Private => {
            let auth =
                signature::auth_string(&config.key, &config.secret, &socket_id, &channel, None);
            HttpResponse::json(200, json!({ "auth": auth }).to_string())
        }
        ChannelKind::Presence => {
            let user_id = match fields.get("user_id") {
                Some(Value::String(id)) if !id.is_empty() => id,
                _ => return error(400, AUTH_USER_REQUIRED),
            };
            let mut identity = serde_json::Map::new();
            identity.insert("user_id".into(), Value::String(user_id.clone()));
            match fields.get("user_info") {
                None | Some(Value::Null) => {}
                Some(info @ Value::Object(_)) => {
                    identity.insert("user_info".into(), info.clone());
                }
                Some(_) => return error(400, AUTH_USER_REQUIRED),
            }
            let channel_data = Value::Object(identity).to_string();
            let auth = signature::auth_string(
                &config.key,
                &config.secret,
                &socket_id,
                &channel,
                Some(&channel_data),
            );
            HttpResponse::json(
                200,
                json!({ "auth": auth, "channel_data": channel_data }).to_string(),
            )
        }
    }
}

/// The `202` answer to a publication, written directly (one per publish):
/// `{"success":true,"accepted":true,"channels":[…],"publicationId":…,"duplicate":…}`.
fn accepted_body(accepted: &Accepted, duplicate: bool) -> HttpResponse {
    let names: usize = accepted.channels.iter().map(|c| c.len() + 3).sum();
    let mut body = String::with_capacity(96 + names + accepted.publication_id.len());
    body.push_str(r#"{"success":true,"accepted":true,"channels":["#);
    for (i, channel) in accepted.channels.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        push_json_str(&mut body, channel);
    }
    body.push_str(r#"],"publicationId":"#);
    push_json_str(&mut body, &accepted.publication_id);
    body.push_str(if duplicate {
        r#","duplicate":true}"#
    } else {
        r#","duplicate":false}"#
    });
    HttpResponse::json(202, body)
}

/// Validates a publication and fans it out to the app's subscribers,
/// serializing each channel's envelope once. In a cluster a keyed
/// publication first claims its key for the whole cluster (`None`: the
/// answer follows the claim's outcome, in [`claimed`]).
fn publish(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    app: AppIdx,
    req: RequestId,
    request: &HttpRequest<'_>,
) -> Result<Option<HttpResponse>, PublishError> {
    if let Some(key) = request.idempotency_key {
        check_idempotency_key(key)?;
    }
    let publication = parse_publication(request.body, cx.limits.max_publish_data_bytes)?;
    let state = &mut reg.apps[app];
    state.idempotency.expire(cx.now);
    let key = request.idempotency_key;
    if let Some(original) = key.and_then(|k| state.idempotency.get(k, cx.now)) {
        return Ok(Some(accepted_body(original, true)));
    }
    let accepted = Accepted {
        publication_id: cx.ids.uuid_v4(),
        channels: publication.channels.clone(),
    };
    match key {
        Some(key) if cx.cluster => {
            let claim = reg.claims.open(Pending {
                req,
                app,
                key: key.to_owned(),
                publication,
                accepted: accepted.clone(),
            });
            cx.out.push_unfenced(Output::Claim {
                claim,
                app_id: reg.apps[app].config.id.clone(),
                key: key.to_owned(),
                value: accepted.record(),
                ttl_ms: cx.limits.idempotency_retention_ms,
            });
            Ok(None)
        }
        _ => Ok(Some(go_out(state, cx, publication, accepted, key))),
    }
}

/// Delivers an accepted publication here and tells the other nodes.
fn go_out(
    state: &mut App,
    cx: &mut Ctx<'_>,
    publication: Publication,
    accepted: Accepted,
    key: Option<&str>,
) -> HttpResponse {
    let payload = frames::payload(&publication.name, &publication.data);
    fanout::publish(
        state,
        cx,
        (publication.channels, payload),
        publication.socket_id,
        false,
    );
    let response = accepted_body(&accepted, false);
    if let Some(key) = key {
        state
            .idempotency
            .remember(key, accepted, cx.now, cx.limits.idempotency_retention_ms);
    }
    response
}

/// A key's claim settled: publish, or answer the holder's publication.
pub(crate) fn claimed(reg: &mut Registry, cx: &mut Ctx<'_>, claim: ClaimId, outcome: ClaimOutcome) {
    let Some(pending) = reg.claims.close(claim) else {
        return;
    };
    let state = &mut reg.apps[pending.app];
    let key = pending.key.as_str();
    let earlier = match outcome {
        ClaimOutcome::Won => None,
        ClaimOutcome::Taken(record) => Accepted::from_record(&record),
        ClaimOutcome::Unavailable => state.idempotency.get(key, cx.now).cloned(),
    };
    let response = match earlier {
        Some(original) => {
            let response = accepted_body(&original, true);
            state
                .idempotency
                .remember(key, original, cx.now, cx.limits.idempotency_retention_ms);
            response
        }
        None => go_out(state, cx, pending.publication, pending.accepted, Some(key)),
    };
    cx.out.push_unfenced(Output::Respond {
        req: pending.req,
        response,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets() {
        assert!(secret_matches("s3", Some("Bearer s3")));
        assert!(!secret_matches("s3", Some("Bearer s4")));
        assert!(!secret_matches("s3", Some("s3")));
        assert!(!secret_matches("s3", None));
    }

    #[test]
    fn the_accepted_body_is_the_json_of_its_fields() {
        for (channels, id, duplicate) in [
            (vec!["news"], "0a1b", false),
            (vec!["a", "b\"c", "d\\e\n"], "p\"1", true),
        ] {
            let accepted = Accepted {
                publication_id: id.into(),
                channels: channels.iter().map(|c| (*c).to_owned()).collect(),
            };
            let response = accepted_body(&accepted, duplicate);
            assert_eq!(response.status, 202);
            let body: Value = serde_json::from_str(&response.body).unwrap();
            assert_eq!(
                body,
                json!({
                    "success": true,
                    "accepted": true,
                    "channels": channels,
                    "publicationId": id,
                    "duplicate": duplicate,
                })
            );
            assert_eq!(response.body, body.to_string(), "compact, in this order");
        }
    }
}
