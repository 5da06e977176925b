//! The `/v1/threads…` routes (SPEC §4): routing, request validation and
//! response bodies. Decisions are made by the operations in `ops`.

use serde_json::{Map, Value};

use crate::ctx::Ctx;
use crate::error::BubbleError;
use crate::http::{HttpRequest, HttpResponse, Method};
use crate::ids::{PrincipalId, ThreadId};
use crate::model::StoredEvent;
use crate::policy::{Capability, Role};
use crate::store::{ReadQuery, ReadResult};
use crate::threads::cache::Slot;
use crate::threads::incoming;
use crate::threads::ops::CreateRequest;
use crate::threads::query::Query;
use crate::threads::state::Caller;
use crate::threads::work::Step;
use crate::threads::Threads;

/// Thread records read per step of a thread listing.
const LIST_READ: usize = 256;

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

/// A new thread's id, unless a URL cannot carry it: the path segments `.`
/// and `..` are resolved away before routing, so such a thread could never
/// be read or managed over HTTP.
fn addressable(id: ThreadId) -> Result<ThreadId, BubbleError> {
    if matches!(id.as_str(), "." | "..") {
        return Err(BubbleError::InvalidRequest(format!(
            "Invalid threadId \"{id}\": \".\" and \"..\" cannot name a thread (a URL path cannot carry them)."
        )));
    }
    Ok(id)
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
        caller: &Caller,
        request: &HttpRequest<'_>,
    ) -> Result<HttpResponse, Step> {
        let caller = caller.clone();
        let path = request.path;
        let decoded = crate::edge::threads_segments(path)
            .map_err(BubbleError::from)?
            .ok_or_else(|| no_route(path))?;
        let segments: Vec<&str> = decoded.iter().map(AsRef::as_ref).collect();
        if segments.iter().any(|s| s.is_empty()) {
            return Err(no_route(path).into());
        }
        let query = Query::parse(request.query).map_err(BubbleError::from)?;
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
            ([_, "events"], Method::Get) => self.history(&caller, &thread()?, &query),
            ([_, "messages"], Method::Get) => self.messages(cx, &caller, &thread()?),
            ([_, "events"], Method::Post) => {
                self.http_append(cx, &caller, &thread()?, request.idempotency_key, body)
            }
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
                | [_, "messages"]
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
            _ => Err(no_route(path).into()),
        }
    }

    fn http_create(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        body: &[u8],
    ) -> Result<HttpResponse, Step> {
        let map = object(body, true, &["threadId", "parentThreadId", "title"])?;
        let req = CreateRequest {
            thread_id: thread_field(&map, "threadId")?
                .map(addressable)
                .transpose()?,
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
    ) -> Result<HttpResponse, Step> {
        self.require(caller, id, Capability::ThreadRead)?;
        let map = object(body, false, &["title"])?;
        let title = string_field(&map, "title", true)?;
        let thread = self.rename(cx, caller, id, title)?;
        Ok(HttpResponse::json(200, to_json(&thread)))
    }

    fn http_append(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        id: &ThreadId,
        key: Option<&str>,
        body: &[u8],
    ) -> Result<HttpResponse, Step> {
        self.require(caller, id, Capability::ThreadRead)?;
        let direct =
            incoming::checked_event(body, &caller.principal, key, cx.limits.max_event_bytes);
        let appended = match direct {
            Some(event) => self.append_direct(cx, caller, id, event)?,
            None => {
                let event = object(body, false, &[])?;
                self.append(cx, caller, id, event, key)?
            }
        };
        // `{"event":…}`, or `{"event":…,"duplicate":true}`, written without
        // the formatting machinery: this answers every append.
        let (status, tail) = if appended.duplicate {
            (200, ",\"duplicate\":true}")
        } else {
            (201, "}")
        };
        let json = &appended.event.json;
        let mut answer = String::with_capacity(json.len() + 40);
        answer.push_str("{\"event\":");
        answer.push_str(json);
        answer.push_str(tail);
        Ok(HttpResponse::json(status, answer))
    }

    /// `GET /v1/threads?parentThreadId=&cursor=&limit=`: readable threads in
    /// id order after `cursor` (the last id of the previous page). Records
    /// are read from the store a page at a time and filtered by access, so a
    /// page may take several reads. The children of a parent the caller
    /// cannot read are listed as those of a missing thread, none, after the
    /// same read of the parent (denial hiding, and the same work whether
    /// the parent is hidden or missing).
    fn list(&mut self, caller: &Caller, query: &Query) -> Result<HttpResponse, Step> {
        let parent = query
            .get("parentThreadId")
            .map(ThreadId::parse)
            .transpose()?;
        let cursor = query.get("cursor").map(ThreadId::parse).transpose()?;
        let limit = query.limit()?;
        if let Some(parent) = &parent {
            if !self.held(caller, parent)?.contains(Capability::ThreadRead) {
                let body = serde_json::json!({ "threads": [], "nextCursor": null });
                return Ok(HttpResponse::json(200, body.to_string()));
            }
        }
        let mut page = Vec::new();
        let mut more = false;
        let mut after = cursor;
        'scan: loop {
            let read = ReadQuery::Threads {
                parent: parent.clone(),
                after: after.clone(),
                limit: LIST_READ,
            };
            let ReadResult::Threads(records) = self.answer(read)?.clone() else {
                return Err(BubbleError::Internal.into());
            };
            let exhausted = records.len() < LIST_READ;
            for record in records {
                let id = record.thread_id.clone();
                after = Some(id.clone());
                // Listed, so it exists (a thread cached as absent was
                // created since).
                if self.cache.get(&id).is_none() {
                    self.cache.put(id.clone(), Slot::read(Some(&record)));
                }
                if !self.held(caller, &id)?.contains(Capability::ThreadRead) {
                    continue;
                }
                if page.len() == limit {
                    more = true;
                    break 'scan;
                }
                page.extend(self.cache.get(&id).map(|t| t.snapshot(&id)));
            }
            if exhausted {
                break;
            }
        }
        let next_cursor = if more {
            page.last().map(|t| t.thread_id.clone())
        } else {
            None
        };
        let body = serde_json::json!({ "threads": page, "nextCursor": next_cursor });
        Ok(HttpResponse::json(200, body.to_string()))
    }

    /// `GET /v1/threads/:threadId/events?fromSeq=&limit=`: durable events
    /// only, read from the store. `nextSeq` is set while the page ends below
    /// the head (appends not yet durable included). In a cluster, the page
    /// is decided on the store's head (unless writes of ours are in flight
    /// on the thread): the seq another node just acknowledged is there.
    fn history(
        &mut self,
        caller: &Caller,
        id: &ThreadId,
        query: &Query,
    ) -> Result<HttpResponse, Step> {
        self.confirm(id)?;
        self.require(caller, id, Capability::ThreadRead)?;
        let from = query.start_seq()?;
        let limit = query.limit()?;
        let (head, durable) = self
            .cache
            .get(id)
            .map_or((0, 0), |t| (t.head_seq, t.durable().head_seq));
        let events = if from > durable {
            Vec::new()
        } else {
            self.history_page(id, from, durable, limit)?
        };
        let next_seq = match events.last() {
            Some(last) if last.seq < head => Some(last.seq + 1),
            None if from <= head => Some(from),
            _ => None,
        };
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

    /// Durable events of `id` from `from`, checked to be the complete range
    /// the store was asked for. A page asked for earlier is used as it came,
    /// even when the head moved since.
    fn history_page(
        &self,
        id: &ThreadId,
        from: u64,
        durable: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, Step> {
        let asked = self.answers.iter().find_map(|(q, a)| match q {
            ReadQuery::Events {
                thread_id,
                from_seq,
                through_seq,
                limit: l,
            } if thread_id == id && *from_seq == from && *l == limit => Some((*through_seq, a)),
            _ => None,
        });
        let (through, answer) = match asked {
            Some(found) => found,
            None => {
                return Err(Step::Need(ReadQuery::Events {
                    thread_id: id.clone(),
                    from_seq: from,
                    through_seq: durable,
                    limit,
                }))
            }
        };
        let events = match answer {
            Ok(ReadResult::Events(events)) => events,
            Err(e) => return Err(Step::Fail(e.to_bubble_error())),
            Ok(_) => return Err(BubbleError::Internal.into()),
        };
        if !complete_page(events, from, through, limit) {
            return Err(BubbleError::Internal.into());
        }
        Ok(events.clone())
    }
}

/// Whether `events` are the page a read of `from..=through` (at most
/// `limit` events) must answer: every seq from `from`, in order, none
/// missing.
pub(super) fn complete_page(events: &[StoredEvent], from: u64, through: u64, limit: usize) -> bool {
    let expected = usize::try_from(through.saturating_sub(from) + 1)
        .unwrap_or(usize::MAX)
        .min(limit);
    events.len() == expected && events.iter().zip(from..).all(|(e, seq)| e.seq == seq)
}
