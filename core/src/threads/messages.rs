//! `GET /v1/threads/:threadId/messages`: the thread's AI SDK `UIMessage`s,
//! folded from its durable events ([`crate::fold`]), with the seq they are
//! folded through. The fold is cached ([`super::folds`]); a read folds only
//! the durable events the cached fold lacks, read from the store a page at
//! a time.

use crate::ctx::Ctx;
use crate::error::BubbleError;
use crate::http::HttpResponse;
use crate::ids::ThreadId;
use crate::policy::Capability;
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
            let events = self.history_page(id, through + 1, durable, page)?;
            if !self.folds.extend(id, &events, cx.limits) && self.folds.body(id).is_some() {
                return Err(BubbleError::Internal.into());
            }
        }
        let body = self
            .folds
            .body(id)
            .ok_or_else(|| too_large(id, cx.limits.max_fold_bytes))?;
        Ok(HttpResponse::json(200, body))
    }
}
