//! The task that runs a client: it owns the core client state machine,
//! the socket and the timer, reports every input to the core and carries
//! out every output. It decides nothing itself.

use std::collections::HashMap;
use std::future::pending;
use std::time::Duration;

use bubble_core::client::{
    AppendId, Client as Core, ClientInput, ClientOutput, ConnectionState as CoreState, RemoteError,
};
use bubble_core::{Millis, ThreadId};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{sleep_until, timeout, Instant};
use tokio_tungstenite::tungstenite::{self, Message};

use crate::options::TokenSource;
use crate::transport::{Answer, Socket, Transport};
use crate::{ConnectionState, Error, Event, ScopedError};

/// How long closing the socket may take at shutdown.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// What a subscription has reached, for [`crate::Subscription::caught_up`].
#[derive(Debug, Clone)]
pub(crate) enum Progress {
    /// Its backlog is not delivered yet.
    Pending,
    /// Delivered up to this `throughSeq` (the latest subscription's).
    CaughtUp(u64),
    /// Over: with the server's error, or (`None`) closed by the client.
    Ended(Option<Error>),
}

/// Where a subscription's events go.
pub(crate) struct SubscriptionSink {
    pub(crate) events: mpsc::UnboundedSender<Result<Event, Error>>,
    pub(crate) progress: watch::Sender<Progress>,
}

impl SubscriptionSink {
    /// Ends the subscription; with an error, that is its stream's last item.
    pub(crate) fn end(self, error: Option<Error>) {
        if let Some(error) = &error {
            let _ = self.events.send(Err(error.clone()));
        }
        self.progress.send_replace(Progress::Ended(error));
    }
}

/// What the application's handles ask of the driver.
pub(crate) enum Command {
    /// Follow `thread` from `from_seq` (subscription `id`).
    Subscribe {
        id: u64,
        thread: ThreadId,
        from_seq: u64,
        sink: SubscriptionSink,
    },
    /// Subscription `id` was dropped.
    Unsubscribe { id: u64, thread: ThreadId },
    /// Append `event`, answering on `reply`.
    Append {
        thread: ThreadId,
        event: Map<String, Value>,
        reply: oneshot::Sender<Result<Event, Error>>,
    },
    /// Report `error` frames (about `thread`, or all with `None`) on `sink`.
    Errors {
        thread: Option<ThreadId>,
        sink: mpsc::UnboundedSender<ScopedError>,
    },
    /// Close the client.
    Close,
}

/// What the driver's own I/O tasks report back.
enum Done {
    Connected {
        attempt: u64,
        socket: Box<Socket>,
    },
    ConnectFailed {
        attempt: u64,
    },
    Posted {
        append: AppendId,
        answer: Result<Answer, Error>,
    },
    Token(Option<String>),
}

/// The running client.
pub(crate) struct Driver {
    core: Core,
    start: Instant,
    transport: Transport,
    tokens: TokenSource,
    token: Option<String>,
    timeout: Duration,
    commands: mpsc::UnboundedReceiver<Command>,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    socket: Option<Socket>,
    attempt: u64,
    state: watch::Sender<ConnectionState>,
    subscriptions: HashMap<ThreadId, (u64, SubscriptionSink)>,
    appends: HashMap<AppendId, oneshot::Sender<Result<Event, Error>>>,
    next_append: u64,
    listeners: Vec<(Option<ThreadId>, mpsc::UnboundedSender<ScopedError>)>,
    /// The last `error` frame of each subscribed thread: it explains a
    /// `thread.subscription_closed` that follows it.
    last_error: HashMap<ThreadId, RemoteError>,
    closed: bool,
}

/// Waits for the next socket message, or forever without a socket.
async fn next_message(socket: &mut Option<Socket>) -> Option<Result<Message, tungstenite::Error>> {
    match socket {
        Some(socket) => socket.next().await,
        None => pending().await,
    }
}

/// Waits until `deadline`, or forever without one.
async fn sleep(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => pending().await,
    }
}

impl Driver {
    /// A driver for `core`, which was built with `token`.
    pub(crate) fn new(
        core: Core,
        transport: Transport,
        tokens: TokenSource,
        token: Option<String>,
        timeout: Duration,
        commands: mpsc::UnboundedReceiver<Command>,
        state: watch::Sender<ConnectionState>,
    ) -> Driver {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        transport.set_token(token.clone());
        Driver {
            core,
            start: Instant::now(),
            transport,
            tokens,
            token,
            timeout,
            commands,
            done_tx,
            done_rx,
            socket: None,
            attempt: 0,
            state,
            subscriptions: HashMap::new(),
            appends: HashMap::new(),
            next_append: 1,
            listeners: Vec::new(),
            last_error: HashMap::new(),
            closed: false,
        }
    }

    /// Runs until the client is closed.
    pub(crate) async fn run(mut self) {
        loop {
            self.perform().await;
            if self.closed {
                break;
            }
            let deadline = self.core.poll_timeout().map(|at| self.instant(at));
            tokio::select! {
                command = self.commands.recv() => match command {
                    Some(command) => self.command(command),
                    None => self.input(ClientInput::Close),
                },
                Some(done) = self.done_rx.recv() => self.done(done),
                message = next_message(&mut self.socket) => self.message(message),
                () = sleep(deadline) => self.input(ClientInput::Tick),
            }
        }
        for (_, (_, sink)) in self.subscriptions.drain() {
            sink.end(None);
        }
    }

    fn now(&self) -> Millis {
        Millis(u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    fn instant(&self, at: Millis) -> Instant {
        self.start + Duration::from_millis(at.0)
    }

    /// Reports an input that is not a request (those cannot be refused).
    fn input(&mut self, input: ClientInput<'_>) {
        let _ = self.core.handle(self.now(), input);
    }

    fn command(&mut self, command: Command) {
        let now = self.now();
        match command {
            Command::Subscribe {
                id,
                thread,
                from_seq,
                sink,
            } => {
                let subscribe = ClientInput::Subscribe {
                    thread: thread.clone(),
                    from_seq,
                };
                match self.core.handle(now, subscribe) {
                    Ok(()) => {
                        self.subscriptions.insert(thread, (id, sink));
                    }
                    Err(misuse) => sink.end(Some(Error::from_misuse(misuse))),
                }
            }
            Command::Unsubscribe { id, thread } => {
                if self
                    .subscriptions
                    .get(&thread)
                    .is_some_and(|(of, _)| *of == id)
                {
                    self.subscriptions.remove(&thread);
                    self.last_error.remove(&thread);
                    let _ = self.core.handle(now, ClientInput::Unsubscribe { thread });
                }
            }
            Command::Append {
                thread,
                event,
                reply,
            } => {
                let append = AppendId(self.next_append);
                self.next_append += 1;
                match self.core.handle(
                    now,
                    ClientInput::Append {
                        append,
                        thread,
                        event,
                    },
                ) {
                    Ok(()) => {
                        self.appends.insert(append, reply);
                    }
                    Err(misuse) => {
                        let _ = reply.send(Err(Error::from_misuse(misuse)));
                    }
                }
            }
            Command::Errors { thread, sink } => {
                self.listeners.retain(|(_, sink)| !sink.is_closed());
                self.listeners.push((thread, sink));
            }
            Command::Close => self.input(ClientInput::Close),
        }
    }

    fn done(&mut self, done: Done) {
        match done {
            Done::Connected { attempt, socket } => {
                if attempt == self.attempt && !self.closed {
                    self.socket = Some(*socket);
                    self.input(ClientInput::Opened);
                }
            }
            Done::ConnectFailed { attempt } => {
                if attempt == self.attempt {
                    self.input(ClientInput::Closed);
                }
            }
            Done::Posted { append, answer } => match answer {
                Ok(answer) => self.input(ClientInput::AppendDone {
                    append,
                    status: answer.status,
                    body: &answer.body,
                }),
                Err(_) => self.input(ClientInput::AppendFailed { append }),
            },
            Done::Token(token) => {
                if token.is_some() {
                    self.token = token;
                }
                self.transport.set_token(self.token.clone());
                self.input(ClientInput::Token(self.token.clone()));
            }
        }
    }

    fn message(&mut self, message: Option<Result<Message, tungstenite::Error>>) {
        match message {
            Some(Ok(Message::Text(text))) => self.input(ClientInput::Frame(text.as_str())),
            Some(Ok(Message::Close(_)) | Err(_)) | None => self.lost(),
            Some(Ok(_)) => {}
        }
    }

    fn lost(&mut self) {
        self.socket = None;
        self.input(ClientInput::Closed);
    }

    /// Carries out every output of the core.
    async fn perform(&mut self) {
        while let Some(output) = self.core.poll_output() {
            match output {
                ClientOutput::State(state) => self.state_changed(state),
                ClientOutput::NeedToken => self.fetch_token(),
                ClientOutput::Connect { token } => self.connect(token),
                ClientOutput::Disconnect => {
                    if let Some(mut socket) = self.socket.take() {
                        let _ = timeout(CLOSE_TIMEOUT, socket.close(None)).await;
                    }
                }
                ClientOutput::Send(frame) => self.send(frame).await,
                ClientOutput::Post {
                    append,
                    thread,
                    idempotency_key,
                    body,
                    token,
                } => {
                    let (transport, done) = (self.transport.clone(), self.done_tx.clone());
                    tokio::spawn(async move {
                        let answer = transport
                            .post_event(&thread, &idempotency_key, body, token)
                            .await;
                        let _ = done.send(Done::Posted { append, answer });
                    });
                }
                ClientOutput::Event { thread, seq, event } => {
                    if let Some((_, sink)) = self.subscriptions.get(&thread) {
                        let _ = sink.events.send(Ok(Event { seq, value: event }));
                    }
                }
                ClientOutput::CaughtUp {
                    thread,
                    through_seq,
                } => {
                    if let Some((_, sink)) = self.subscriptions.get(&thread) {
                        sink.progress.send_replace(Progress::CaughtUp(through_seq));
                    }
                }
                ClientOutput::Appended { append, event, .. } => {
                    if let Some(reply) = self.appends.remove(&append) {
                        let _ = reply.send(Event::from_value(event));
                    }
                }
                ClientOutput::AppendRejected { append, error, .. } => {
                    if let Some(reply) = self.appends.remove(&append) {
                        let _ = reply.send(Err(rejection(error)));
                    }
                }
                ClientOutput::ThreadError { thread, error } => {
                    self.report(Some(&thread), &error);
                    if self.subscriptions.contains_key(&thread) {
                        self.last_error.insert(thread, error);
                    }
                }
                ClientOutput::SubscriptionClosed {
                    thread,
                    reason,
                    resubscribing,
                } => {
                    if !resubscribing {
                        self.subscription_closed(thread, reason);
                    }
                }
                ClientOutput::ConnectionError { error } => self.report(None, &error),
            }
        }
    }

    fn state_changed(&mut self, state: CoreState) {
        let state = match state {
            CoreState::Connecting => ConnectionState::Connecting,
            CoreState::Open => ConnectionState::Open,
            CoreState::Reconnecting { attempt, at } => ConnectionState::Reconnecting {
                attempt,
                at: self.instant(at),
            },
            CoreState::Closed => {
                self.closed = true;
                ConnectionState::Closed
            }
        };
        self.state.send_replace(state);
    }

    fn fetch_token(&mut self) {
        let refresh = self.tokens.refresh.clone();
        let (done, limit) = (self.done_tx.clone(), self.timeout);
        tokio::spawn(async move {
            let token = match refresh {
                // Its own task: a refresh that panics only keeps the old token.
                Some(refresh) => match timeout(limit, tokio::spawn(refresh())).await {
                    Ok(Ok(token)) => token,
                    _ => None,
                },
                None => None,
            };
            let _ = done.send(Done::Token(token));
        });
    }

    fn connect(&mut self, token: Option<String>) {
        self.attempt += 1;
        let attempt = self.attempt;
        let (transport, done) = (self.transport.clone(), self.done_tx.clone());
        tokio::spawn(async move {
            let _ = done.send(match transport.open_socket(token).await {
                Ok(socket) => Done::Connected {
                    attempt,
                    socket: Box::new(socket),
                },
                Err(_) => Done::ConnectFailed { attempt },
            });
        });
    }

    async fn send(&mut self, frame: String) {
        let Some(socket) = &mut self.socket else {
            return;
        };
        if !matches!(
            timeout(self.timeout, socket.send(Message::text(frame))).await,
            Ok(Ok(()))
        ) {
            self.lost();
        }
    }

    fn subscription_closed(&mut self, thread: ThreadId, reason: String) {
        let message = self
            .last_error
            .remove(&thread)
            .filter(|error| error.code == reason)
            .map(|error| error.message)
            .unwrap_or_else(|| format!("The subscription was closed: {reason}."));
        if let Some((_, sink)) = self.subscriptions.remove(&thread) {
            sink.end(Some(Error::Server {
                code: reason,
                message,
            }));
        }
    }

    /// Hands an `error` frame to the listeners that want it.
    fn report(&mut self, thread: Option<&ThreadId>, error: &RemoteError) {
        let scoped = ScopedError {
            thread: thread.map(ToString::to_string),
            code: error.code.clone(),
            message: error.message.clone(),
        };
        self.listeners.retain(|(wanted, sink)| {
            if wanted.is_none() || wanted.as_ref() == thread {
                sink.send(scoped.clone()).is_ok()
            } else {
                !sink.is_closed()
            }
        });
    }
}

/// The error of a rejected append.
fn rejection(error: RemoteError) -> Error {
    if error.code == "client_closed" {
        Error::Closed
    } else {
        Error::Server {
            code: error.code,
            message: error.message,
        }
    }
}
