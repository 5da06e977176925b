//! Plain JavaScript values built from engine types: outputs, read queries,
//! responses and errors that carry a `.code`.

use bubble_core::http::HttpResponse;
use bubble_core::store::ReadQuery;
use bubble_core::{BatchId, ConnId, Misuse, Output, ThreadId};
use js_sys::{Object, Reflect, JSON};
use wasm_bindgen::JsValue;

/// The largest integer a JavaScript number holds exactly (2^53 - 1).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A `{key: value, …}` object.
pub(crate) fn object(fields: &[(&str, JsValue)]) -> JsValue {
    let obj = Object::new();
    for (key, value) in fields {
        // Setting a property on a fresh plain object cannot throw.
        let _ = Reflect::set(&obj, &JsValue::from_str(key), value);
    }
    obj.into()
}

/// A JavaScript `Error` with `message` and a string `code` property.
pub(crate) fn error(code: &str, message: impl std::fmt::Display) -> JsValue {
    let err = js_sys::Error::new(&message.to_string());
    let _ = Reflect::set(&err, &JsValue::from_str("code"), &JsValue::from_str(code));
    err.into()
}

/// The error for a host that broke the driving contract.
pub(crate) fn misuse(m: Misuse) -> JsValue {
    let code = match m {
        Misuse::UnknownConn(_) => "unknown_connection",
        Misuse::ConnInUse(_) => "connection_in_use",
        Misuse::UnknownBatch(_) => "unknown_batch",
    };
    error(code, m)
}

/// JSON text as a JavaScript value.
pub(crate) fn parse_json(text: &str) -> Result<JsValue, JsValue> {
    JSON::parse(text)
}

/// `{status, contentType, body, retryAfter?}`.
pub(crate) fn response(r: HttpResponse) -> JsValue {
    let mut fields = vec![
        ("status", JsValue::from(r.status)),
        ("contentType", JsValue::from_str(r.content_type.as_str())),
        ("body", JsValue::from(r.body)),
    ];
    if let Some(seconds) = r.retry_after {
        fields.push(("retryAfter", JsValue::from(seconds as f64)));
    }
    if !r.headers.is_empty() {
        fields.push(("headers", header_pairs(r.headers)));
    }
    object(&fields)
}

/// `[[name, value], …]`: headers the core decided (CORS).
pub(crate) fn header_pairs(headers: Vec<(&'static str, String)>) -> JsValue {
    headers
        .into_iter()
        .map(|(name, value)| {
            let pair = js_sys::Array::new();
            pair.push(&JsValue::from_str(name));
            pair.push(&JsValue::from(value));
            JsValue::from(pair)
        })
        .collect::<js_sys::Array>()
        .into()
}

/// A count or seq as a number (clamped to the exact range, which no real
/// count or seq leaves).
fn number(n: u64) -> JsValue {
    JsValue::from(n.min(MAX_SAFE_INTEGER) as f64)
}

fn id(thread: &ThreadId) -> JsValue {
    JsValue::from_str(thread.as_str())
}

fn id_or_null(thread: Option<&ThreadId>) -> JsValue {
    thread.map_or(JsValue::NULL, id)
}

/// `{kind: 'persist', batch, writes}`, with the writes already converted
/// (see `wire::batch_json`).
pub(crate) fn persist(batch: BatchId, writes: JsValue) -> JsValue {
    object(&[
        ("kind", "persist".into()),
        ("batch", number(batch.0)),
        ("writes", writes),
    ])
}

/// A read query as `{kind: 'events' | 'idempotent' | 'thread' | 'threads', …}`.
fn query(q: &ReadQuery) -> JsValue {
    match q {
        ReadQuery::Events {
            thread_id,
            from_seq,
            through_seq,
            limit,
        } => object(&[
            ("kind", "events".into()),
            ("threadId", id(thread_id)),
            ("fromSeq", number(*from_seq)),
            ("throughSeq", number(*through_seq)),
            ("limit", number(*limit as u64)),
        ]),
        ReadQuery::Idempotent { thread_id, key } => object(&[
            ("kind", "idempotent".into()),
            ("threadId", id(thread_id)),
            ("key", JsValue::from_str(key)),
        ]),
        ReadQuery::Thread { thread_id } => {
            object(&[("kind", "thread".into()), ("threadId", id(thread_id))])
        }
        ReadQuery::Threads {
            parent,
            after,
            limit,
        } => object(&[
            ("kind", "threads".into()),
            ("parent", id_or_null(parent.as_ref())),
            ("after", id_or_null(after.as_ref())),
            ("limit", number(*limit as u64)),
        ]),
    }
}

/// One output as `{kind, …}`. A `persist` output built here carries no
/// writes: callers convert those with [`persist`].
pub(crate) fn output(out: Output) -> JsValue {
    let conn = |c: ConnId| number(c.0);
    match out {
        Output::Send { conn: c, frame } => object(&[
            ("kind", "send".into()),
            ("conn", conn(c)),
            ("frame", JsValue::from_str(&frame)),
        ]),
        Output::SendAll { conns, frame } => object(&[
            ("kind", "sendAll".into()),
            (
                "conns",
                conns
                    .into_iter()
                    .map(conn)
                    .collect::<js_sys::Array>()
                    .into(),
            ),
            ("frame", JsValue::from_str(&frame)),
        ]),
        Output::Ping { conn: c } => object(&[("kind", "ping".into()), ("conn", conn(c))]),
        Output::Close { conn: c, reason } => object(&[
            ("kind", "close".into()),
            ("conn", conn(c)),
            ("code", reason.code().map_or(JsValue::NULL, JsValue::from)),
        ]),
        Output::Respond { req, response: r } => {
            let obj = response(r);
            let _ = Reflect::set(&obj, &"kind".into(), &"respond".into());
            let _ = Reflect::set(&obj, &"req".into(), &number(req.0));
            obj
        }
        Output::Persist { batch, .. } => persist(batch, JsValue::UNDEFINED),
        Output::Read { read, query: q } => object(&[
            ("kind", "read".into()),
            ("read", number(read.0)),
            ("query", query(&q)),
        ]),
        Output::Webhook {
            url,
            key,
            signature,
            body,
        } => object(&[
            ("kind", "webhook".into()),
            ("url", url.into()),
            ("key", key.into()),
            ("signature", signature.into()),
            ("body", body.into()),
        ]),
        Output::WantDrained { conn: c } => {
            object(&[("kind", "wantDrained".into()), ("conn", conn(c))])
        }
        // A worker's engine is one node (`cluster` is never set here); a
        // JavaScript host that links nodes would carry these.
        Output::Broadcast { message } => object(&[
            ("kind", "broadcast".into()),
            (
                "message",
                JsValue::from_str(&serde_json::to_string(&message).unwrap_or_default()),
            ),
        ]),
        // Asked only for a key set the host can fetch; a worker's is inline.
        Output::FetchKeys => object(&[("kind", "fetchKeys".into())]),
        Output::Claim {
            claim,
            app_id,
            key,
            value,
            ttl_ms,
        } => object(&[
            ("kind", "claim".into()),
            ("claim", number(claim.0)),
            ("appId", JsValue::from_str(&app_id)),
            ("key", JsValue::from_str(&key)),
            ("value", JsValue::from_str(&value)),
            ("ttlMs", number(ttl_ms)),
        ]),
    }
}
