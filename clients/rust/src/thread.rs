//! One thread seen through a client: its live events ([`Subscription`]),
//! appends ([`Append`]), history ([`History`]) and scoped errors
//! ([`Errors`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bubble_core::ThreadId;
use futures_util::Stream;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};

use crate::driver::{Command, Progress, SubscriptionSink};
use crate::transport::Transport;
use crate::{Error, Event, Page, ScopedError, Shared};

/// The page size of [`Thread::history`] unless [`History::limit`] says.
const DEFAULT_PAGE: u32 = 100;

/// A thread of a [`crate::Client`]; cheap to clone.
#[derive(Clone)]
pub struct Thread {
    id: String,
    shared: Arc<Shared>,
}

impl Thread {
    pub(crate) fn new(id: String, shared: Arc<Shared>) -> Thread {
        Thread { id, shared }
    }

    /// The thread's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn parsed(&self) -> Result<ThreadId, Error> {
        ThreadId::parse(&self.id).map_err(|_| Error::InvalidThreadId(self.id.clone()))
    }

    /// Follows the thread from `from_seq` (1 for its whole history): every
    /// event once and in order, across reconnections and server restarts.
    ///
    /// One subscription per thread per client: a second one yields
    /// [`Error::AlreadySubscribed`]. Dropping the subscription unsubscribes.
    pub fn subscribe(&self, from_seq: u64) -> Subscription {
        let id = self
            .shared
            .next_subscription
            .fetch_add(1, Ordering::Relaxed);
        let (events_tx, events) = mpsc::unbounded_channel();
        let (progress_tx, progress) = watch::channel(Progress::Pending);
        let sink = SubscriptionSink {
            events: events_tx,
            progress: progress_tx,
        };
        let mut subscription = Subscription {
            id,
            thread: None,
            events,
            progress,
            commands: self.shared.commands.clone(),
            ended: false,
        };
        match self.parsed() {
            Ok(thread) => {
                subscription.thread = Some(thread.clone());
                // A closed client drops the command, and the sink with it:
                // the stream then simply ends.
                let _ = self.shared.commands.send(Command::Subscribe {
                    id,
                    thread,
                    from_seq,
                    sink,
                });
            }
            Err(error) => sink.end(Some(error)),
        }
        subscription
    }

    /// Appends `event` (an object such as
    /// `{"type": "run_started", "runId": "run-1"}`); resolves to the stored
    /// event with its seq.
    ///
    /// The append is made when this is called, not when the future is first
    /// polled, and dropping the future does not cancel it. Its idempotency
    /// key is made once: while the client is offline the append waits, and
    /// after a failure it is retried with the same key, so it lands exactly
    /// once. Appends of one thread land in the order they were made.
    pub fn append<E: Serialize>(&self, event: E) -> Append {
        let (reply, answer) = oneshot::channel();
        let command = match (self.parsed(), serde_json::to_value(event)) {
            (Err(error), _) => return Append::failed(error),
            (Ok(thread), Ok(Value::Object(event))) => Command::Append {
                thread,
                event,
                reply,
            },
            (Ok(_), _) => return Append::failed(Error::InvalidEvent),
        };
        // On a closed client the reply is dropped: the append fails as closed.
        let _ = self.shared.commands.send(command);
        Append { answer: Ok(answer) }
    }

    /// The thread's history over HTTP, page by page, from seq 1 (see
    /// [`History::from_seq`]) until the last page.
    pub fn history(&self) -> History {
        History {
            transport: self.shared.transport.clone(),
            thread: self.parsed(),
            from: Some(1),
            limit: DEFAULT_PAGE,
            fetching: None,
        }
    }

    /// The `error` frames the server sends about this thread, from now on.
    pub fn errors(&self) -> Errors {
        let (sink, errors) = mpsc::unbounded_channel();
        if let Ok(thread) = self.parsed() {
            let _ = self.shared.commands.send(Command::Errors {
                thread: Some(thread),
                sink,
            });
        }
        Errors { errors }
    }
}

/// The events of one subscribed thread: a [`Stream`] of each event once,
/// in seq order.
///
/// It yields `Err` once, as its last item, when the server ends the
/// subscription for good (its code is the reason: `not_found` for a thread
/// the caller may not read, `forbidden` when access was revoked); it ends
/// without an error when the client is closed. Events wait in the
/// subscription until it is polled.
pub struct Subscription {
    id: u64,
    thread: Option<ThreadId>,
    events: mpsc::UnboundedReceiver<Result<Event, Error>>,
    progress: watch::Receiver<Progress>,
    commands: mpsc::UnboundedSender<Command>,
    ended: bool,
}

impl Subscription {
    /// Resolves once the events up to the subscription's `throughSeq` (the
    /// thread's last seq when it was opened) have been delivered to this
    /// stream, with that seq; what follows is live. After a reconnection
    /// it reports the newest subscription's `throughSeq`.
    pub async fn caught_up(&self) -> Result<u64, Error> {
        let mut progress = self.progress.clone();
        let reached = progress.wait_for(|p| !matches!(p, Progress::Pending)).await;
        match reached.as_deref() {
            Ok(Progress::CaughtUp(through_seq)) => Ok(*through_seq),
            Ok(Progress::Ended(Some(error))) => Err(error.clone()),
            _ => Err(Error::Closed),
        }
    }
}

impl Stream for Subscription {
    type Item = Result<Event, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let item = ready!(this.events.poll_recv(cx));
        this.ended = !matches!(item, Some(Ok(_)));
        Poll::Ready(item)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = self.commands.send(Command::Unsubscribe {
                id: self.id,
                thread,
            });
        }
    }
}

/// An append under way (see [`Thread::append`]): resolves to the stored
/// event, or the error that refused it.
pub struct Append {
    answer: Result<oneshot::Receiver<Result<Event, Error>>, Option<Error>>,
}

impl Append {
    fn failed(error: Error) -> Append {
        Append {
            answer: Err(Some(error)),
        }
    }
}

impl Future for Append {
    type Output = Result<Event, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().answer {
            Ok(answer) => Pin::new(answer)
                .poll(cx)
                .map(|answer| answer.unwrap_or(Err(Error::Closed))),
            Err(error) => Poll::Ready(Err(error.take().unwrap_or(Error::Closed))),
        }
    }
}

type PageFuture = Pin<Box<dyn Future<Output = Result<Page, Error>> + Send>>;

/// A thread's history (`GET /v1/threads/:id/events`): a [`Stream`] of
/// pages, fetched one at a time as it is polled, until the page whose
/// `next_seq` is `None`. It ends after an error.
pub struct History {
    transport: Transport,
    thread: Result<ThreadId, Error>,
    from: Option<u64>,
    limit: u32,
    fetching: Option<PageFuture>,
}

impl History {
    /// Starts at `seq` instead of 1.
    #[must_use]
    pub fn from_seq(mut self, seq: u64) -> History {
        self.from = Some(seq);
        self
    }

    /// Asks for pages of `limit` events (default 100; the server takes 1 to 1000).
    #[must_use]
    pub fn limit(mut self, limit: u32) -> History {
        self.limit = limit;
        self
    }
}

impl Stream for History {
    type Item = Result<Page, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.fetching.is_none() {
            let Some(from) = this.from.take() else {
                return Poll::Ready(None);
            };
            let thread = match &this.thread {
                Ok(thread) => thread.clone(),
                Err(error) => return Poll::Ready(Some(Err(error.clone()))),
            };
            let (transport, limit) = (this.transport.clone(), this.limit);
            this.fetching = Some(Box::pin(async move {
                transport.history_page(&thread, from, limit).await
            }));
        }
        let Some(fetching) = this.fetching.as_mut() else {
            return Poll::Ready(None);
        };
        let page = ready!(fetching.as_mut().poll(cx));
        this.fetching = None;
        this.from = page.as_ref().ok().and_then(|page| page.next_seq);
        Poll::Ready(Some(page))
    }
}

/// A [`Stream`] of the server's `error` frames (see [`Thread::errors`] and
/// [`crate::Client::errors`]); it ends when the client is closed.
pub struct Errors {
    errors: mpsc::UnboundedReceiver<ScopedError>,
}

impl Errors {
    pub(crate) fn new(errors: mpsc::UnboundedReceiver<ScopedError>) -> Errors {
        Errors { errors }
    }
}

impl Stream for Errors {
    type Item = ScopedError;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ScopedError>> {
        self.get_mut().errors.poll_recv(cx)
    }
}
