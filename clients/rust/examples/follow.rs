//! Follows a thread: prints its history page by page, then every new event
//! live, across reconnections, and appends a `run_started` event to it.
//! Stops on Ctrl-C.
//!
//! With the server running (`cargo run --release -p bubble-server -- serve`)
//! and the thread `hello` created (see the README's quick start):
//!
//! ```sh
//! cargo run -p bubble-client --example follow -- http://127.0.0.1:3000 dev-alice hello
//! ```

use bubble_client::{Client, ConnectionState};
use futures_util::StreamExt as _;
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), bubble_client::Error> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:3000".into());
    let token = args.next().unwrap_or_else(|| "dev-alice".into());
    let thread_id = args.next().unwrap_or_else(|| "hello".into());

    let client = Client::connect(&url, token).await?;
    let mut state = client.state();
    tokio::spawn(async move {
        while state.changed().await.is_ok() {
            let now = *state.borrow_and_update();
            if let ConnectionState::Reconnecting { attempt, .. } = now {
                eprintln!("connection lost; reconnection attempt {attempt}");
            } else {
                eprintln!("connection: {now:?}");
            }
        }
    });
    let thread = client.thread(thread_id);

    // History first, then live from the next seq.
    let mut from_seq = 1;
    let mut pages = thread.history().limit(100);
    while let Some(page) = pages.next().await {
        for event in page?.events {
            println!("{} {}", event.seq, event.value);
            from_seq = event.seq + 1;
        }
    }
    let mut events = thread.subscribe(from_seq);
    let caught_up = events.caught_up().await?;
    eprintln!("caught up through seq {caught_up}; live from here");

    let run_id = format!("run-{}", std::process::id());
    let stored = thread
        .append(json!({"type": "run_started", "runId": run_id}))
        .await?;
    eprintln!("appended at seq {}", stored.seq);

    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(event) => {
                    let event = event?;
                    println!("{} {}", event.seq, event.value);
                }
                None => break,
            },
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    client.close().await;
    Ok(())
}
