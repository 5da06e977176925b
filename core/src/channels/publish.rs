//! HTTP publish: request validation and `Idempotency-Key` retention.

use std::collections::VecDeque;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::ids::{ClaimId, Millis, RequestId};
use crate::json::json_len;
use crate::maps::HashMap;

/// Most channels one publication may target.
pub const MAX_PUBLISH_CHANNELS: usize = 100;
/// Longest channel or event name a publication may use, in characters.
pub const MAX_PUBLISH_NAME_CHARS: usize = 200;
/// Longest `Idempotency-Key`, in characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 128;

/// Why a publish request was refused. Each variant has a stable `code`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    /// The body is not a JSON object.
    #[error("Request body must be a JSON object")]
    InvalidBody,
    /// `channel` is missing, of the wrong type, or an array of the wrong size.
    #[error("channel must be a string or an array of 1 to 100 strings")]
    InvalidChannels,
    /// A channel name is blank or longer than 200 characters.
    #[error("Channel names must be nonblank and at most 200 characters")]
    InvalidChannelName,
    /// A channel begins with `debug-` or `_`.
    #[error(
        "Channel \"{0}\" is reserved: channels beginning with debug- or _ cannot be published to"
    )]
    ReservedChannel(String),
    /// `name` is missing, not a string, blank or longer than 200 characters.
    #[error("name must be a nonblank string of at most 200 characters")]
    InvalidEventName,
    /// `data` serializes to more than the configured limit.
    #[error("data must be at most {0} bytes of JSON")]
    DataTooLarge(usize),
    /// `socket_id` is present but not a string.
    #[error("socket_id must be a string")]
    InvalidSocketId,
    /// The `Idempotency-Key` header is empty, too long or not printable ASCII.
    #[error("Idempotency-Key must be 1 to 128 printable, nonspace ASCII characters")]
    InvalidIdempotencyKey,
}

impl PublishError {
    /// The stable wire code (the `code` of the error body).
    pub fn code(&self) -> &'static str {
        match self {
            PublishError::InvalidBody => "invalid_body",
            PublishError::InvalidChannels => "invalid_channels",
            PublishError::InvalidChannelName => "invalid_channel_name",
            PublishError::ReservedChannel(_) => "reserved_channel",
            PublishError::InvalidEventName => "invalid_event_name",
            PublishError::DataTooLarge(_) => "data_too_large",
            PublishError::InvalidSocketId => "invalid_socket_id",
            PublishError::InvalidIdempotencyKey => "invalid_idempotency_key",
        }
    }

    /// The HTTP status: 413 for oversized data, 400 otherwise.
    pub fn http_status(&self) -> u16 {
        match self {
            PublishError::DataTooLarge(_) => 413,
            _ => 400,
        }
    }
}

/// A validated publication.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Publication {
    /// Target channels, without duplicates, in request order.
    pub(crate) channels: Vec<String>,
    /// The application event name.
    pub(crate) name: String,
    /// The payload (`null` when omitted).
    pub(crate) data: Value,
    /// The socket to leave out, if any.
    pub(crate) socket_id: Option<String>,
}

/// Validates a publish body against the seed's rules.
pub(crate) fn parse_publication(
    body: &[u8],
    max_data_bytes: usize,
) -> Result<Publication, PublishError> {
    let Ok(fields) = serde_json::from_slice::<Fields>(body) else {
        return Err(PublishError::InvalidBody);
    };
    let channels = match fields.channel {
        Some(Value::String(one)) => vec![one],
        Some(Value::Array(many)) if (1..=MAX_PUBLISH_CHANNELS).contains(&many.len()) => many
            .into_iter()
            .map(|c| match c {
                Value::String(s) => Ok(s),
                _ => Err(PublishError::InvalidChannels),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(PublishError::InvalidChannels),
    };
    let mut unique: Vec<String> = Vec::with_capacity(channels.len());
    for channel in channels {
        check_channel(&channel)?;
        if !unique.contains(&channel) {
            unique.push(channel);
        }
    }
    let name = match fields.name {
        Some(Value::String(name)) if is_valid_name(&name) => name,
        _ => return Err(PublishError::InvalidEventName),
    };
    let data = fields.data.unwrap_or(Value::Null);
    if json_len(&data) > max_data_bytes {
        return Err(PublishError::DataTooLarge(max_data_bytes));
    }
    let socket_id = match fields.socket_id {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id),
        Some(_) => return Err(PublishError::InvalidSocketId),
    };
    Ok(Publication {
        channels: unique,
        name,
        data,
        socket_id,
    })
}

/// The fields of a publish body the seed names, each still unchecked JSON.
/// Read straight from the body: no tree of the whole object is built, other
/// fields are skipped, and a field given twice keeps its last value.
#[derive(Default)]
struct Fields {
    channel: Option<Value>,
    name: Option<Value>,
    data: Option<Value>,
    socket_id: Option<Value>,
}

/// A key of a publish body.
enum Field {
    Channel,
    Name,
    Data,
    SocketId,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Field, D::Error> {
        struct Keys;
        impl Visitor<'_> for Keys {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Field, E> {
                Ok(match key {
                    "channel" => Field::Channel,
                    "name" => Field::Name,
                    "data" => Field::Data,
                    "socket_id" => Field::SocketId,
                    _ => Field::Other,
                })
            }
        }
        deserializer.deserialize_identifier(Keys)
    }
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Fields, D::Error> {
        struct Object;
        impl<'de> Visitor<'de> for Object {
            type Value = Fields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
                let mut fields = Fields::default();
                while let Some(key) = map.next_key::<Field>()? {
                    let slot = match key {
                        Field::Channel => &mut fields.channel,
                        Field::Name => &mut fields.name,
                        Field::Data => &mut fields.data,
                        Field::SocketId => &mut fields.socket_id,
                        Field::Other => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value()?);
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(Object)
    }
}

fn check_channel(channel: &str) -> Result<(), PublishError> {
    if !is_valid_name(channel) {
        return Err(PublishError::InvalidChannelName);
    }
    if channel.starts_with("debug-") || channel.starts_with('_') {
        return Err(PublishError::ReservedChannel(channel.to_owned()));
    }
    Ok(())
}

fn is_valid_name(name: &str) -> bool {
    !name.trim().is_empty() && name.chars().count() <= MAX_PUBLISH_NAME_CHARS
}

/// Checks an `Idempotency-Key` header: 1–128 printable, nonspace ASCII.
pub(crate) fn check_idempotency_key(key: &str) -> Result<(), PublishError> {
    let ok = (1..=MAX_IDEMPOTENCY_KEY_CHARS).contains(&key.len())
        && key.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(PublishError::InvalidIdempotencyKey)
    }
}

/// What a remembered key answers a repeat with. Its JSON form is the
/// record a cluster keeps under the key ([`Accepted::record`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Accepted {
    /// The original publication id.
    pub(crate) publication_id: String,
    /// The original target channels.
    pub(crate) channels: Vec<String>,
}

impl Accepted {
    /// The record kept under the key in a cluster.
    pub(crate) fn record(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a record written by [`Accepted::record`].
    pub(crate) fn from_record(record: &str) -> Option<Accepted> {
        serde_json::from_str(record).ok()
    }
}

/// A keyed publication waiting for its key's cluster-wide claim.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The request to answer.
    pub(crate) req: RequestId,
    /// The app.
    pub(crate) app: usize,
    /// The `Idempotency-Key`.
    pub(crate) key: String,
    /// What goes out if the claim is won.
    pub(crate) publication: Publication,
    /// Its id and channels.
    pub(crate) accepted: Accepted,
}

/// Publications waiting for their claims, by claim.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    pending: HashMap<ClaimId, Pending>,
    next: u64,
}

impl Claims {
    /// Parks `pending` under a new claim.
    pub(crate) fn open(&mut self, pending: Pending) -> ClaimId {
        self.next += 1;
        let claim = ClaimId(self.next);
        self.pending.insert(claim, pending);
        claim
    }

    /// Takes the publication waiting for `claim`.
    pub(crate) fn close(&mut self, claim: ClaimId) -> Option<Pending> {
        self.pending.remove(&claim)
    }
}

#[derive(Debug, Clone)]
struct Remembered {
    accepted: Accepted,
    expires: Millis,
}

/// One app's idempotency keys, each kept for the retention window and then
/// dropped by [`IdempotencyKeys::expire`], so memory follows the publish
/// rate over one window rather than growing forever.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdempotencyKeys {
    entries: HashMap<String, Remembered>,
    /// Keys in the order they expire (retention is the same for all).
    queue: VecDeque<(Millis, String)>,
}

impl IdempotencyKeys {
    /// The publication `key` names, if it is still retained at `now`.
    pub(crate) fn get(&self, key: &str, now: Millis) -> Option<&Accepted> {
        self.entries
            .get(key)
            .filter(|r| r.expires > now)
            .map(|r| &r.accepted)
    }

    /// Remembers `key` until `now + retention_ms`.
    pub(crate) fn remember(
        &mut self,
        key: &str,
        accepted: Accepted,
        now: Millis,
        retention_ms: u64,
    ) {
        let expires = now.plus(retention_ms);
        self.entries
            .insert(key.to_owned(), Remembered { accepted, expires });
        self.queue.push_back((expires, key.to_owned()));
    }

    /// Drops every key whose retention ended at or before `now`.
    pub(crate) fn expire(&mut self, now: Millis) {
        while let Some((at, _)) = self.queue.front() {
            if *at > now {
                break;
            }
            let Some((at, key)) = self.queue.pop_front() else {
                break;
            };
            if self.entries.get(&key).is_some_and(|r| r.expires <= at) {
                self.entries.remove(&key);
            }
        }
    }

    /// When the oldest key expires.
    pub(crate) fn next_expiry(&self) -> Option<Millis> {
        self.queue.front().map(|(at, _)| *at)
    }

    /// How many keys are retained.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(body: Value) -> Result<Publication, PublishError> {
        parse_publication(body.to_string().as_bytes(), 10 * 1024)
    }

    #[test]
    fn seed_example() {
        let p = parse(
            json!({"channel":"notifications","name":"order.created","data":{"orderId":"1042"}}),
        )
        .unwrap();
        assert_eq!(p.channels, vec!["notifications"]);
        assert_eq!(p.name, "order.created");
        assert_eq!(p.data, json!({"orderId":"1042"}));
        assert_eq!(p.socket_id, None);
    }

    #[test]
    fn channel_rules() {
        let many: Vec<String> = (0..100).map(|i| format!("c{i}")).collect();
        assert_eq!(
            parse(json!({"channel": many, "name":"e"}))
                .unwrap()
                .channels
                .len(),
            100
        );
        let too_many: Vec<String> = (0..101).map(|i| format!("c{i}")).collect();
        assert_eq!(
            parse(json!({"channel": too_many, "name":"e"})),
            Err(PublishError::InvalidChannels)
        );
        assert_eq!(
            parse(json!({"channel": [], "name":"e"})),
            Err(PublishError::InvalidChannels)
        );
        assert_eq!(
            parse(json!({"name":"e"})),
            Err(PublishError::InvalidChannels)
        );
        assert_eq!(
            parse(json!({"channel": 5, "name":"e"})),
            Err(PublishError::InvalidChannels)
        );
        assert_eq!(
            parse(json!({"channel": ["a", 5], "name":"e"})),
            Err(PublishError::InvalidChannels)
        );
        assert_eq!(
            parse(json!({"channel": " ", "name":"e"})),
            Err(PublishError::InvalidChannelName)
        );
        assert_eq!(
            parse(json!({"channel": "", "name":"e"})),
            Err(PublishError::InvalidChannelName)
        );
        assert!(parse(json!({"channel": "x".repeat(200), "name":"e"})).is_ok());
        assert_eq!(
            parse(json!({"channel": "x".repeat(201), "name":"e"})),
            Err(PublishError::InvalidChannelName)
        );
        assert_eq!(
            parse(json!({"channel": ["ok", "debug-x"], "name":"e"})),
            Err(PublishError::ReservedChannel("debug-x".into()))
        );
        assert_eq!(
            parse(json!({"channel": "_x", "name":"e"})),
            Err(PublishError::ReservedChannel("_x".into()))
        );
        assert_eq!(
            parse(json!({"channel": ["a", "b", "a"], "name":"e"}))
                .unwrap()
                .channels,
            vec!["a", "b"]
        );
    }

    #[test]
    fn name_data_and_socket_rules() {
        assert_eq!(
            parse(json!({"channel":"a"})),
            Err(PublishError::InvalidEventName)
        );
        assert_eq!(
            parse(json!({"channel":"a","name":"  "})),
            Err(PublishError::InvalidEventName)
        );
        assert_eq!(
            parse(json!({"channel":"a","name":7})),
            Err(PublishError::InvalidEventName)
        );
        assert!(parse(json!({"channel":"a","name":"é".repeat(200)})).is_ok());
        assert_eq!(
            parse(json!({"channel":"a","name":"x".repeat(201)})),
            Err(PublishError::InvalidEventName)
        );
        assert_eq!(
            parse(json!({"channel":"a","name":"e"})).unwrap().data,
            Value::Null
        );
        assert_eq!(
            parse(json!({"channel":"a","name":"e","data":null}))
                .unwrap()
                .data,
            Value::Null
        );
        // A string of n ASCII letters serializes to n + 2 bytes.
        assert!(parse(json!({"channel":"a","name":"e","data":"x".repeat(10 * 1024 - 2)})).is_ok());
        assert_eq!(
            parse(json!({"channel":"a","name":"e","data":"x".repeat(10 * 1024 - 1)})),
            Err(PublishError::DataTooLarge(10 * 1024))
        );
        assert_eq!(
            parse(json!({"channel":"a","name":"e","socket_id":1})),
            Err(PublishError::InvalidSocketId)
        );
        assert_eq!(
            parse(json!({"channel":"a","name":"e","socket_id":"abc"}))
                .unwrap()
                .socket_id
                .as_deref(),
            Some("abc")
        );
        assert_eq!(
            parse_publication(b"[1]", 10),
            Err(PublishError::InvalidBody)
        );
        assert_eq!(parse_publication(b"{", 10), Err(PublishError::InvalidBody));
    }

    #[test]
    fn the_body_is_read_as_a_json_object_would_be() {
        let read = |body: &str| parse_publication(body.as_bytes(), 1024);
        // A field given twice keeps its last value, whatever the first was.
        let p = read(r#"{"name":5,"channel":"a","name":"second"}"#).unwrap();
        assert_eq!(p.name, "second");
        // Escaped keys are the keys they spell; other fields are skipped,
        // however deep.
        let p = read(
            r#"{"ch\u0061nnel":"a","n\u0061me":"e","info":{"x":[1,{"y":null}]},"channels":5}"#,
        )
        .unwrap();
        assert_eq!(
            (p.channels, p.name),
            (vec!["a".to_string()], "e".to_string())
        );
        let p = read(r#"{"channel":"a","name":"e","data":{"k":[1,"v"]}}"#).unwrap();
        assert_eq!(p.data, json!({"k":[1,"v"]}));
        for bad in [
            "null",
            "\"text\"",
            "5",
            "{\"channel\":\"a\",\"name\":\"e\"} x",
            "{\"channel\":\"a\",\"name\":\"e\",\"info\":[1,}",
            "{\"channel\":\"a\",\"name\":\"e\",}",
            "\u{feff}{}",
        ] {
            assert_eq!(read(bad), Err(PublishError::InvalidBody), "{bad}");
        }
    }

    #[test]
    fn idempotency_key_format() {
        assert!(check_idempotency_key("order-1042-created").is_ok());
        assert!(check_idempotency_key(&"k".repeat(128)).is_ok());
        assert!(check_idempotency_key(&"k".repeat(129)).is_err());
        assert!(check_idempotency_key("").is_err());
        assert!(check_idempotency_key("has space").is_err());
        assert!(check_idempotency_key("tab\t").is_err());
        assert!(check_idempotency_key("é").is_err());
    }

    #[test]
    fn keys_expire_after_retention() {
        let mut keys = IdempotencyKeys::default();
        let accepted = Accepted {
            publication_id: "p1".into(),
            channels: vec!["a".into()],
        };
        keys.remember("k1", accepted.clone(), Millis(1_000), 100);
        keys.remember("k2", accepted.clone(), Millis(1_050), 100);
        assert_eq!(keys.next_expiry(), Some(Millis(1_100)));
        assert_eq!(keys.get("k1", Millis(1_099)), Some(&accepted));
        assert_eq!(keys.get("k1", Millis(1_100)), None);
        keys.expire(Millis(1_099));
        assert_eq!(keys.len(), 2);
        keys.expire(Millis(1_100));
        assert_eq!(keys.len(), 1);
        assert_eq!(keys.next_expiry(), Some(Millis(1_150)));
        keys.expire(Millis(5_000));
        assert_eq!(keys.len(), 0);
        assert_eq!(keys.next_expiry(), None);
    }

    #[test]
    fn re_remembered_key_survives_its_old_expiry() {
        let mut keys = IdempotencyKeys::default();
        let first = Accepted {
            publication_id: "p1".into(),
            channels: vec![],
        };
        let second = Accepted {
            publication_id: "p2".into(),
            channels: vec![],
        };
        keys.remember("k", first, Millis(0), 100);
        keys.remember("k", second.clone(), Millis(100), 100);
        keys.expire(Millis(100));
        assert_eq!(keys.get("k", Millis(150)), Some(&second));
        keys.expire(Millis(200));
        assert_eq!(keys.len(), 0);
    }
}
