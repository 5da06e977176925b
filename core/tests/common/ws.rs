//! The harness's `/v1/ws` helpers: connections, frames sent and received.

use bubble_core::store::Backend;
use bubble_core::{ConnId, Input, ThreadId, WsFrame};
use serde_json::{json, Value};

use super::{token, Harness};

impl<S: Backend> Harness<S> {
    // --- WebSocket --------------------------------------------------------------

    /// Opens a `/v1/ws` connection as `who`.
    pub fn connect(&mut self, who: &str) -> ConnId {
        self.connect_with_token(Some(&token(who)))
    }

    /// Opens a `/v1/ws` connection presenting `token` (or none).
    pub fn connect_with_token(&mut self, token: Option<&str>) -> ConnId {
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.open.insert(conn);
        self.input(Input::OpenThreads { conn, token });
        conn
    }

    /// Opens a `/v1/ws` connection resumed from another engine: `token`,
    /// and per thread the next seq to send.
    pub fn resume(&mut self, token: Option<&str>, subscriptions: &[(ThreadId, u64)]) -> ConnId {
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.open.insert(conn);
        self.input(Input::ResumeThreads {
            conn,
            token,
            subscriptions,
        });
        conn
    }

    /// Sends a JSON text frame.
    pub fn send(&mut self, conn: ConnId, frame: Value) {
        self.send_text(conn, &frame.to_string());
    }

    /// Sends a text frame.
    pub fn send_text(&mut self, conn: ConnId, text: &str) {
        self.input(Input::Frame {
            conn,
            frame: WsFrame::Text(text),
        });
    }

    /// Sends a binary frame.
    pub fn send_binary(&mut self, conn: ConnId, bytes: &[u8]) {
        self.input(Input::Frame {
            conn,
            frame: WsFrame::Binary(bytes),
        });
    }

    /// Sends a WebSocket Pong.
    pub fn pong(&mut self, conn: ConnId) {
        self.input(Input::Pong { conn });
    }

    /// The client closes `conn`.
    pub fn disconnect(&mut self, conn: ConnId) {
        if self.open.remove(&conn) {
            self.want_drained.remove(&conn);
            self.input(Input::Closed { conn });
        }
    }

    /// `thread.subscribe`, with `fromSeq` when given.
    pub fn subscribe(&mut self, conn: ConnId, thread: &str, from_seq: Option<u64>) {
        let mut frame = json!({ "type": "thread.subscribe", "threadId": thread });
        if let Some(from) = from_seq {
            frame["fromSeq"] = json!(from);
        }
        self.send(conn, frame);
    }

    /// `thread.unsubscribe`.
    pub fn unsubscribe(&mut self, conn: ConnId, thread: &str) {
        self.send(
            conn,
            json!({ "type": "thread.unsubscribe", "threadId": thread }),
        );
    }

    /// `thread.append`.
    pub fn ws_append(&mut self, conn: ConnId, thread: &str, event: Value) {
        self.send(
            conn,
            json!({ "type": "thread.append", "threadId": thread, "event": event }),
        );
    }

    /// Takes the frames `conn` received since the last call.
    pub fn frames(&mut self, conn: ConnId) -> Vec<Value> {
        self.frames.remove(&conn).unwrap_or_default()
    }

    /// The close code the engine asked for on `conn`, if any.
    pub fn close_code(&self, conn: ConnId) -> Option<u16> {
        self.closes.get(&conn).copied()
    }

    /// Whether `conn` is still open.
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.open.contains(&conn)
    }

    /// Takes the connections pinged since the last call.
    pub fn pings(&mut self) -> Vec<ConnId> {
        std::mem::take(&mut self.pings)
    }
}
