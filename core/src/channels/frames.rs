//! Server messages on a pubb socket, serialized once and shared.
//!
//! Control events carry `event`, optionally `channel`, and `data`: a JSON
//! string, except the presence snapshot and member events whose `data` is an
//! object (SPEC §6). Published events arrive as `{channel, data}` with no
//! `event`.

use serde::Serialize;
use serde_json::{json, Value};

use crate::io::{ChannelProtocol, SharedFrame};
use crate::json::push_json_str;

fn frame(value: &Value) -> SharedFrame {
    SharedFrame::from(value.to_string())
}

/// `pubb:connection_established`, `data` = `{"socket_id","activity_timeout"}` as a string.
pub(crate) fn connection_established(socket_id: &str, activity_timeout_s: u64) -> SharedFrame {
    let data = json!({ "socket_id": socket_id, "activity_timeout": activity_timeout_s });
    frame(&json!({ "event": "pubb:connection_established", "data": data.to_string() }))
}

/// The acknowledgement event of `protocol`.
fn succeeded_event(protocol: ChannelProtocol) -> &'static str {
    match protocol {
        ChannelProtocol::V2 => "pubb:subscription_succeeded",
        ChannelProtocol::Legacy | ChannelProtocol::Pusher => "pubb_internal:subscription_succeeded",
    }
}

/// A subscription acknowledgement with the string `"{}"` as `data`.
pub(crate) fn subscription_succeeded(protocol: ChannelProtocol, channel: &str) -> SharedFrame {
    frame(&json!({ "event": succeeded_event(protocol), "channel": channel, "data": "{}" }))
}

/// The acknowledgement of a new presence subscription, `data` = `{"presence": snapshot}`.
pub(crate) fn presence_succeeded(
    protocol: ChannelProtocol,
    channel: &str,
    snapshot: Value,
) -> SharedFrame {
    frame(&json!({
        "event": succeeded_event(protocol),
        "channel": channel,
        "data": { "presence": snapshot },
    }))
}

/// `subscription_error` with a sentence as `data`.
pub(crate) fn subscription_error(channel: &str, message: &str) -> SharedFrame {
    frame(&json!({ "event": "subscription_error", "channel": channel, "data": message }))
}

/// `pubb:member_added`; `user_info` is omitted when the member has none.
pub(crate) fn member_added(channel: &str, user_id: &str, user_info: Option<&Value>) -> SharedFrame {
    let mut data = json!({ "user_id": user_id });
    if let (Some(info), Value::Object(map)) = (user_info, &mut data) {
        map.insert("user_info".into(), info.clone());
    }
    frame(&json!({ "event": "pubb:member_added", "channel": channel, "data": data }))
}

/// `pubb:member_removed`.
pub(crate) fn member_removed(channel: &str, user_id: &str) -> SharedFrame {
    frame(
        &json!({ "event": "pubb:member_removed", "channel": channel, "data": { "user_id": user_id } }),
    )
}

/// The connection-level `error` event.
pub(crate) fn error(message: &str) -> SharedFrame {
    frame(&json!({ "event": "error", "data": message }))
}

/// The delivery envelope `{"channel", "data"}`; `payload` is the serialized
/// `{"name","data"}` string, built once per publication.
pub(crate) fn delivery(channel: &str, payload: &str) -> SharedFrame {
    // One publication's frame per channel, on every publish: written
    // directly, the escaped payload being most of it.
    let mut frame = String::with_capacity(channel.len() + payload.len() * 5 / 4 + 24);
    frame.push_str(r#"{"channel":"#);
    push_json_str(&mut frame, channel);
    frame.push_str(r#","data":"#);
    push_json_str(&mut frame, payload);
    frame.push('}');
    SharedFrame::from(frame)
}

/// The `{"name","data"}` payload of a publication, serialized once.
pub(crate) fn payload(name: &str, data: &Value) -> String {
    #[derive(Serialize)]
    struct Payload<'a> {
        name: &'a str,
        data: &'a Value,
    }
    serde_json::to_string(&Payload { name, data }).unwrap_or_default()
}

/// The payload of a Pusher client event: a publication's, with the
/// sender's `user_id` on presence channels.
pub(crate) fn client_payload(name: &str, data: &Value, user_id: Option<&str>) -> String {
    match user_id {
        Some(user) => json!({ "name": name, "data": data, "user_id": user }).to_string(),
        None => payload(name, data),
    }
}

/// A payload read back into its parts, for sockets of the other wire format.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PayloadParts {
    /// The event name.
    pub(crate) name: String,
    /// Its data.
    pub(crate) data: Value,
    /// The sender of a client event on a presence channel.
    pub(crate) user_id: Option<String>,
}

/// Reads a payload made by [`payload`] or [`client_payload`].
pub(crate) fn payload_parts(payload: &str) -> Option<PayloadParts> {
    let Ok(Value::Object(mut fields)) = serde_json::from_str::<Value>(payload) else {
        return None;
    };
    let Some(Value::String(name)) = fields.remove("name") else {
        return None;
    };
    let user_id = match fields.remove("user_id") {
        Some(Value::String(user)) => Some(user),
        _ => None,
    };
    Some(PayloadParts {
        name,
        data: fields.remove("data").unwrap_or(Value::Null),
        user_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_shapes() {
        assert_eq!(
            &*connection_established("0123456789abcdef0123456789abcdef", 60),
            r#"{"event":"pubb:connection_established","data":"{\"socket_id\":\"0123456789abcdef0123456789abcdef\",\"activity_timeout\":60}"}"#
        );
        assert_eq!(
            &*subscription_succeeded(ChannelProtocol::V2, "notifications"),
            r#"{"event":"pubb:subscription_succeeded","channel":"notifications","data":"{}"}"#
        );
        assert_eq!(
            &*subscription_succeeded(ChannelProtocol::Legacy, "n"),
            r#"{"event":"pubb_internal:subscription_succeeded","channel":"n","data":"{}"}"#
        );
        assert_eq!(
            &*subscription_error("private-user-42", "Subscription not authorized"),
            r#"{"event":"subscription_error","channel":"private-user-42","data":"Subscription not authorized"}"#
        );
        assert_eq!(
            &*member_added("presence-team-42", "43", Some(&json!({"name":"Sam"}))),
            r#"{"event":"pubb:member_added","channel":"presence-team-42","data":{"user_id":"43","user_info":{"name":"Sam"}}}"#
        );
        assert_eq!(
            &*member_removed("presence-team-42", "43"),
            r#"{"event":"pubb:member_removed","channel":"presence-team-42","data":{"user_id":"43"}}"#
        );
        assert_eq!(
            &*error("Command rate exceeded (20/s)"),
            r#"{"event":"error","data":"Command rate exceeded (20/s)"}"#
        );
        let payload = payload("order.created", &json!({"orderId":"1042"}));
        assert_eq!(
            &*delivery("notifications", &payload),
            r#"{"channel":"notifications","data":"{\"name\":\"order.created\",\"data\":{\"orderId\":\"1042\"}}"}"#
        );
    }

    #[test]
    fn json_strings_are_written_as_serde_json_writes_them() {
        for s in [
            "",
            "news",
            "a-Z_0=@,.;",
            "quote\"d",
            "back\\slash",
            "tab\tnew\nline\u{1}\u{1f}",
            "caf\u{e9} \u{2028} \u{7f} /",
        ] {
            let mut out = String::from("x");
            push_json_str(&mut out, s);
            assert_eq!(
                out,
                format!("x{}", serde_json::to_string(s).unwrap()),
                "{s:?}"
            );
        }
    }
}
