//! Whatever a client sends, the engine answers only with pubb control
//! events and closes, and never panics.

use proptest::prelude::*;
use serde_json::json;

use super::{Harness, Input, Output, WsFrame};
use crate::ids::ConnId;
use crate::io::ChannelProtocol;

fn message() -> impl Strategy<Value = String> {
    let action = prop_oneof![
        Just("subscribe"),
        Just("unsubscribe"),
        Just("ping"),
        Just("")
    ];
    let channel = "(private-|presence-)?[a-z;@=]{0,5}";
    prop_oneof![
        ".{0,40}",
        (action, channel).prop_map(|(a, c)| json!({"action": a, "channel": c}).to_string()),
        (channel, ".{0,20}").prop_map(|(c, auth)| {
            json!({"action": "subscribe", "channel": c, "auth": auth, "channel_data": "{}"})
                .to_string()
        }),
    ]
}

proptest! {
    #[test]
    fn arbitrary_messages(messages in proptest::collection::vec(message(), 1..30)) {
        let mut h = Harness::new();
        h.open(1, 1, ChannelProtocol::V2);
        for text in &messages {
            h.now = h.now.plus(10);
            let outs = h.handle(Input::Frame { conn: ConnId(1), frame: WsFrame::Text(text) });
            for out in outs {
                match out {
                    Output::Send { conn, .. } | Output::Close { conn, .. } => prop_assert_eq!(conn, ConnId(1)),
                    Output::SendAll { conns, .. } => prop_assert_eq!(conns, vec![ConnId(1)]),
                    other => prop_assert!(false, "unexpected output {:?}", other),
                }
            }
        }
        for (_, frame) in h.take() {
            let event = frame["event"].as_str().unwrap_or_default();
            prop_assert!(
                ["pubb:subscription_succeeded", "subscription_error", "error"].contains(&event),
                "unexpected frame {}", frame
            );
        }
    }
}
