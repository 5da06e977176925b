//! Pusher's `POST /apps/:id/events` and `/batch_events` bodies.

use serde_json::{Map, Value};

use crate::channels::names::{is_valid_pusher_name, is_valid_subscription_name};
use crate::channels::publish::MAX_PUBLISH_NAME_CHARS;

/// Most channels one event may target.
pub(crate) const MAX_EVENT_CHANNELS: usize = crate::edge::PUSHER_EVENT_CHANNELS;
/// Most events one batch may hold.
pub(crate) const MAX_BATCH_EVENTS: usize = crate::edge::PUSHER_BATCH_EVENTS;

/// Why an events body was refused: 413 for oversized data, 400 otherwise.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EventError {
    /// Not a JSON object (or `batch` not an array of them).
    #[error("Invalid JSON body")]
    InvalidBody,
    /// `name` missing, not a string, empty or over 200 characters.
    #[error("Invalid event name: name must be a string of 1 to 200 characters")]
    InvalidName,
    /// `data` missing or not a string.
    #[error("Invalid data: data must be a string")]
    InvalidData,
    /// Neither `channels` nor `channel`, or not strings, or over 100.
    #[error("Invalid channels: give channel or 1 to 100 channels")]
    InvalidChannels,
    /// A channel name outside Pusher's alphabet or over 164 characters.
    #[error("Invalid channel name: {0}")]
    InvalidChannelName(String),
    /// `socket_id` present but not a string of the form `digits.digits`
    /// (the form of every `socket_id` a Pusher socket gets).
    #[error("Invalid socket id: '{0}'")]
    InvalidSocketId(String),
    /// More than 10 events in a batch.
    #[error("Batch too large: at most {MAX_BATCH_EVENTS} events")]
    BatchTooLarge,
    /// `data` over the configured limit.
    #[error("Payload too large: data must be at most {0} bytes")]
    DataTooLarge(usize),
}

impl EventError {
    /// The HTTP status.
    pub(crate) fn status(&self) -> u16 {
        match self {
            EventError::DataTooLarge(_) => 413,
            _ => 400,
        }
    }
}

/// One validated event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    /// The event name.
    pub(crate) name: String,
    /// Its data string.
    pub(crate) data: String,
    /// Target channels, without duplicates, in request order.
    pub(crate) channels: Vec<String>,
    /// The connection to leave out.
    pub(crate) socket_id: Option<String>,
    /// The `info` attributes asked for (`user_count`, `subscription_count`).
    pub(crate) info: Vec<String>,
}

/// Reads a `/events` body.
pub(crate) fn parse_event(body: &[u8], max_data_bytes: usize) -> Result<Event, EventError> {
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
        return Err(EventError::InvalidBody);
    };
    event(fields, max_data_bytes)
}

/// Reads a `/batch_events` body: `{"batch": [event…]}`.
pub(crate) fn parse_batch(body: &[u8], max_data_bytes: usize) -> Result<Vec<Event>, EventError> {
    let Ok(Value::Object(mut fields)) = serde_json::from_slice::<Value>(body) else {
        return Err(EventError::InvalidBody);
    };
    let Some(Value::Array(batch)) = fields.remove("batch") else {
        return Err(EventError::InvalidBody);
    };
    if batch.len() > MAX_BATCH_EVENTS {
        return Err(EventError::BatchTooLarge);
    }
    batch
        .into_iter()
        .map(|item| match item {
            Value::Object(fields) => event(fields, max_data_bytes),
            _ => Err(EventError::InvalidBody),
        })
        .collect()
}

fn event(mut fields: Map<String, Value>, max_data_bytes: usize) -> Result<Event, EventError> {
    let name = match fields.remove("name") {
        Some(Value::String(name))
            if !name.is_empty() && name.chars().count() <= MAX_PUBLISH_NAME_CHARS =>
        {
            name
        }
        _ => return Err(EventError::InvalidName),
    };
    let Some(Value::String(data)) = fields.remove("data") else {
        return Err(EventError::InvalidData);
    };
    if data.len() > max_data_bytes {
        return Err(EventError::DataTooLarge(max_data_bytes));
    }
    let names: Vec<Value> = match (fields.remove("channels"), fields.remove("channel")) {
        (Some(Value::Array(many)), None) if (1..=MAX_EVENT_CHANNELS).contains(&many.len()) => many,
        (None, Some(one @ Value::String(_))) => vec![one],
        _ => return Err(EventError::InvalidChannels),
    };
    let mut channels: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        let Value::String(channel) = name else {
            return Err(EventError::InvalidChannels);
        };
        if !is_valid_pusher_name(&channel) && !is_user_channel(&channel) {
            return Err(EventError::InvalidChannelName(channel));
        }
        if !channels.contains(&channel) {
            channels.push(channel);
        }
    }
    let socket_id = match fields.remove("socket_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if is_socket_id(&id) => Some(id),
        Some(Value::String(id)) => return Err(EventError::InvalidSocketId(id)),
        Some(other) => return Err(EventError::InvalidSocketId(other.to_string())),
    };
    let info = match fields.remove("info") {
        Some(Value::String(info)) => attributes(&info),
        _ => Vec::new(),
    };
    Ok(Event {
        name,
        data,
        channels,
        socket_id,
        info,
    })
}

/// Whether `id` has the form of a `socket_id`: `^\d+\.\d+$`.
fn is_socket_id(id: &str) -> bool {
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    id.split_once('.')
        .is_some_and(|(head, tail)| digits(head) && digits(tail))
}

/// `#server-to-user-<id>`, where the `pusher` libraries' `sendToUser`
/// publishes (`id` as a subscription name's characters).
fn is_user_channel(channel: &str) -> bool {
    channel
        .strip_prefix("#server-to-user-")
        .is_some_and(is_valid_subscription_name)
}

/// The attributes of an `info` parameter (`a,b`), empty ones left out.
pub(crate) fn attributes(info: &str) -> Vec<String> {
    info.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Limits;

    /// The largest batch Pusher's API allows, every byte of its data and
    /// names escaped at its longest, fits in what a host reads.
    #[test]
    fn the_largest_batch_fits_the_body_limit() {
        let limits = Limits::default();
        let data = "\u{1}".repeat(limits.max_publish_data_bytes);
        let name = "\u{2}".repeat(MAX_PUBLISH_NAME_CHARS);
        let channels: Vec<String> = (0..MAX_EVENT_CHANNELS)
            .map(|i| format!("{i:03}{}", "c".repeat(161)))
            .collect();
        let event = serde_json::json!({
            "name": name, "data": data, "channels": channels,
            "socket_id": "123456789.987654321", "info": "subscription_count,user_count",
        });
        let body = serde_json::json!({ "batch": vec![event; MAX_BATCH_EVENTS] }).to_string();
        let limit = crate::edge::body_limit(&limits, "/apps/app-1/batch_events");
        assert!(body.len() <= limit, "{} > {limit}", body.len());
        let events = parse_batch(body.as_bytes(), limits.max_publish_data_bytes).unwrap();
        assert_eq!(events.len(), MAX_BATCH_EVENTS);
    }

    #[test]
    fn events_bodies() {
        let e = parse_event(
            br#"{"name":"n","data":"{}","channels":["a","b","a"],"socket_id":"1.2","info":"subscription_count"}"#,
            10,
        )
        .unwrap();
        assert_eq!(e.channels, ["a", "b"]);
        assert_eq!(e.socket_id.as_deref(), Some("1.2"));
        assert_eq!(e.info, ["subscription_count"]);
        assert_eq!(
            parse_event(br#"{"name":"n","data":"x","channel":"a"}"#, 10)
                .unwrap()
                .channels,
            ["a"]
        );
        let too_many: Vec<String> = (0..101).map(|i| format!("c{i}")).collect();
        let body = serde_json::json!({"name":"n","data":"x","channels":too_many}).to_string();
        assert_eq!(
            parse_event(body.as_bytes(), 10),
            Err(EventError::InvalidChannels)
        );
        for (body, err) in [
            (&br#"[]"#[..], EventError::InvalidBody),
            (br#"{"data":"x","channel":"a"}"#, EventError::InvalidName),
            (
                br#"{"name":"n","data":{},"channel":"a"}"#,
                EventError::InvalidData,
            ),
            (br#"{"name":"n","data":"x"}"#, EventError::InvalidChannels),
            (
                br#"{"name":"n","data":"x","channel":"a b"}"#,
                EventError::InvalidChannelName("a b".into()),
            ),
            (
                br#"{"name":"n","data":"12345678901","channel":"a"}"#,
                EventError::DataTooLarge(10),
            ),
            (
                br#"{"name":"n","data":"x","channel":"a","socket_id":"abc"}"#,
                EventError::InvalidSocketId("abc".into()),
            ),
            (
                br#"{"name":"n","data":"x","channel":"a","socket_id":"1.2.3"}"#,
                EventError::InvalidSocketId("1.2.3".into()),
            ),
            (
                br#"{"name":"n","data":"x","channel":"a","socket_id":"1."}"#,
                EventError::InvalidSocketId("1.".into()),
            ),
            (
                br#"{"name":"n","data":"x","channel":"a","socket_id":12}"#,
                EventError::InvalidSocketId("12".into()),
            ),
        ] {
            assert_eq!(parse_event(body, 10), Err(err));
        }
        let long = "c".repeat(165);
        let body = serde_json::json!({"name":"n","data":"x","channel":long}).to_string();
        assert_eq!(
            parse_event(body.as_bytes(), 10),
            Err(EventError::InvalidChannelName(long))
        );
        let at_limit = "c".repeat(164);
        let body = serde_json::json!({"name":"n","data":"x","channel":at_limit}).to_string();
        assert!(parse_event(body.as_bytes(), 10).is_ok());
        let batch: Vec<_> = (0..11)
            .map(|_| serde_json::json!({"name":"n","data":"x","channel":"a"}))
            .collect();
        let body = serde_json::json!({ "batch": batch }).to_string();
        assert_eq!(
            parse_batch(body.as_bytes(), 10),
            Err(EventError::BatchTooLarge)
        );
    }
}
