//! Server messages on a Pusher socket (protocol 7), serialized once.
//!
//! Every frame is `{"event", "channel"?, "data"}`. Pusher's own events carry
//! `data` as a JSON string; published and client events carry their data as
//! it was given (a string for Pusher's HTTP API).

use serde_json::{json, Value};

use crate::channels::socket::SubscribeError;
use crate::io::SharedFrame;

use super::error::PusherError;

fn frame(value: &Value) -> SharedFrame {
    SharedFrame::from(value.to_string())
}

/// `pusher:connection_established`.
pub(crate) fn connection_established(socket_id: &str, activity_timeout_s: u64) -> SharedFrame {
    let data = json!({ "socket_id": socket_id, "activity_timeout": activity_timeout_s });
    frame(&json!({ "event": "pusher:connection_established", "data": data.to_string() }))
}

/// `pusher_internal:subscription_succeeded` with `"{}"`.
pub(crate) fn subscription_succeeded(channel: &str) -> SharedFrame {
    frame(&json!({
        "event": "pusher_internal:subscription_succeeded",
        "channel": channel,
        "data": "{}",
    }))
}

/// The presence acknowledgement: `data` is the string of `{"presence": snapshot}`.
pub(crate) fn presence_succeeded(channel: &str, snapshot: &Value) -> SharedFrame {
    frame(&json!({
        "event": "pusher_internal:subscription_succeeded",
        "channel": channel,
        "data": json!({ "presence": snapshot }).to_string(),
    }))
}

/// `pusher:subscription_error` as pusher-js reads it: `{type, error, status}`.
pub(crate) fn subscription_error(channel: &str, err: &SubscribeError) -> SharedFrame {
    let (kind, status) = match err {
        SubscribeError::NotAuthorized(_) => ("AuthError", 401),
        SubscribeError::InvalidChannel | SubscribeError::TooManyChannels(_) => {
            ("ChannelError", 400)
        }
    };
    frame(&json!({
        "event": "pusher:subscription_error",
        "channel": channel,
        "data": { "type": kind, "error": err.to_string(), "status": status },
    }))
}

/// `pusher_internal:member_added`; `user_info` is omitted when there is none.
pub(crate) fn member_added(channel: &str, user_id: &str, user_info: Option<&Value>) -> SharedFrame {
    let mut data = json!({ "user_id": user_id });
    if let (Some(info), Value::Object(map)) = (user_info, &mut data) {
        map.insert("user_info".into(), info.clone());
    }
    frame(&json!({
        "event": "pusher_internal:member_added",
        "channel": channel,
        "data": data.to_string(),
    }))
}

/// `pusher_internal:member_removed`.
pub(crate) fn member_removed(channel: &str, user_id: &str) -> SharedFrame {
    frame(&json!({
        "event": "pusher_internal:member_removed",
        "channel": channel,
        "data": json!({ "user_id": user_id }).to_string(),
    }))
}

/// `pusher:error` with its code (or `null`) and message.
pub(crate) fn error(err: &PusherError) -> SharedFrame {
    frame(&json!({
        "event": "pusher:error",
        "data": { "code": err.code(), "message": err.to_string() },
    }))
}

/// `pusher:signin_success`, with the signed `user_data` string.
pub(crate) fn signin_success(user_data: &str) -> SharedFrame {
    frame(&json!({ "event": "pusher:signin_success", "data": { "user_data": user_data } }))
}

/// `pusher:ping`, the server's heartbeat to a silent socket.
pub(crate) fn ping() -> SharedFrame {
    frame(&json!({ "event": "pusher:ping", "data": "{}" }))
}

/// `pusher:pong`, the answer to a `pusher:ping`.
pub(crate) fn pong() -> SharedFrame {
    frame(&json!({ "event": "pusher:pong", "data": "{}" }))
}

/// A published or client event; `user_id` names the sender of a client
/// event on a presence channel.
pub(crate) fn event(channel: &str, name: &str, data: &Value, user_id: Option<&str>) -> SharedFrame {
    let mut value = json!({ "event": name, "channel": channel, "data": data });
    if let (Some(user), Value::Object(map)) = (user_id, &mut value) {
        map.insert("user_id".into(), Value::String(user.to_owned()));
    }
    frame(&value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::socket::AuthFailure;

    #[test]
    fn protocol_7_shapes() {
        assert_eq!(
            &*connection_established("123.456", 60),
            r#"{"event":"pusher:connection_established","data":"{\"socket_id\":\"123.456\",\"activity_timeout\":60}"}"#
        );
        assert_eq!(
            &*subscription_succeeded("news"),
            r#"{"event":"pusher_internal:subscription_succeeded","channel":"news","data":"{}"}"#
        );
        let snapshot = json!({ "ids": ["1"], "hash": { "1": { "name": "A" } }, "count": 1 });
        assert_eq!(
            &*presence_succeeded("presence-x", &snapshot),
            r#"{"event":"pusher_internal:subscription_succeeded","channel":"presence-x","data":"{\"presence\":{\"ids\":[\"1\"],\"hash\":{\"1\":{\"name\":\"A\"}},\"count\":1}}"}"#
        );
        assert_eq!(
            &*member_added("presence-x", "2", None),
            r#"{"event":"pusher_internal:member_added","channel":"presence-x","data":"{\"user_id\":\"2\"}"}"#
        );
        assert_eq!(
            &*member_removed("presence-x", "2"),
            r#"{"event":"pusher_internal:member_removed","channel":"presence-x","data":"{\"user_id\":\"2\"}"}"#
        );
        assert_eq!(
            &*error(&PusherError::UnsupportedProtocol),
            r#"{"event":"pusher:error","data":{"code":4007,"message":"Unsupported protocol version"}}"#
        );
        assert_eq!(&*ping(), r#"{"event":"pusher:ping","data":"{}"}"#);
        assert_eq!(
            &*error(&PusherError::PongTimeout),
            r#"{"event":"pusher:error","data":{"code":4201,"message":"Pong reply not received"}}"#
        );
        assert_eq!(
            &*error(&PusherError::ClientEventPublic),
            r#"{"event":"pusher:error","data":{"code":null,"message":"Client events are only supported on private and presence channels"}}"#
        );
        assert_eq!(
            &*event("private-a", "client-typing", &json!({"on":true}), Some("7")),
            r#"{"event":"client-typing","channel":"private-a","data":{"on":true},"user_id":"7"}"#
        );
        assert_eq!(
            &*subscription_error(
                "private-a",
                &SubscribeError::NotAuthorized(AuthFailure::Key(String::new()))
            ),
            r#"{"event":"pusher:subscription_error","channel":"private-a","data":{"type":"AuthError","error":"Subscription not authorized","status":401}}"#
        );
    }
}
