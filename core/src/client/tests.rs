//! The client's misuse errors and the edges of its timers; the protocol
//! behaviour is tested against the engine (`core/tests/client_resume.rs`)
//! and by the shared transcript (`core/tests/client_transcript.rs`).

use serde_json::{json, Map, Value};

use super::*;

fn tid(s: &str) -> ThreadId {
    ThreadId::parse(s).unwrap()
}

fn drain(client: &mut Client) -> Vec<ClientOutput> {
    std::iter::from_fn(|| client.poll_output()).collect()
}

fn event() -> Map<String, Value> {
    let Value::Object(map) = json!({ "type": "run_started", "runId": "r" }) else {
        unreachable!()
    };
    map
}

fn open_client() -> Client {
    let mut client = Client::new(ClientConfig::default(), 1);
    client.handle(Millis(0), ClientInput::Opened).unwrap();
    drain(&mut client);
    client
}

#[test]
fn misuse_is_refused() {
    let mut client = open_client();
    let t = tid("thread-1");
    let now = Millis(1);
    assert_eq!(
        client.handle(
            now,
            ClientInput::Subscribe {
                thread: t.clone(),
                from_seq: 0
            }
        ),
        Err(ClientMisuse::FromSeqZero)
    );
    client
        .handle(
            now,
            ClientInput::Subscribe {
                thread: t.clone(),
                from_seq: 1,
            },
        )
        .unwrap();
    assert_eq!(
        client.handle(
            now,
            ClientInput::Subscribe {
                thread: t.clone(),
                from_seq: 1
            }
        ),
        Err(ClientMisuse::AlreadySubscribed(t.clone()))
    );
    let append = |client: &mut Client| {
        client.handle(
            now,
            ClientInput::Append {
                append: AppendId(1),
                thread: t.clone(),
                event: event(),
            },
        )
    };
    append(&mut client).unwrap();
    assert_eq!(
        append(&mut client),
        Err(ClientMisuse::AppendInUse(AppendId(1)))
    );
    client.handle(now, ClientInput::Close).unwrap();
    assert_eq!(append(&mut client), Err(ClientMisuse::Closed));
    assert_eq!(client.handle(now, ClientInput::Tick), Ok(()));
    assert_eq!(client.poll_timeout(), None);
}

#[test]
fn retries_wait_for_the_connection_without_a_deadline() {
    let mut client = open_client();
    let t = tid("thread-1");
    let input = ClientInput::Append {
        append: AppendId(7),
        thread: t,
        event: event(),
    };
    client.handle(Millis(10), input).unwrap();
    assert!(matches!(
        drain(&mut client)[..],
        [ClientOutput::Post { .. }]
    ));
    client
        .handle(
            Millis(20),
            ClientInput::AppendFailed {
                append: AppendId(7),
            },
        )
        .unwrap();
    let retry = client
        .poll_timeout()
        .expect("a retry deadline while online");
    assert!(retry > Millis(20));
    client.handle(Millis(30), ClientInput::Closed).unwrap();
    // Offline, only the reconnection has a deadline: the retry waits for it.
    let Some(ClientOutput::State(ConnectionState::Reconnecting { at, .. })) = client.poll_output()
    else {
        panic!("reconnecting")
    };
    assert_eq!(client.poll_timeout(), Some(at));
    client.handle(at, ClientInput::Tick).unwrap();
    client.handle(at, ClientInput::Opened).unwrap();
    let posts = drain(&mut client)
        .into_iter()
        .filter(|o| matches!(o, ClientOutput::Post { .. }))
        .count();
    assert_eq!(posts, 1, "the retry goes out on the new connection");
}

#[test]
fn timeouts_and_throttling_are_retried_other_client_errors_rejected() {
    for (status, retried) in [
        (408, true),
        (429, true),
        (500, true),
        (503, true),
        (400, false),
        (404, false),
        (413, false),
    ] {
        let mut client = open_client();
        let input = ClientInput::Append {
            append: AppendId(1),
            thread: tid("t"),
            event: event(),
        };
        client.handle(Millis(1), input).unwrap();
        drain(&mut client);
        let body = r#"{"error":{"code":"some_code","message":"Some message."}}"#;
        client
            .handle(
                Millis(2),
                ClientInput::AppendDone {
                    append: AppendId(1),
                    status,
                    body,
                },
            )
            .unwrap();
        let out = drain(&mut client);
        if retried {
            assert!(out.is_empty(), "{status}: {out:?}");
            assert!(client.poll_timeout().is_some(), "{status}");
        } else {
            assert_eq!(
                out,
                vec![ClientOutput::AppendRejected {
                    append: AppendId(1),
                    thread: tid("t"),
                    error: RemoteError {
                        code: "some_code".into(),
                        message: "Some message.".into()
                    },
                }],
                "{status}"
            );
        }
    }
}
