//! Client messages on a Pusher socket: `{"event", "data", "channel"?}`.
//!
//! `pusher:subscribe` and `pusher:unsubscribe` carry their fields in `data`
//! (an object, or the string of one); `client-…` events carry the channel
//! at the top level and any JSON as `data`. Anything else (malformed JSON,
//! unknown events such as `pusher:cache_miss`) is ignored, as on pubb
//! sockets.

use serde_json::{Map, Value};

use crate::channels::commands::take_string;

/// A well-formed Pusher client message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Command {
    /// `pusher:subscribe`.
    Subscribe {
        /// The channel name (not yet validated).
        channel: String,
        /// `APP_KEY:signature`.
        auth: Option<String>,
        /// The signed presence identity, a JSON string.
        channel_data: Option<String>,
    },
    /// `pusher:unsubscribe`.
    Unsubscribe {
        /// The channel name.
        channel: String,
    },
    /// `pusher:ping`: answer `pusher:pong`.
    Ping,
    /// `pusher:pong`, the answer to the server's `pusher:ping` (any message
    /// shows the socket is alive; this one is not counted as a command).
    Pong,
    /// `pusher:signin`: user authentication.
    Signin {
        /// `APP_KEY:signature` of `socket_id::user::user_data`.
        auth: String,
        /// The signed user data, a JSON string with an `id`.
        user_data: String,
    },
    /// A `client-` event for the other subscribers of `channel`.
    ClientEvent {
        /// The channel.
        channel: String,
        /// The event name, `client-` included.
        name: String,
        /// Its data, forwarded unchanged.
        data: Value,
    },
}

/// Parses one client text message; `None` for anything to ignore.
pub(crate) fn parse(text: &str) -> Option<Command> {
    let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    let Some(Value::String(event)) = message.remove("event") else {
        return None;
    };
    match event.as_str() {
        "pusher:ping" => Some(Command::Ping),
        "pusher:pong" => Some(Command::Pong),
        "pusher:signin" => {
            let mut data = object_data(message.remove("data"))?;
            Some(Command::Signin {
                auth: required(&mut data, "auth")?,
                user_data: required(&mut data, "user_data")?,
            })
        }
        "pusher:subscribe" => {
            let mut data = object_data(message.remove("data"))?;
            Some(Command::Subscribe {
                channel: required(&mut data, "channel")?,
                auth: take_string(&mut data, "auth")?,
                channel_data: take_string(&mut data, "channel_data")?,
            })
        }
        "pusher:unsubscribe" => {
            let mut data = object_data(message.remove("data"))?;
            Some(Command::Unsubscribe {
                channel: required(&mut data, "channel")?,
            })
        }
        name if name.starts_with("client-") => Some(Command::ClientEvent {
            channel: required(&mut message, "channel")?,
            data: message.remove("data").unwrap_or(Value::Null),
            name: event,
        }),
        _ => None,
    }
}

/// `data` as an object: given as one, or as the string of one.
fn object_data(data: Option<Value>) -> Option<Map<String, Value>> {
    match data? {
        Value::Object(map) => Some(map),
        Value::String(text) => match serde_json::from_str(&text) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        },
        _ => None,
    }
}

fn required(fields: &mut Map<String, Value>, name: &str) -> Option<String> {
    match fields.remove(name) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pusher_js_messages_parse() {
        assert_eq!(
            parse(r#"{"event":"pusher:subscribe","data":{"auth":"k:s","channel":"private-a"}}"#),
            Some(Command::Subscribe {
                channel: "private-a".into(),
                auth: Some("k:s".into()),
                channel_data: None
            })
        );
        assert_eq!(
            parse(r#"{"event":"pusher:subscribe","data":"{\"channel\":\"news\"}"}"#),
            Some(Command::Subscribe {
                channel: "news".into(),
                auth: None,
                channel_data: None
            })
        );
        assert_eq!(
            parse(r#"{"event":"pusher:unsubscribe","data":{"channel":"news"}}"#),
            Some(Command::Unsubscribe {
                channel: "news".into()
            })
        );
        assert_eq!(
            parse(r#"{"event":"pusher:ping","data":{}}"#),
            Some(Command::Ping)
        );
        assert_eq!(
            parse(r#"{"event":"client-typing","channel":"private-a","data":{"on":1}}"#),
            Some(Command::ClientEvent {
                channel: "private-a".into(),
                name: "client-typing".into(),
                data: json!({"on":1})
            })
        );
    }

    #[test]
    fn ignores_the_rest() {
        for text in [
            "nope",
            "[]",
            r#"{"data":{}}"#,
            r#"{"event":"pusher:signin","data":{"auth":"k:s"}}"#,
            r#"{"event":"pusher:subscribe"}"#,
            r#"{"event":"pusher:subscribe","data":{"channel":7}}"#,
            r#"{"event":"pusher:subscribe","data":{"channel":"a","auth":1}}"#,
            r#"{"event":"client-x","data":{}}"#,
            r#"{"event":"other","channel":"a"}"#,
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}
