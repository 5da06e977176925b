//! An event's stored JSON text, written into a JSON document as the JSON it
//! is (not as a string), and read back byte for byte.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

pub(super) fn serialize<S: Serializer>(json: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    let raw: &RawValue = serde_json::from_str(json).map_err(serde::ser::Error::custom)?;
    raw.serialize(serializer)
}

pub(super) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Arc<str>, D::Error> {
    let raw = Box::<RawValue>::deserialize(deserializer)?;
    Ok(Arc::from(raw.get()))
}
