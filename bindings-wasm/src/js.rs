//! Plain JavaScript values built from engine types: outputs, responses and
//! errors that carry a `.code`.

use bubble_core::http::HttpResponse;
use bubble_core::{BatchId, ConnId, Misuse, Output};
use js_sys::{Object, Reflect, JSON};
use wasm_bindgen::JsValue;

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
        Misuse::InvalidSnapshot(_) => "invalid_snapshot",
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
    object(&fields)
}

/// `{kind: 'persist', batch, writes}`, with the writes already converted
/// (see `writes::to_json`).
pub(crate) fn persist(batch: BatchId, writes: JsValue) -> JsValue {
    object(&[
        ("kind", "persist".into()),
        ("batch", JsValue::from(batch.0 as f64)),
        ("writes", writes),
    ])
}

/// One output as `{kind, …}`. A `persist` output built here carries no
/// writes: callers convert those with [`persist`].
pub(crate) fn output(out: Output) -> JsValue {
    let conn = |c: ConnId| JsValue::from(c.0 as f64);
    match out {
        Output::Send { conn: c, frame } => object(&[
            ("kind", "send".into()),
            ("conn", conn(c)),
            ("frame", JsValue::from_str(&frame)),
        ]),
        Output::Ping { conn: c } => object(&[("kind", "ping".into()), ("conn", conn(c))]),
        Output::Close { conn: c, code } => object(&[
            ("kind", "close".into()),
            ("conn", conn(c)),
            ("code", JsValue::from(code)),
        ]),
        Output::Respond { req, response: r } => {
            let obj = response(r);
            let _ = Reflect::set(&obj, &"kind".into(), &"respond".into());
            let _ = Reflect::set(&obj, &"req".into(), &JsValue::from(req.0 as f64));
            obj
        }
        Output::Persist { batch, .. } => persist(batch, JsValue::UNDEFINED),
        Output::WantDrained { conn: c } => {
            object(&[("kind", "wantDrained".into()), ("conn", conn(c))])
        }
    }
}
