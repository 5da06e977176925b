//! Pusher's HTTP API, `/apps/:appId/…`: every request signed with the
//! app's key and secret ([`super::signing`]).
//!
//! Errors are plain text, as Pusher answers them: 400 for a bad request,
//! 401 for a bad signature or a stale timestamp, 404 for an unknown app or
//! route, 405 for another method, 413 for data over the limit. Success is
//! JSON: `{}` for events (or the `info` asked for).
//!
//! Channel queries answer for the whole cluster: `occupied` and
//! `subscription_count` count the subscribers every node holds (the nodes
//! tell each other their counts), `user_count` and `users` the presence
//! members every node holds.

use std::borrow::Cow;

use serde_json::{json, Map, Value};

use crate::channels::fanout;
use crate::channels::frames as pubb_frames;
use crate::channels::names::ChannelKind;
use crate::channels::registry::{App, AppIdx, Registry};
use crate::cluster::ClusterMessage;
use crate::ctx::Ctx;
use crate::edge::Query;
use crate::http::{HttpRequest, HttpResponse, Method};
use crate::io::Output;

use super::error::PusherError;
use super::events::{attributes, parse_batch, parse_event, Event};
use super::signing;

/// An endpoint of Pusher's HTTP API.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// `POST /apps/:id/events`
    Events,
    /// `POST /apps/:id/batch_events`
    BatchEvents,
    /// `GET /apps/:id/channels`
    Channels,
    /// `GET /apps/:id/channels/:name`
    Channel(String),
    /// `GET /apps/:id/channels/:name/users`
    Users(String),
    /// `POST /apps/:id/users/:user_id/terminate_connections`
    Terminate(String),
}

impl Route {
    fn method(&self) -> Method {
        match self {
            Route::Events | Route::BatchEvents | Route::Terminate(_) => Method::Post,
            Route::Channels | Route::Channel(_) | Route::Users(_) => Method::Get,
        }
    }
}

/// `(appId, route)` of a raw path; `None` for no route of the API.
fn route(path: &str) -> Option<(String, Route)> {
    let segments = crate::edge::path_segments(path).ok()?;
    let names: Vec<&str> = segments.iter().map(Cow::as_ref).collect();
    let route = match names[..] {
        ["apps", _, "events"] => Route::Events,
        ["apps", _, "batch_events"] => Route::BatchEvents,
        ["apps", _, "channels"] => Route::Channels,
        ["apps", _, "channels", name] => Route::Channel(name.to_owned()),
        ["apps", _, "channels", name, "users"] => Route::Users(name.to_owned()),
        ["apps", _, "users", user, "terminate_connections"] => Route::Terminate(user.to_owned()),
        _ => return None,
    };
    Some((names[1].to_owned(), route))
}

fn text(status: u16, message: impl Into<String>) -> HttpResponse {
    HttpResponse::text(status, message)
}

fn ok(body: &Value) -> HttpResponse {
    HttpResponse::json(200, body.to_string())
}

fn method_name(method: Method) -> &'static str {
    match method {
        Method::Get => "GET",
        Method::Post => "POST",
        Method::Put => "PUT",
        Method::Patch => "PATCH",
        Method::Delete => "DELETE",
        Method::Other => "OTHER",
    }
}

/// Answers one `/apps/…` request.
pub(crate) fn handle(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    request: &HttpRequest<'_>,
) -> HttpResponse {
    let Some((app_id, route)) = route(request.path) else {
        return text(404, "Not found");
    };
    if request.method != route.method() {
        return text(405, "Method not allowed");
    }
    let Some(app) = reg.app_by_id(&app_id) else {
        return text(404, format!("Unknown app {app_id}"));
    };
    let Ok(query) = Query::parse(request.query) else {
        return text(400, "The query string is not validly percent-encoded.");
    };
    let method = method_name(request.method);
    let config = &reg.apps[app].config;
    if let Err(err) = signing::verify(config, method, request.path, &query, request.body, cx.now) {
        return text(401, err.to_string());
    }
    let limits = cx.limits;
    if let Err(limited) =
        reg.rates
            .check(&app, cx.now, limits.http_rate, limits.http_rate_window_ms)
    {
        cx.metrics.count_error(crate::ErrorCode::RateLimited);
        let mut response = text(429, limited.message("app"));
        response.retry_after = Some(limited.retry_after_s);
        return response;
    }
    let max_data = cx.limits.max_publish_data_bytes;
    match route {
        Route::Events => match parse_event(request.body, max_data) {
            Ok(event) => ok(&publish(&reg.apps[app], cx, event)),
            Err(err) => text(err.status(), err.to_string()),
        },
        Route::BatchEvents => match parse_batch(request.body, max_data) {
            Ok(events) => {
                let infos: Vec<Value> = events
                    .into_iter()
                    .map(|event| publish(&reg.apps[app], cx, event))
                    .collect();
                if infos
                    .iter()
                    .all(|info| info.as_object().is_some_and(Map::is_empty))
                {
                    ok(&json!({}))
                } else {
                    ok(&json!({ "batch": infos }))
                }
            }
            Err(err) => text(err.status(), err.to_string()),
        },
        Route::Channels => channels(&reg.apps[app], &query),
        Route::Channel(name) => channel(&reg.apps[app], &name, &query),
        Route::Users(name) => users(&reg.apps[app], &name),
        Route::Terminate(user) => {
            terminate_here(reg, cx, app, &user);
            let app_id = reg.apps[app].config.id.clone();
            fanout::announce(
                cx,
                ClusterMessage::TerminateUser {
                    app_id,
                    user_id: user,
                },
            );
            ok(&json!({}))
        }
    }
}

/// Publishes one event; answers its `info` (`{}` when none was asked for).
fn publish(app: &App, cx: &mut Ctx<'_>, event: Event) -> Value {
    let payload = pubb_frames::payload(&event.name, &Value::String(event.data));
    fanout::publish(
        app,
        cx,
        (event.channels.clone(), payload),
        event.socket_id,
        false,
    );
    if event.info.is_empty() {
        return json!({});
    }
    let channels: Map<String, Value> = event
        .channels
        .iter()
        .map(|name| (name.clone(), Value::Object(info(app, name, &event.info))))
        .collect();
    json!({ "channels": channels })
}

/// The `info` attributes of one channel that apply to it.
fn info(app: &App, channel: &str, asked: &[String]) -> Map<String, Value> {
    let mut out = Map::new();
    for attribute in asked {
        match attribute.as_str() {
            "subscription_count" => {
                out.insert(attribute.clone(), json!(subscription_count(app, channel)));
            }
            "user_count" if ChannelKind::of(channel) == ChannelKind::Presence => {
                out.insert(attribute.clone(), json!(user_count(app, channel)));
            }
            _ => {}
        }
    }
    out
}

/// Sockets subscribed to `channel` on every node.
fn subscription_count(app: &App, channel: &str) -> u64 {
    app.subscribers(channel)
}

/// Members of presence `channel` anywhere in the cluster.
fn user_count(app: &App, channel: &str) -> usize {
    app.presence.get(channel).map_or(0, |p| p.count())
}

/// `GET /apps/:id/channels?filter_by_prefix=…&info=user_count,subscription_count`.
fn channels(app: &App, query: &Query) -> HttpResponse {
    let prefix = query.get("filter_by_prefix").unwrap_or_default();
    let asked = query.get("info").map(attributes).unwrap_or_default();
    if asked.iter().any(|a| a == "user_count") && !prefix.starts_with("presence-") {
        return text(
            400,
            "user_count may only be requested with filter_by_prefix=presence-",
        );
    }
    let names = app
        .occupied_channels()
        .into_iter()
        .filter(|name| name.starts_with(prefix) && !name.starts_with('#'));
    let channels: Map<String, Value> = names
        .into_iter()
        .map(|name| (name.clone(), Value::Object(info(app, name, &asked))))
        .collect();
    ok(&json!({ "channels": channels }))
}

/// `GET /apps/:id/channels/:name?info=…`.
fn channel(app: &App, name: &str, query: &Query) -> HttpResponse {
    let asked = query.get("info").map(attributes).unwrap_or_default();
    if asked.iter().any(|a| a == "user_count") && ChannelKind::of(name) != ChannelKind::Presence {
        return text(400, "user_count is only available for presence channels");
    }
    let mut body = Map::new();
    body.insert("occupied".into(), json!(app.occupied(name)));
    body.extend(info(app, name, &asked));
    ok(&Value::Object(body))
}

/// `GET /apps/:id/channels/:name/users`: a presence channel's members.
fn users(app: &App, name: &str) -> HttpResponse {
    if ChannelKind::of(name) != ChannelKind::Presence {
        return text(400, "Users are only available for presence channels");
    }
    let users: Vec<Value> = app
        .presence
        .get(name)
        .map(|p| p.user_ids().map(|id| json!({ "id": id })).collect())
        .unwrap_or_default();
    ok(&json!({ "users": users }))
}

/// Closes every socket on this node signed in as `user` or a presence
/// member as `user`,
/// with `pusher:error` 4009 on Pusher sockets and close 1008 on pubb
/// sockets (the other nodes of a cluster hear of it and do the same).
pub(crate) fn terminate_here(reg: &mut Registry, cx: &mut Ctx<'_>, app: AppIdx, user: &str) {
    let mut conns: Vec<_> = reg
        .sockets
        .iter()
        .filter(|(_, s)| s.app == app && !s.closing)
        .filter(|(_, s)| {
            s.user_id.as_deref() == Some(user)
                || s.channels.values().any(|u| u.as_deref() == Some(user))
        })
        .map(|(&conn, s)| (conn, s.protocol))
        .collect();
    conns.sort_by_key(|(conn, _)| *conn);
    for (conn, protocol) in conns {
        if let Some(socket) = reg.sockets.get_mut(&conn) {
            socket.closing = true;
        }
        if protocol == crate::io::ChannelProtocol::Pusher {
            super::refuse(cx, conn, &PusherError::Terminated);
        } else {
            cx.out.push_unfenced(Output::Close {
                conn,
                reason: crate::io::CloseReason::Policy,
            });
        }
    }
}
