//! Client commands on a pubb socket: `subscribe` and `unsubscribe`.
//!
//! The seed: "Malformed JSON or invalid command field types are ignored
//! without a response. Unknown or missing actions are also ignored." So
//! parsing yields `None` for all of those, and the caller only counts them
//! toward the command rate.

use serde_json::{Map, Value};

/// A well-formed client command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// `{"action":"subscribe","channel":…,"auth"?:…,"channel_data"?:…}`
    Subscribe {
        /// The channel name (not yet validated).
        channel: String,
        /// `APP_KEY:signature`, for `private-` and `presence-` channels.
        auth: Option<String>,
        /// The signed presence identity, a JSON string.
        channel_data: Option<String>,
    },
    /// `{"action":"unsubscribe","channel":…}`
    Unsubscribe {
        /// The channel name.
        channel: String,
    },
}

/// Parses one client text message; `None` for anything to ignore.
pub(crate) fn parse(text: &str) -> Option<Command> {
    let Ok(Value::Object(mut fields)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    let action = take_string(&mut fields, "action")??;
    let channel = take_string(&mut fields, "channel")??;
    match action.as_str() {
        "subscribe" => Some(Command::Subscribe {
            channel,
            auth: take_string(&mut fields, "auth")?,
            channel_data: take_string(&mut fields, "channel_data")?,
        }),
        "unsubscribe" => Some(Command::Unsubscribe { channel }),
        _ => None,
    }
}

/// `None`: the field has the wrong type. `Some(None)`: absent or null.
pub(crate) fn take_string(fields: &mut Map<String, Value>, name: &str) -> Option<Option<String>> {
    match fields.remove(name) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(s)) => Some(Some(s)),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscribe(channel: &str, auth: Option<&str>, data: Option<&str>) -> Option<Command> {
        Some(Command::Subscribe {
            channel: channel.into(),
            auth: auth.map(Into::into),
            channel_data: data.map(Into::into),
        })
    }

    #[test]
    fn seed_examples_parse() {
        assert_eq!(
            parse(r#"{"action":"subscribe","channel":"notifications"}"#),
            subscribe("notifications", None, None)
        );
        assert_eq!(
            parse(r#"{"action":"subscribe","channel":"private-user-42","auth":"K:ab"}"#),
            subscribe("private-user-42", Some("K:ab"), None)
        );
        assert_eq!(
            parse(
                r#"{"action":"subscribe","channel":"presence-team-42","auth":"K:ab","channel_data":"{\"user_id\":\"42\"}"}"#
            ),
            subscribe(
                "presence-team-42",
                Some("K:ab"),
                Some(r#"{"user_id":"42"}"#)
            )
        );
        assert_eq!(
            parse(r#"{"action":"unsubscribe","channel":"notifications"}"#),
            Some(Command::Unsubscribe {
                channel: "notifications".into()
            })
        );
    }

    #[test]
    fn ignores_malformed_and_unknown() {
        for text in [
            "not json",
            "[]",
            "42",
            r#"{"channel":"a"}"#,
            r#"{"action":"subscribe"}"#,
            r#"{"action":"ping","channel":"a"}"#,
            r#"{"action":"ping"}"#,
            r#"{"action":7,"channel":"a"}"#,
            r#"{"action":"subscribe","channel":["a"]}"#,
            r#"{"action":"subscribe","channel":"private-a","auth":12}"#,
            r#"{"action":"subscribe","channel":"presence-a","auth":"K:ab","channel_data":{"user_id":"42"}}"#,
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}
