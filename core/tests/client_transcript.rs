//! The client transcript shared with the JavaScript client
//! (`clients/transcripts/core-client.json`): a scripted run of inputs and,
//! per input, the outputs the core client gives. The JavaScript client's
//! test (`tests/js/client.test.mjs`) replays the same inputs and must give
//! the same outputs, so the two clients follow one set of rules.
//! `BLESS=1` rewrites the expected outputs from the core.

use bubble_core::client::{
    AppendId, Client, ClientConfig, ClientInput, ClientOutput, ConnectionState,
};
use bubble_core::{Millis, ThreadId};
use serde_json::{json, Value};

const PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../clients/transcripts/core-client.json"
);

fn id(value: &Value) -> ThreadId {
    ThreadId::parse(value.as_str().expect("thread id")).expect("valid thread id")
}

fn append_id(value: &Value) -> AppendId {
    AppendId(value.as_u64().expect("append id"))
}

fn text(value: &Value) -> &str {
    value.as_str().expect("a string")
}

/// The JSON form both clients give of an output.
fn output_json(output: ClientOutput) -> Value {
    match output {
        ClientOutput::State(state) => match state {
            ConnectionState::Connecting => json!({ "type": "state", "state": "connecting" }),
            ConnectionState::Open => json!({ "type": "state", "state": "open" }),
            ConnectionState::Closed => json!({ "type": "state", "state": "closed" }),
            ConnectionState::Reconnecting { attempt, at } => {
                json!({ "type": "state", "state": "reconnecting", "attempt": attempt, "at": at.0 })
            }
        },
        ClientOutput::NeedToken => json!({ "type": "need_token" }),
        ClientOutput::Connect { token } => json!({ "type": "connect", "token": token }),
        ClientOutput::Disconnect => json!({ "type": "disconnect" }),
        ClientOutput::Send(frame) => json!({ "type": "send", "frame": frame }),
        ClientOutput::Post {
            append,
            thread,
            idempotency_key,
            body,
            token,
        } => {
            json!({ "type": "post", "append": append.0, "thread": thread, "idempotencyKey": idempotency_key, "body": body, "token": token })
        }
        ClientOutput::Event { thread, seq, event } => {
            json!({ "type": "event", "thread": thread, "seq": seq, "event": event })
        }
        ClientOutput::CaughtUp {
            thread,
            through_seq,
        } => json!({ "type": "caught_up", "thread": thread, "throughSeq": through_seq }),
        ClientOutput::Appended {
            append,
            thread,
            event,
        } => json!({ "type": "appended", "append": append.0, "thread": thread, "event": event }),
        ClientOutput::AppendRejected {
            append,
            thread,
            error,
        } => {
            json!({ "type": "append_rejected", "append": append.0, "thread": thread, "code": error.code, "message": error.message })
        }
        ClientOutput::ThreadError { thread, error } => {
            json!({ "type": "thread_error", "thread": thread, "code": error.code, "message": error.message })
        }
        ClientOutput::SubscriptionClosed {
            thread,
            reason,
            resubscribing,
        } => {
            json!({ "type": "subscription_closed", "thread": thread, "reason": reason, "resubscribing": resubscribing })
        }
        ClientOutput::ConnectionError { error } => {
            json!({ "type": "connection_error", "code": error.code, "message": error.message })
        }
    }
}

fn input(step: &Value) -> ClientInput<'_> {
    let i = &step["input"];
    match text(&i["type"]) {
        "subscribe" => ClientInput::Subscribe {
            thread: id(&i["thread"]),
            from_seq: i["fromSeq"].as_u64().expect("fromSeq"),
        },
        "unsubscribe" => ClientInput::Unsubscribe {
            thread: id(&i["thread"]),
        },
        "append" => ClientInput::Append {
            append: append_id(&i["append"]),
            thread: id(&i["thread"]),
            event: i["event"].as_object().expect("event object").clone(),
        },
        "opened" => ClientInput::Opened,
        "frame" => ClientInput::Frame(text(&i["text"])),
        "closed" => ClientInput::Closed,
        "token" => ClientInput::Token(i["token"].as_str().map(str::to_owned)),
        "append_done" => ClientInput::AppendDone {
            append: append_id(&i["append"]),
            status: u16::try_from(i["status"].as_u64().expect("status")).expect("a status"),
            body: text(&i["body"]),
        },
        "append_failed" => ClientInput::AppendFailed {
            append: append_id(&i["append"]),
        },
        "close" => ClientInput::Close,
        "tick" => ClientInput::Tick,
        other => panic!("unknown input {other}"),
    }
}

fn drain(client: &mut Client) -> Vec<Value> {
    std::iter::from_fn(|| client.poll_output())
        .map(output_json)
        .collect()
}

#[test]
fn the_core_client_gives_the_transcripts_outputs() {
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(PATH).expect("the transcript"))
            .expect("JSON");
    let config = &doc["config"];
    let config = ClientConfig {
        token: config["token"].as_str().map(str::to_owned),
        refresh_token: config["refreshToken"] == json!(true),
        backoff_base_ms: config["backoffBaseMs"].as_u64().expect("base"),
        backoff_cap_ms: config["backoffCapMs"].as_u64().expect("cap"),
    };
    let seed: u64 = text(&doc["seed"]).parse().expect("a u64 seed");
    let mut client = Client::new(config, seed);
    let mut outputs = vec![drain(&mut client)];
    for step in doc["steps"].as_array().expect("steps") {
        let now = Millis(step["now"].as_u64().expect("now"));
        client.handle(now, input(step)).expect("a valid input");
        outputs.push(drain(&mut client));
    }
    let actual = Value::from(outputs);
    if std::env::var_os("BLESS").is_some() {
        doc["outputs"] = actual;
        let text = serde_json::to_string_pretty(&doc).expect("JSON") + "\n";
        std::fs::write(PATH, text).expect("write the transcript");
        return;
    }
    assert_eq!(
        actual, doc["outputs"],
        "the core's outputs differ from the transcript"
    );
}
