//! The `/v1/threads…` routes (SPEC §4): routing, request validation and
//! response bodies. Decisions are made by the operations in `ops`.

use serde_json::{Map, Value};

use crate::auth::AuthError;
use crate::engine::Ctx;
use crate::error::BubbleError;
use crate::http::{HttpRequest, HttpResponse, Method};
use crate::ids::{PrincipalId, ThreadId};
use crate::policy::{Capability, Role};
use crate::store::EventStore;
use crate::threads::ops::CreateRequest;
use crate::threads::query::Query;
use crate::threads::state::Caller;
use crate::threads::Threads;

/// Longest accepted principal id in a path or body, in characters.
const MAX_PRINCIPAL_CHARS: usize = 256;

fn no_route(path: &str) -> BubbleError {
    BubbleError::NotFound(format!("No route for \"{path}\"."))
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// The request body as a JSON object; an empty body counts as `{}` where
/// `empty_ok`. Fields outside `allowed` are refused.
fn object(
    body: &[u8],
    empty_ok: bool,
    allowed: &[&str],
) -> Result<Map<String, Value>, BubbleError> {
    if empty_ok && body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| BubbleError::InvalidRequest(format!("The body is not valid JSON: {e}.")))?;
    let Value::Object(map) = value else {
        return Err(BubbleError::InvalidRequest(
            "The body must be a JSON object.".into(),
        ));
    };
    if !allowed.is_empty() {
        if let Some(field) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(BubbleError::InvalidRequest(format!(
                "Unknown field \"{field}\"."
            )));
        }
    }
    Ok(map)
}

/// A string field: `Ok(None)` when absent, `Some(None)` when `null`
/// (only where `nullable`).
fn string_field(
    map: &Map<String, Value>,
    name: &str,
    nullable: bool,
) -> Result<Option<Option<String>>, BubbleError> {
    match map.get(name) {
        None => Ok(None),
        Some(Value::Null) if nullable => Ok(Some(None)),
        Some(Value::String(s)) => Ok(Some(Some(s.clone()))),
        Some(_) => Err(BubbleError::InvalidRequest(format!(
            "Field \"{name}\" must be a string{}.",
            if nullable { " or null" } else { "" }
        ))),
    }
}

fn thread_field(map: &Map<String, Value>, name: &str) -> Result<Option<ThreadId>, BubbleError> {
    string_field(map, name, false)?
        .flatten()
        .map(|raw| ThreadId::parse(&raw))
        .transpose()
}

fn role_field(map: &Map<String, Value>) -> Result<Option<Role>, BubbleError> {
    string_field(map, "role", false)?
        .flatten()
        .map(|raw| {
            Role::parse(&raw).ok_or_else(|| {
                BubbleError::InvalidRequest(format!(
                    "Unknown role \"{raw}\": expected owner, thread_manager, member or reader."
                ))
            })
        })
        .transpose()
}

/// Validates a principal id: 1–256 characters, no control characters.
fn principal(raw: &str) -> Result<PrincipalId, BubbleError> {
    let ok = !raw.is_empty()
        && raw.chars().count() <= MAX_PRINCIPAL_CHARS
        && !raw.chars().any(char::is_control);
    if ok {
        Ok(PrincipalId::new(raw))
    } else {
        Err(BubbleError::InvalidRequest(format!(
            "Invalid principalId: expected 1-{MAX_PRINCIPAL_CHARS} characters without control characters."
        )))
    }
}

impl Threads {
    /// Answers one `/v1/threads…` request.
    pub(super) fn route(
        &mut self,
        cx: &mut Ctx<'_>,
        store: &dyn EventStore,
        caller: Result<Caller, AuthError>,
        request: &HttpRequest<'_>,
    ) -> Result<HttpResponse, BubbleError> {
        let caller = caller?;
        let path = request.path;
        let decoded = crate::edge::threads_segments(path)?.ok_or_else(|| no_route(path))?;
        let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
        if segments.iter().any(|s| s.is_empty()) {
            return Err(no_route(path));
        }
        let query = Query::parse(request.query)?;
        let body = request.body;
        let m = request.method;
        let thread = || ThreadId::parse(segments[0]);
        match (segments.as_slice(), m) {
            ([], Method::Get) => self.list(&caller, &query),
            ([], Method::Post) => self.http_create(cx, &caller, body),
            ([_], Method::Get) => Ok(HttpResponse::json(
                200,
                to_json(&self.get(&caller, &thread()?)?),
            )),
            ([_], Method::Patch) => self.http_rename(cx, &caller, &thread()?, body),
            ([_, "events"], Method::Get) => self.history(store, &caller, &thread()?, &query),
            ([_, "events"], Method::Post) => self.http_append(
                cx,
                store,
                &caller,
                &thread()?,
                request.idempotency_key,
                body,
            ),
            ([_, "grants"], Method::Get) => {
                let grants = self.grants(&caller, &thread()?)?;
                Ok(HttpResponse::json(
                    200,
                    to_json(&serde_json::json!({ "grants": grants })),
                ))
            }
            ([_, "grants", p], Method::Put) => {
                let map = object(body, false, &["role"])?;
                let role = role_field(&map)?.ok_or_else(|| {
                    BubbleError::InvalidRequest("Field \"role\" is required.".into())
                })?;
                let row = self.put_grant(cx, &caller, &thread()?, principal(p)?, role)?;
                Ok(HttpResponse::json(200, to_json(&row)))
            }
            ([_, "grants", p], Method::Delete) => {
                self.delete_grant(cx, &caller, &thread()?, &principal(p)?)?;
                Ok(HttpResponse::no_content())
            }
            ([_, "participants"], Method::Post) => {
                let map = object(body, true, &["principalId", "role"])?;
                let who = string_field(&map, "principalId", false)?.flatten();
                let who = who.map(|p| principal(&p)).transpose()?;
                let (new, row) = self.join(cx, &caller, &thread()?, who, role_field(&map)?)?;
                Ok(HttpResponse::json(
                    if new { 201 } else { 200 },
                    to_json(&row),
                ))
            }
            ([_, "participants", p], Method::Delete) => {
                self.leave(cx, &caller, &thread()?, &principal(p)?)?;
                Ok(HttpResponse::no_content())
            }
            (
                []
                | [_]
                | [_, "events"]
                | [_, "grants"]
                | [_, "grants", _]
                | [_, "participants"]
                | [_, "participants", _],
                _,
            ) => {
                let err = BubbleError::InvalidRequest("Method not allowed on this route.".into());
                cx.metrics.count_error(err.code());
                Ok(HttpResponse::json(405, err.to_http_body()))
            }
            _ => Err(no_route(path)),
        }
    }

    fn http_create(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        body: &[u8],
    ) -> Result<HttpResponse, BubbleError> {
        let map = object(body, true, &["threadId", "parentThreadId", "title"])?;
        let req = CreateRequest {
            thread_id: thread_field(&map, "threadId")?,
            parent: thread_field(&map, "parentThreadId")?,
            title: string_field(&map, "title", true)?.flatten(),
        };
        let (created, thread) = self.create(cx, caller, req)?;
        Ok(HttpResponse::json(
            if created { 201 } else { 200 },
            to_json(&thread),
        ))
    }

    fn http_rename(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        id: &ThreadId,
        body: &[u8],
    ) -> Result<HttpResponse, BubbleError> {
        self.require(caller, id, Capability::ThreadRead)?;
        let map = object(body, false, &["title"])?;
        let title = string_field(&map, "title", true)?;
        let thread = self.rename(cx, caller, id, title)?;
        Ok(HttpResponse::json(200, to_json(&thread)))
    }

    fn http_append(
        &mut self,
        cx: &mut Ctx<'_>,
        store: &dyn EventStore,
        caller: &Caller,
        id: &ThreadId,
        key: Option<&str>,
        body: &[u8],
    ) -> Result<HttpResponse, BubbleError> {
        self.require(caller, id, Capability::ThreadRead)?;
        let event = object(body, false, &[])?;
        let appended = self.append(cx, store, caller, id, event, key)?;
        let json = &appended.event.json;
        Ok(if appended.duplicate {
            HttpResponse::json(200, format!("{{\"event\":{json},\"duplicate\":true}}"))
        } else {
            HttpResponse::json(201, format!("{{\"event\":{json}}}"))
        })
    }

    /// `GET /v1/threads?parentThreadId=&cursor=&limit=`: readable threads in
    /// id order after `cursor` (the last id of the previous page).
    fn list(&self, caller: &Caller, query: &Query) -> Result<HttpResponse, BubbleError> {
        let parent = query
            .get("parentThreadId")
            .map(ThreadId::parse)
            .transpose()?;
        let cursor = query.get("cursor").map(ThreadId::parse).transpose()?;
        let limit = query.limit()?;
        let mut page = Vec::new();
        let mut more = false;
        let candidates: Box<dyn Iterator<Item = &ThreadId>> = match &parent {
            Some(parent) => Box::new(self.table.children_after(parent, cursor.as_ref())),
            None => Box::new(self.table.after(cursor.as_ref()).map(|(id, _)| id)),
        };
        for id in candidates {
            if !self.held(caller, id).contains(Capability::ThreadRead) {
                continue;
            }
            if page.len() == limit {
                more = true;
                break;
            }
            page.extend(self.table.snapshot(id));
        }
        let next_cursor = if more {
            page.last().map(|t| t.thread_id.clone())
        } else {
            None
        };
        let body = serde_json::json!({ "threads": page, "nextCursor": next_cursor });
        Ok(HttpResponse::json(200, body.to_string()))
    }

    /// `GET /v1/threads/:threadId/events?fromSeq=&limit=`.
    fn history(
        &self,
        store: &dyn EventStore,
        caller: &Caller,
        id: &ThreadId,
        query: &Query,
    ) -> Result<HttpResponse, BubbleError> {
        self.require(caller, id, Capability::ThreadRead)?;
        let from = query.start_seq()?;
        let limit = query.limit()?;
        let head = self.table.get(id).map_or(0, |t| t.head_seq);
        let events = self
            .table
            .read(store, id, from, head, limit)
            .map_err(|_| BubbleError::Internal)?;
        let next_seq = events
            .last()
            .map(|e| e.seq)
            .filter(|last| *last < head)
            .map(|last| last + 1);
        let mut body = String::from("{\"events\":[");
        for (i, event) in events.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            body.push_str(&event.json);
        }
        body.push_str("],\"nextSeq\":");
        body.push_str(&next_seq.map_or_else(|| "null".to_owned(), |n| n.to_string()));
        body.push('}');
        Ok(HttpResponse::json(200, body))
    }
}
