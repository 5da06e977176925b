//! Client transcripts (`clients/transcripts/*.json`), shared with the
//! JavaScript client's test: a client's config and seed, the inputs it was
//! given (each with its `now`), and the outputs it gave after its creation
//! and after each input, in the JSON form both clients use.
#![allow(dead_code)]

use std::path::PathBuf;

use bubble_core::client::{
    AppendId, Client, ClientConfig, ClientInput, ClientOutput, ConnectionState,
};
use bubble_core::{Millis, ThreadId};
use serde_json::{json, Value};

/// The folder of the transcripts.
pub fn folder() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../clients/transcripts"
    ))
}

fn text(value: &Value) -> &str {
    value.as_str().expect("a string")
}

fn thread(value: &Value) -> ThreadId {
    ThreadId::parse(text(value)).expect("valid thread id")
}

fn append_id(value: &Value) -> AppendId {
    AppendId(value.as_u64().expect("append id"))
}

/// The JSON form of a config.
pub fn config_json(config: &ClientConfig) -> Value {
    json!({
        "token": config.token,
        "refreshToken": config.refresh_token,
        "backoffBaseMs": config.backoff_base_ms,
        "backoffCapMs": config.backoff_cap_ms,
    })
}

/// The config of a JSON form.
pub fn config(value: &Value) -> ClientConfig {
    ClientConfig {
        token: value["token"].as_str().map(str::to_owned),
        refresh_token: value["refreshToken"] == json!(true),
        backoff_base_ms: value["backoffBaseMs"].as_u64().expect("base"),
        backoff_cap_ms: value["backoffCapMs"].as_u64().expect("cap"),
    }
}

/// The JSON form of an input.
pub fn input_json(input: &ClientInput<'_>) -> Value {
    match input {
        ClientInput::Subscribe { thread, from_seq } => {
            json!({ "type": "subscribe", "thread": thread, "fromSeq": from_seq })
        }
        ClientInput::Unsubscribe { thread } => json!({ "type": "unsubscribe", "thread": thread }),
        ClientInput::Append {
            append,
            thread,
            event,
        } => json!({ "type": "append", "append": append.0, "thread": thread, "event": event }),
        ClientInput::Opened => json!({ "type": "opened" }),
        ClientInput::Frame(text) => json!({ "type": "frame", "text": text }),
        ClientInput::Closed => json!({ "type": "closed" }),
        ClientInput::Token(token) => json!({ "type": "token", "token": token }),
        ClientInput::AppendDone {
            append,
            status,
            body,
        } => json!({ "type": "append_done", "append": append.0, "status": status, "body": body }),
        ClientInput::AppendFailed { append } => {
            json!({ "type": "append_failed", "append": append.0 })
        }
        ClientInput::Close => json!({ "type": "close" }),
        ClientInput::Tick => json!({ "type": "tick" }),
    }
}

/// The input of a JSON form.
pub fn input(i: &Value) -> ClientInput<'_> {
    match text(&i["type"]) {
        "subscribe" => ClientInput::Subscribe {
            thread: thread(&i["thread"]),
            from_seq: i["fromSeq"].as_u64().expect("fromSeq"),
        },
        "unsubscribe" => ClientInput::Unsubscribe {
            thread: thread(&i["thread"]),
        },
        "append" => ClientInput::Append {
            append: append_id(&i["append"]),
            thread: thread(&i["thread"]),
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

/// The JSON form of an output.
pub fn output_json(output: &ClientOutput) -> Value {
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

/// Everything the client has to say now.
pub fn drain(client: &mut Client) -> Vec<ClientOutput> {
    std::iter::from_fn(|| client.poll_output()).collect()
}

/// The outputs a new client gives for a transcript's config, seed and inputs.
pub fn replay(doc: &Value) -> Value {
    let seed: u64 = text(&doc["seed"]).parse().expect("a u64 seed");
    let mut client = Client::new(config(&doc["config"]), seed);
    let json = |outputs: Vec<ClientOutput>| {
        Value::from(outputs.iter().map(output_json).collect::<Vec<_>>())
    };
    let mut outputs = vec![json(drain(&mut client))];
    for step in doc["steps"].as_array().expect("steps") {
        let now = Millis(step["now"].as_u64().expect("now"));
        client
            .handle(now, input(&step["input"]))
            .expect("a valid input");
        outputs.push(json(drain(&mut client)));
    }
    Value::from(outputs)
}

/// A transcript being written down as a client runs.
#[derive(Debug)]
pub struct Recorder {
    config: Value,
    seed: u64,
    steps: Vec<Value>,
    outputs: Vec<Value>,
}

impl Recorder {
    /// A transcript of a client made with `config` and `seed`, whose first outputs were `outputs`.
    pub fn new(config: &ClientConfig, seed: u64, outputs: &[ClientOutput]) -> Recorder {
        Recorder {
            config: config_json(config),
            seed,
            steps: Vec::new(),
            outputs: vec![outputs.iter().map(output_json).collect()],
        }
    }

    /// One input at `now` and the outputs it caused.
    pub fn step(&mut self, now: Millis, input: &ClientInput<'_>, outputs: &[ClientOutput]) {
        self.steps
            .push(json!({ "now": now.0, "input": input_json(input) }));
        self.outputs.push(outputs.iter().map(output_json).collect());
    }

    /// The transcript's text: one line per step and per group of outputs.
    pub fn text(&self) -> String {
        let lines = |values: &[Value]| {
            values
                .iter()
                .map(|v| format!("    {v}"))
                .collect::<Vec<_>>()
                .join(",\n")
        };
        format!(
            "{{\n  \"config\": {},\n  \"seed\": \"{}\",\n  \"steps\": [\n{}\n  ],\n  \"outputs\": [\n{}\n  ]\n}}\n",
            self.config,
            self.seed,
            lines(&self.steps),
            lines(&self.outputs),
        )
    }
}
