//! The harness's HTTP helpers: requests, and the thread operations
//! tests set up state with.

use bubble_core::http::{HttpRequest, Method};
use bubble_core::store::Backend;
use bubble_core::{Input, RequestId};
use serde_json::{json, Value};

use super::{run_started, token, Harness, Resp, ADMIN};

impl<S: Backend> Harness<S> {
    // --- HTTP ---------------------------------------------------------------

    /// Sends a request and returns its id; the response may be held behind
    /// persistence (see [`Harness::response`]).
    pub fn send_request(
        &mut self,
        method: Method,
        who: Option<&str>,
        target: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> RequestId {
        let req = RequestId(self.next_req);
        self.next_req += 1;
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let authorization = who.map(|p| format!("Bearer {}", token(p)));
        let body = body.map(Value::to_string).unwrap_or_default();
        let request = HttpRequest {
            method,
            path,
            query,
            authorization: authorization.as_deref(),
            idempotency_key,
            body: body.as_bytes(),
        };
        self.input(Input::Http { req, request });
        req
    }

    /// The response to `req`, once the engine has answered.
    pub fn response(&mut self, req: RequestId) -> Option<Resp> {
        self.responses.remove(&req)
    }

    /// Sends a request with a raw body and returns the answer.
    #[track_caller]
    pub fn raw_request(
        &mut self,
        method: Method,
        authorization: Option<&str>,
        target: &str,
        body: &[u8],
    ) -> Resp {
        let req = RequestId(self.next_req);
        self.next_req += 1;
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let request = HttpRequest {
            method,
            path,
            query,
            authorization,
            idempotency_key: None,
            body,
        };
        self.input(Input::Http { req, request });
        self.response(req).expect("the engine answered")
    }

    /// Sends a request and returns the answer (which must not be held).
    #[track_caller]
    pub fn request(
        &mut self,
        method: Method,
        who: &str,
        target: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Resp {
        let req = self.send_request(method, Some(who), target, body, idempotency_key);
        self.response(req)
            .unwrap_or_else(|| panic!("no response to {target}"))
    }

    /// `GET target` as `who`.
    #[track_caller]
    pub fn get(&mut self, who: &str, target: &str) -> Resp {
        self.request(Method::Get, who, target, None, None)
    }

    /// `POST target` as `who`.
    #[track_caller]
    pub fn post(&mut self, who: &str, target: &str, body: Value) -> Resp {
        self.request(Method::Post, who, target, Some(&body), None)
    }

    /// `PATCH target` as `who`.
    #[track_caller]
    pub fn patch(&mut self, who: &str, target: &str, body: Value) -> Resp {
        self.request(Method::Patch, who, target, Some(&body), None)
    }

    /// `PUT target` as `who`.
    #[track_caller]
    pub fn put(&mut self, who: &str, target: &str, body: Value) -> Resp {
        self.request(Method::Put, who, target, Some(&body), None)
    }

    /// `DELETE target` as `who`.
    #[track_caller]
    pub fn delete(&mut self, who: &str, target: &str) -> Resp {
        self.request(Method::Delete, who, target, None, None)
    }

    // --- thread helpers -------------------------------------------------------

    /// Creates top-level `thread` as `who` (who becomes its owner).
    #[track_caller]
    pub fn create_thread(&mut self, who: &str, thread: &str) -> Value {
        self.post(who, "/v1/threads", json!({ "threadId": thread }))
            .expect(201)
            .body
    }

    /// Creates `thread` under `parent` as `who`.
    #[track_caller]
    pub fn create_subthread(&mut self, who: &str, thread: &str, parent: &str) -> Value {
        self.post(
            who,
            "/v1/threads",
            json!({ "threadId": thread, "parentThreadId": parent }),
        )
        .expect(201)
        .body
    }

    /// Grants `role` on `thread` to `principal`, as the admin.
    #[track_caller]
    pub fn grant(&mut self, thread: &str, principal: &str, role: &str) {
        let resp = self.put(
            ADMIN,
            &format!("/v1/threads/{thread}/grants/{principal}"),
            json!({ "role": role }),
        );
        assert!(
            (200..300).contains(&resp.status),
            "grant failed: {}",
            resp.body
        );
    }

    /// Revokes `principal`'s grant on `thread`, as the admin.
    #[track_caller]
    pub fn revoke(&mut self, thread: &str, principal: &str) {
        self.delete(ADMIN, &format!("/v1/threads/{thread}/grants/{principal}"))
            .expect(204);
    }

    /// Appends `event` to `thread` over HTTP as `who`.
    #[track_caller]
    pub fn append(&mut self, who: &str, thread: &str, event: Value) -> Resp {
        self.post(who, &format!("/v1/threads/{thread}/events"), event)
    }

    /// Appends `n` `run_started` events to `thread` as the admin.
    #[track_caller]
    pub fn append_n(&mut self, thread: &str, n: usize) {
        for i in 0..n {
            self.append(ADMIN, thread, run_started(&format!("run-{i}")))
                .expect(201);
        }
    }

    /// Sends `n` `run_started` appends to `thread` as the admin without
    /// waiting for their answers (they may be held behind persistence).
    pub fn append_n_async(&mut self, thread: &str, n: usize) -> Vec<RequestId> {
        let target = format!("/v1/threads/{thread}/events");
        (0..n)
            .map(|i| {
                let body = run_started(&format!("run-async-{i}"));
                self.send_request(Method::Post, Some(ADMIN), &target, Some(&body), None)
            })
            .collect()
    }

    /// Sends a revocation of `principal`'s grant on `thread` as the admin
    /// without waiting for the answer.
    pub fn revoke_async(&mut self, thread: &str, principal: &str) -> RequestId {
        let target = format!("/v1/threads/{thread}/grants/{principal}");
        self.send_request(Method::Delete, Some(ADMIN), &target, None, None)
    }

    /// `GET /v1/threads/:thread` as the admin.
    #[track_caller]
    pub fn thread(&mut self, thread: &str) -> Value {
        self.get(ADMIN, &format!("/v1/threads/{thread}"))
            .expect(200)
            .body
    }

    /// The thread's whole history, read as the admin.
    #[track_caller]
    pub fn history(&mut self, thread: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let mut from = 1;
        loop {
            let page = self
                .get(
                    ADMIN,
                    &format!("/v1/threads/{thread}/events?fromSeq={from}&limit=1000"),
                )
                .expect(200)
                .body;
            events.extend(
                page["events"]
                    .as_array()
                    .expect("events array")
                    .iter()
                    .cloned(),
            );
            match page["nextSeq"].as_u64() {
                Some(next) => from = next,
                None => return events,
            }
        }
    }
}
