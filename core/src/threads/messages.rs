//! `GET /v1/threads/:threadId/messages`: the thread's AI SDK `UIMessage`s,
//! folded from its durable events ([`crate::fold`]), with the seq they are
//! folded through. The fold is cached ([`super::folds`]); a read folds only
//! the durable events the cached fold lacks, read from the store a page at
//! a time.

use crate::ctx::Ctx;
use crate::error::BubbleError;
use crate::http::HttpResponse;
use crate::ids::ThreadId;
use crate::model::StoredEvent;
use crate::policy::Capability;
use crate::store::{ReadQuery, ReadResult};
use crate::threads::query::MAX_LIMIT;
use crate::threads::state::Caller;
use crate::threads::work::Step;
use crate::threads::Threads;

fn too_large(id: &ThreadId, max: usize) -> Step {
    BubbleError::PayloadTooLarge(format!(
        "The messages of thread \"{id}\" fold more than {max} bytes of events; read its events instead."
    ))
    .into()
}

impl Threads {
    /// `GET /v1/threads/:threadId/messages`.
    pub(super) fn messages(
        &mut self,
        cx: &Ctx<'_>,
        caller: &Caller,
        id: &ThreadId,
    ) -> Result<HttpResponse, Step> {
        self.require(caller, id, Capability::ThreadRead)?;
        let durable = self.cache.get(id).map_or(0, |t| t.durable().head_seq);
        let page = cx.limits.backlog_page.clamp(1, MAX_LIMIT);
        loop {
            let through = self
                .folds
                .through(id)
                .ok_or_else(|| too_large(id, cx.limits.max_fold_bytes))?;
            if through >= durable {
                break;
            }
            let events = self.fold_page(id, through + 1, durable, page)?;
            if !self.folds.extend(id, &events, cx.limits) && self.folds.is_live(id) {
                return Err(BubbleError::Internal.into());
            }
        }
        let body = self
            .folds
            .body(id, cx.limits)
            .ok_or_else(|| too_large(id, cx.limits.max_fold_bytes))?;
        Ok(HttpResponse::json(200, body))
    }

    /// The durable events of `id` from `from`: the answer of a read asked
    /// for earlier (used once, even when the head moved since), or `Need`.
    fn fold_page(
        &mut self,
        id: &ThreadId,
        from: u64,
        durable: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, Step> {
        let asked = self.answers.keys().find_map(|q| match q {
            ReadQuery::Events {
                thread_id,
                from_seq,
                through_seq,
                limit: l,
            } if thread_id == id && *from_seq == from && *l == limit => {
                Some((q.clone(), *through_seq))
            }
            _ => None,
        });
        let Some((query, through)) = asked else {
            return Err(Step::Need(ReadQuery::Events {
                thread_id: id.clone(),
                from_seq: from,
                through_seq: durable,
                limit,
            }));
        };
        let events = match self.answers.remove(&query) {
            Some(Ok(ReadResult::Events(events))) => events,
            Some(Err(e)) => return Err(Step::Fail(e.to_bubble_error())),
            _ => return Err(BubbleError::Internal.into()),
        };
        if !super::http::complete_page(&events, from, through, limit) {
            return Err(BubbleError::Internal.into());
        }
        Ok(events)
    }
}
