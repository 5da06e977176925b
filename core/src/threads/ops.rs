//! Thread operations shared by the HTTP routes and `/v1/ws`: each one loads
//! what it needs (stopping with [`Step::Need`] before deciding anything),
//! is authorized, decided by the store rules, written, applied to the
//! cache, and (for events) fanned out to live subscribers.

use serde_json::{Map, Value};

use crate::clock::rfc3339;
use crate::ctx::Ctx;
use crate::error::BubbleError;
use crate::ids::{PrincipalId, ThreadId};
use crate::model::{BubbleThread, EventBody, GrantRow, Participant, StoredEvent};
use crate::policy::{authorize, Access, Capability, CapabilitySet, Need, Role};
use crate::store::{ReadQuery, ReadResult, Write};
use crate::threads::cache::Slot;
use crate::threads::incoming::CheckedEvent;
use crate::threads::rules::{self, CreateDecision};
use crate::threads::state::{Caller, ThreadState};
use crate::threads::work::Step;
use crate::threads::ws::Decided;
use crate::threads::Threads;

/// `POST /v1/threads` after parsing.
#[derive(Debug, Clone, Default)]
pub(super) struct CreateRequest {
    pub(super) thread_id: Option<ThreadId>,
    pub(super) parent: Option<ThreadId>,
    pub(super) title: Option<String>,
}

/// The outcome of an append.
#[derive(Debug, Clone)]
pub(super) struct Appended {
    pub(super) event: StoredEvent,
    /// An idempotent repeat: `event` is the original, nothing was appended.
    pub(super) duplicate: bool,
}

impl Threads {
    /// What `caller` holds on `id` (nothing when the thread does not
    /// exist), loading the thread and its ancestors as needed.
    pub(super) fn held(&mut self, caller: &Caller, id: &ThreadId) -> Result<CapabilitySet, Step> {
        loop {
            match self.cache.capabilities(caller, id) {
                Ok(None) if self.exists_after_all(id)? => {}
                Ok(held) => {
                    let undecided = self.cache.get(id).is_some_and(|t| t.in_flight())
                        || self.building.iter().any(|g| &g.thread_id == id);
                    if undecided {
                        self.relied_on = Some(id.clone());
                    }
                    return Ok(held.unwrap_or(CapabilitySet::EMPTY));
                }
                Err(missing) => self.load(&missing.0)?,
            }
        }
    }

    /// The policy's decision on `caller` doing something needing `need` on `id`.
    pub(super) fn require(
        &mut self,
        caller: &Caller,
        id: &ThreadId,
        need: impl Into<Need>,
    ) -> Result<CapabilitySet, Step> {
        let need = need.into();
        let held = self.held_for(caller, id, |held| permit(caller, id, held, need).is_ok())?;
        permit(caller, id, held, need)?;
        Ok(held)
    }

    /// What `caller` holds on `id`, as [`Threads::held`] says; in a
    /// cluster, a holding that is not `enough` is confirmed on the store
    /// first: a grant another node gave on `id` or an ancestor may not
    /// have been announced here yet. Only refusals cost a read.
    pub(super) fn held_for(
        &mut self,
        caller: &Caller,
        id: &ThreadId,
        enough: impl Fn(CapabilitySet) -> bool,
    ) -> Result<CapabilitySet, Step> {
        let held = self.held(caller, id)?;
        if enough(held) || !self.cluster {
            return Ok(held);
        }
        self.confirm_chain(id)?;
        self.held(caller, id)
    }

    /// Reads the record of `id` and of each of its ancestors that is cached
    /// and settled, once per operation: what the reads find is applied to
    /// the cache as they complete (a thread that changed is reloaded).
    fn confirm_chain(&mut self, id: &ThreadId) -> Result<(), Step> {
        let chain: Vec<ThreadId> = std::iter::once(id)
            .chain(self.cache.ancestors(id))
            .cloned()
            .collect();
        for thread in &chain {
            self.confirm(thread)?;
        }
        Ok(())
    }

    /// In a cluster, reads `id`'s record once per operation when it is
    /// cached and settled, before anything is decided on the cached one:
    /// another node's commit may not have been announced here yet. What
    /// the read finds is applied as it completes (a thread that changed is
    /// reloaded, and the operation runs on the state it reads).
    pub(super) fn confirm(&mut self, id: &ThreadId) -> Result<(), Step> {
        if self.cluster && self.settled(id) {
            self.durable_now(id)?;
        }
        Ok(())
    }

    fn thread_snapshot(&self, id: &ThreadId) -> Result<BubbleThread, Step> {
        self.cache
            .get(id)
            .map(|t| t.snapshot(id))
            .ok_or_else(|| BubbleError::ThreadNotFound(id.clone()).into())
    }

    fn thread_mut(&mut self, id: &ThreadId) -> Result<&mut ThreadState, Step> {
        self.cache
            .get_mut(id)
            .ok_or_else(|| BubbleError::ThreadNotFound(id.clone()).into())
    }

    /// `GET /v1/threads/:threadId`.
    /// In a cluster, the snapshot is of the record as the store holds it.
    pub(super) fn get(&mut self, caller: &Caller, id: &ThreadId) -> Result<BubbleThread, Step> {
        self.confirm(id)?;
        self.require(caller, id, Capability::ThreadRead)?;
        self.thread_snapshot(id)
    }

    /// `createThread`: `(true, thread)` when created, `(false, thread)` on an
    /// idempotent repeat. The creator is granted `owner`.
    pub(super) fn create(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        req: CreateRequest,
    ) -> Result<(bool, BubbleThread), Step> {
        if let Some(title) = &req.title {
            rules::validate_title(title)?;
        }
        let id = match req.thread_id {
            Some(id) => {
                self.load(&id)?;
                id
            }
            // 80 random bits: a collision with a stored thread is refused
            // by the store like any concurrent create, and decided again.
            None => self.fresh_id(cx),
        };
        if let Some(parent) = &req.parent {
            if parent != &id {
                self.load(parent)?;
            }
        }
        let existing = self.cache.get(&id).map(|t| t.parent.clone());
        let parent_exists = req
            .parent
            .as_ref()
            .is_some_and(|p| self.cache.get(p).is_some());
        let decision = rules::decide_create(
            &id,
            req.parent.as_ref(),
            existing.as_ref().map(Option::as_ref),
            parent_exists,
        );
        let hidden =
            existing.is_some() && !self.held(caller, &id)?.contains(Capability::ThreadRead);
        match decision {
            Err(BubbleError::Conflict(_)) | Ok(CreateDecision::Existing) if hidden => {
                Err(BubbleError::Conflict(format!("Thread \"{id}\" already exists.")).into())
            }
            Err(err) => Err(err.into()),
            Ok(CreateDecision::Existing) => Ok((false, self.thread_snapshot(&id)?)),
            Ok(CreateDecision::New) => {
                if let Some(parent) = &req.parent {
                    self.require(caller, parent, Capability::SubthreadsCreate)?;
                }
                let created_at = rfc3339(cx.now);
                self.write(
                    cx,
                    &id,
                    Write::CreateThread {
                        thread_id: id.clone(),
                        parent_thread_id: req.parent.clone(),
                        created_at: created_at.clone(),
                    },
                );
                self.write(
                    cx,
                    &id,
                    Write::PutGrant {
                        thread_id: id.clone(),
                        principal_id: caller.principal.clone(),
                        role: Role::Owner,
                    },
                );
                let mut state = ThreadState::new(req.parent, created_at);
                state.grants.insert(caller.principal.clone(), Role::Owner);
                if let Some(title) = req.title {
                    self.write(
                        cx,
                        &id,
                        Write::SetTitle {
                            thread_id: id.clone(),
                            title: Some(title.clone()),
                        },
                    );
                    state.title = Some(title);
                }
                self.cache.put(id.clone(), Slot::Present(Box::new(state)));
                Ok((true, self.thread_snapshot(&id)?))
            }
        }
    }

    fn fresh_id(&self, cx: &mut Ctx<'_>) -> ThreadId {
        loop {
            if let Ok(id) = ThreadId::parse(&cx.ids.thread_id()) {
                if !self.cache.knows(&id) {
                    return id;
                }
            }
        }
    }

    /// `updateThread`: sets or clears the title (`None`: key omitted);
    /// appends `thread_title_updated` only when the title changes.
    pub(super) fn rename(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        id: &ThreadId,
        title: Option<Option<String>>,
    ) -> Result<BubbleThread, Step> {
        self.require(caller, id, Capability::ThreadManage)?;
        if let Some(Some(title)) = &title {
            rules::validate_title(title)?;
        }
        let current = self.cache.get(id).and_then(|t| t.title.as_deref());
        if let Some(new) = rules::title_change(current, title.as_ref().map(Option::as_deref)) {
            self.write(
                cx,
                id,
                Write::SetTitle {
                    thread_id: id.clone(),
                    title: new.clone(),
                },
            );
            if let Some(t) = self.cache.get_mut(id) {
                t.title.clone_from(&new);
            }
            let body = EventBody::ThreadTitleUpdated {
                by_principal_id: caller.principal.clone(),
                title: new,
            };
            self.emit(cx, id, &body, None);
        }
        self.thread_snapshot(id)
    }

    /// Appends a client event (HTTP or `thread.append`). `header_key` is the
    /// `Idempotency-Key` header; an `idempotencyKey` field of the event is
    /// the same key and is not stored. What the caller holds is derived
    /// once and checked for `thread.read` first (a caller who cannot read
    /// learns nothing of the body), then for the event's type.
    pub(super) fn append(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        id: &ThreadId,
        mut event: Map<String, Value>,
        header_key: Option<&str>,
    ) -> Result<Appended, Step> {
        let ty = rules::appendable_type(&event);
        // Every need includes `thread.read`: a caller who cannot read the
        // thread learns nothing of the body, not even that its type is bad.
        let need = ty
            .as_ref()
            .map_or(Capability::ThreadRead, |ty| Capability::Append(*ty));
        self.require(caller, id, need)?;
        let ty = ty?;
        let key = rules::take_idempotency_key(&mut event, header_key)?;
        let body = rules::event_body(ty, event, &caller.principal, cx.limits.max_event_bytes)?;
        self.append_checked(cx, id, body, key)
    }

    /// Appends an event validated by
    /// [`checked_event`](crate::threads::incoming::checked_event): the
    /// same decisions as [`Threads::append`], whose checks it has passed
    /// but for the caller's right to append its type.
    pub(super) fn append_direct(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        id: &ThreadId,
        event: CheckedEvent,
    ) -> Result<Appended, Step> {
        self.require(caller, id, Capability::Append(event.ty))?;
        self.append_checked(cx, id, event.body, event.key)
    }

    /// Appends a validated, authorized `body`, or finds the event that
    /// already holds its idempotency `key`.
    fn append_checked(
        &mut self,
        cx: &mut Ctx<'_>,
        id: &ThreadId,
        body: EventBody,
        key: Option<String>,
    ) -> Result<Appended, Step> {
        if let Some(key) = &key {
            if let Some(event) = self.original(id, key)? {
                return Ok(Appended {
                    event,
                    duplicate: true,
                });
            }
        }
        let event = self.emit(cx, id, &body, key);
        Ok(Appended {
            event,
            duplicate: false,
        })
    }

    /// The event of `id` that holds idempotency key `key`: pending in
    /// memory, or durable (read from the store).
    fn original(&self, id: &ThreadId, key: &str) -> Result<Option<StoredEvent>, Step> {
        let Some(state) = self.cache.get(id) else {
            return Ok(None);
        };
        if let Some(event) = state.pending_with_key(key) {
            return Ok(Some(event));
        }
        if state.durable().head_seq == 0 {
            return Ok(None);
        }
        let query = ReadQuery::Idempotent {
            thread_id: id.clone(),
            key: key.to_owned(),
        };
        match self.answer(query)? {
            ReadResult::Event(event) => Ok(event.clone()),
            _ => Err(BubbleError::Internal.into()),
        }
    }

    /// Writes `body` at the thread's next seq and fans it out.
    fn emit(
        &mut self,
        cx: &mut Ctx<'_>,
        id: &ThreadId,
        body: &EventBody,
        key: Option<String>,
    ) -> StoredEvent {
        let head = self.cache.get(id).map_or(0, |t| t.head_seq);
        let seq = rules::next_seq(head);
        let json = rules::persisted_json(seq, id, &rfc3339(cx.now), body);
        self.write(
            cx,
            id,
            Write::AppendEvent {
                thread_id: id.clone(),
                seq,
                idempotency_key: key.clone(),
                json: json.clone(),
            },
        );
        let event = StoredEvent { seq, json };
        let batch = cx.out.current_batch();
        if let Some(state) = self.cache.get_mut(id) {
            state.push_pending(batch, event.clone(), key);
        }
        cx.metrics.events_appended += 1;
        self.fan_out(cx, id, &event);
        event
    }

    /// `GET /v1/threads/:threadId/grants`, ordered by principal.
    pub(super) fn grants(&mut self, caller: &Caller, id: &ThreadId) -> Result<Vec<GrantRow>, Step> {
        self.require(caller, id, Capability::GrantsManage)?;
        let grants = self
            .cache
            .get(id)
            .map(|t| t.grants.clone())
            .unwrap_or_default();
        Ok(grants
            .into_iter()
            .map(|(principal_id, role)| GrantRow {
                thread_id: id.clone(),
                principal_id,
                role,
            })
            .collect())
    }

    /// Creates or replaces a grant; subscriptions that lose access end.
    pub(super) fn put_grant(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        id: &ThreadId,
        principal: PrincipalId,
        role: Role,
    ) -> Result<GrantRow, Step> {
        self.require(caller, id, Capability::GrantsManage)?;
        if self.thread_mut(id)?.grants.get(&principal) != Some(&role) {
            self.write(
                cx,
                id,
                Write::PutGrant {
                    thread_id: id.clone(),
                    principal_id: principal.clone(),
                    role,
                },
            );
            self.thread_mut(id)?.grants.insert(principal.clone(), role);
            self.recheck_subscriptions(cx, id, Decided::Here);
        }
        Ok(GrantRow {
            thread_id: id.clone(),
            principal_id: principal,
            role,
        })
    }

    /// Revokes a grant (revoking an absent grant changes nothing);
    /// subscriptions that lose access end.
    pub(super) fn delete_grant(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        id: &ThreadId,
        principal: &PrincipalId,
    ) -> Result<(), Step> {
        self.require(caller, id, Capability::GrantsManage)?;
        if self.thread_mut(id)?.grants.remove(principal).is_some() {
            self.write(
                cx,
                id,
                Write::DeleteGrant {
                    thread_id: id.clone(),
                    principal_id: principal.clone(),
                },
            );
            self.recheck_subscriptions(cx, id, Decided::Here);
        }
        Ok(())
    }

    /// Adds a participant: the caller itself (needs an `events.*`
    /// capability; the row's role is the caller's own role) or someone else
    /// (needs `participants.manage`; the role is `role`, default `member`).
    /// Returns `(true, row)` when newly joined, `(false, row)` when already in.
    pub(super) fn join(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        id: &ThreadId,
        principal: Option<PrincipalId>,
        role: Option<Role>,
    ) -> Result<(bool, Participant), Step> {
        let target = principal.unwrap_or_else(|| caller.principal.clone());
        let role = if target == caller.principal {
            self.require(caller, id, Need::AnyAppend)?;
            // Appends are never inherited, so a self-joining caller holds a
            // direct grant, or is an admin (shown as `owner`).
            let own = self
                .cache
                .get(id)
                .and_then(|t| t.grants.get(&caller.principal).copied());
            let own = own.unwrap_or(Role::Owner);
            match role {
                Some(wanted) if wanted != own => {
                    self.require(caller, id, Capability::ParticipantsManage)?;
                    wanted
                }
                _ => own,
            }
        } else {
            self.require(caller, id, Capability::ParticipantsManage)?;
            role.unwrap_or(Role::Member)
        };
        let thread = self.thread_mut(id)?;
        if let Some(row) = thread.participant(&target) {
            return Ok((false, row.clone()));
        }
        let row = Participant {
            principal_id: target.clone(),
            role,
            joined_at: rfc3339(cx.now),
        };
        self.write(
            cx,
            id,
            Write::PutParticipant {
                thread_id: id.clone(),
                participant: row.clone(),
            },
        );
        self.thread_mut(id)?.participants.push(row.clone());
        self.emit(
            cx,
            id,
            &EventBody::ParticipantJoined {
                principal_id: target,
                role,
            },
            None,
        );
        Ok((true, row))
    }

    /// Removes a participant: the caller itself (any reader) or someone else
    /// (needs `participants.manage`).
    pub(super) fn leave(
        &mut self,
        cx: &mut Ctx<'_>,
        caller: &Caller,
        id: &ThreadId,
        principal: &PrincipalId,
    ) -> Result<(), Step> {
        let need = if principal == &caller.principal {
            Capability::ThreadRead
        } else {
            Capability::ParticipantsManage
        };
        self.require(caller, id, need)?;
        let thread = self.thread_mut(id)?;
        let before = thread.participants.len();
        thread.participants.retain(|p| &p.principal_id != principal);
        if thread.participants.len() == before {
            return Err(BubbleError::NotFound(format!(
                "Principal \"{principal}\" is not a participant of thread \"{id}\"."
            ))
            .into());
        }
        self.write(
            cx,
            id,
            Write::DeleteParticipant {
                thread_id: id.clone(),
                principal_id: principal.clone(),
            },
        );
        self.emit(
            cx,
            id,
            &EventBody::ParticipantLeft {
                principal_id: principal.clone(),
            },
            None,
        );
        Ok(())
    }
}

/// The policy's decision on `caller`, holding `held` on `id`, doing
/// something needing `need`.
fn permit(
    caller: &Caller,
    id: &ThreadId,
    held: CapabilitySet,
    need: impl Into<Need>,
) -> Result<(), BubbleError> {
    authorize(
        &Access {
            principal: &caller.principal,
            thread: id,
            held,
        },
        need,
    )
}
