//! The engine: inputs in, outputs out, time as an argument. Dispatches to the
//! threads and channels state machines; decides nothing itself.

use crate::auth::{AuthError, Authenticator, KeyWait, Waiter};
use crate::channels::Channels;
use crate::cluster::{ClusterMessage, NodeState};
use crate::config::{Config, Limits};
use crate::conn_limits::{self, PrincipalConns};
use crate::ctx::Ctx;
use crate::edge::{AcceptedHandshake, Api, ChannelsUpgrade};
use crate::heartbeat::{Beat, Heartbeats};
use crate::http::{HttpRequest, HttpResponse};
use crate::http_rate::HttpRates;
use crate::idgen::IdGen;
use crate::ids::{ConnId, Millis, PrincipalId, RequestId, ThreadId};
use crate::io::{CloseReason, Input, Misuse, Output};
use crate::maps::HashMap;
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::threads::Threads;

/// What a `/v1/threads…` request is decided with.
struct ThreadsApi<'a> {
    threads: &'a mut Threads,
    http_rates: &'a mut HttpRates<PrincipalId>,
}

/// What opening a `/v1/ws` socket needs to know.
struct Opening<'a> {
    conn: ConnId,
    token: Option<&'a str>,
    /// Where a resumed socket's subscriptions stand (empty for a new one).
    subscriptions: &'a [(ThreadId, u64)],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnKind {
    Threads,
    Channels,
}

/// The bearer drivers, and who waits for their key set.
struct Auth {
    drivers: Authenticator,
    keys: KeyWait,
}

/// What authenticating a bearer decided.
enum Authn {
    /// The principal, or why there is none.
    Decided(Result<crate::PrincipalId, AuthError>),
    /// The token names an unknown `kid`: wait for the key set being fetched.
    Wait,
}

impl Auth {
    /// Authenticates `token`; an unknown `kid` waits for a fetch when
    /// `may_wait` and the refresh schedule allow it.
    fn authenticate(&mut self, cx: &mut Ctx<'_>, token: Option<&str>, may_wait: bool) -> Authn {
        let result = token
            .ok_or(AuthError::Missing)
            .and_then(|t| self.drivers.authenticate(t, cx.now));
        match result {
            Err(AuthError::UnknownKey) if may_wait && self.keys.may_wait(cx) => Authn::Wait,
            result => Authn::Decided(result),
        }
    }
}

/// The Bubble engine. See the crate docs for how to drive it.
pub struct Engine {
    config: Config,
    auth: Auth,
    threads: Threads,
    channels: Channels,
    conns: HashMap<ConnId, ConnKind>,
    heartbeats: Heartbeats,
    http_rates: HttpRates<PrincipalId>,
    principal_conns: PrincipalConns,
    out: Outbox,
    ids: IdGen,
    metrics: Metrics,
}

impl Engine {
    /// An engine with nothing loaded, generating ids and version tokens
    /// from `seed` (engines sharing a store must have different seeds).
    pub fn new(config: Config, seed: u64) -> Engine {
        Engine {
            auth: Auth {
                drivers: Authenticator::new(&config.auth),
                keys: KeyWait::new(config.auth.jwks.as_ref()),
            },
            threads: Threads::new(&config),
            channels: Channels::new(&config),
            heartbeats: Heartbeats::new(config.heartbeat),
            http_rates: HttpRates::default(),
            principal_conns: PrincipalConns::default(),
            conns: HashMap::default(),
            out: Outbox::default(),
            ids: IdGen::new(seed),
            metrics: Metrics::default(),
            config,
        }
    }

    /// Processes one input. Afterwards drain [`Engine::poll_output`] to
    /// `None` and re-arm one timer from [`Engine::poll_timeout`].
    pub fn handle(&mut self, now: Millis, input: Input<'_>) -> Result<(), Misuse> {
        let mut cx = Ctx {
            now,
            out: &mut self.out,
            ids: &mut self.ids,
            metrics: &mut self.metrics,
            limits: &self.config.limits,
            cluster: self.config.cluster,
        };
        let result = Self::dispatch(
            &mut cx,
            &mut self.threads,
            &mut self.channels,
            &mut self.conns,
            &mut self.heartbeats,
            &mut self.http_rates,
            &mut self.principal_conns,
            &mut self.auth,
            input,
        );
        self.threads.end_input(&mut cx);
        self.channels.end_input(&mut cx);
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        cx: &mut Ctx<'_>,
        threads: &mut Threads,
        channels: &mut Channels,
        conns: &mut HashMap<ConnId, ConnKind>,
        heartbeats: &mut Heartbeats,
        http_rates: &mut HttpRates<PrincipalId>,
        principal_conns: &mut PrincipalConns,
        auth: &mut Auth,
        input: Input<'_>,
    ) -> Result<(), Misuse> {
        let now = cx.now;
        match input {
            Input::OpenThreads { conn, token } => {
                let open = Opening {
                    conn,
                    token,
                    subscriptions: &[],
                };
                Self::open_threads(cx, threads, conns, heartbeats, principal_conns, auth, open)?;
            }
            Input::ResumeThreads {
                conn,
                token,
                subscriptions,
            } => {
                let open = Opening {
                    conn,
                    token,
                    subscriptions,
                };
                Self::open_threads(cx, threads, conns, heartbeats, principal_conns, auth, open)?;
            }
            Input::OpenChannels { conn, handshake } => {
                Self::register(conns, conn, ConnKind::Channels)?;
                let idle = handshake.protocol() == crate::ChannelProtocol::Pusher;
                heartbeats.open(now, conn, idle);
                channels.open(cx, conn, handshake);
            }
            Input::Frame { conn, frame } => {
                cx.metrics.frames_in += 1;
                match Self::kind_of(conns, conn)? {
                    ConnKind::Threads => threads.frame(cx, conn, frame),
                    ConnKind::Channels => {
                        heartbeats.activity(now, conn);
                        channels.frame(cx, conn, frame);
                    }
                }
            }
            Input::Pong { conn } => {
                Self::kind_of(conns, conn)?;
                heartbeats.pong(now, conn);
            }
            Input::Drained { conn } => {
                if Self::kind_of(conns, conn)? == ConnKind::Threads {
                    threads.drained(cx, conn);
                }
            }
            Input::Closed { conn } => {
                let kind = conns.remove(&conn).ok_or(Misuse::UnknownConn(conn))?;
                auth.keys.forget(conn);
                heartbeats.close(conn);
                principal_conns.closed(conn);
                match kind {
                    ConnKind::Threads => threads.closed(cx, conn),
                    ConnKind::Channels => channels.closed(cx, conn),
                }
            }
            Input::Http { req, request } => {
                let api = crate::edge::engine_api(request.path);
                if api == Api::Channels {
                    channels.http(cx, req, &request);
                } else if api == Api::Pusher {
                    channels.pusher_http(cx, req, &request);
                } else {
                    let api = ThreadsApi {
                        threads,
                        http_rates,
                    };
                    Self::threads_http(cx, api, auth, req, &request, true);
                }
            }
            Input::Persisted { batch } => {
                if !cx.out.persisted(batch) {
                    return Err(Misuse::UnknownBatch(batch));
                }
                threads.persisted(cx, batch);
            }
            Input::PersistFailed { batch, conflicts } => {
                if batch.0 > cx.out.issued() {
                    return Err(Misuse::UnknownBatch(batch));
                }
                let rerun = threads.persist_failed(cx, batch, &conflicts);
                cx.out.persisted(batch);
                threads.persisted(cx, batch);
                threads.rerun(cx, rerun);
            }
            Input::ReadDone { read, result } => threads.read_done(cx, read, result),
            Input::Changed {
                thread,
                head_seq,
                version,
            } => threads.changed(cx, &thread, head_seq, version),
            Input::Remote { node, message } => match message {
                ClusterMessage::ThreadChanged {
                    thread_id,
                    head_seq,
                    version,
                } => threads.changed(cx, &thread_id, head_seq, version),
                other => channels.remote(cx, node, other),
            },
            Input::Recheck => threads.recheck(cx),
            Input::ClusterState { nodes } => channels.cluster_state(cx, nodes),
            Input::Claimed { claim, outcome } => channels.claimed(cx, claim, outcome),
            Input::KeysLoaded { .. } | Input::KeysFailed => {
                if let Input::KeysLoaded { keys } = input {
                    auth.drivers.set_keys(keys);
                }
                let waiters = auth.keys.settled(now);
                Self::wake(
                    cx,
                    threads,
                    conns,
                    http_rates,
                    principal_conns,
                    auth,
                    waiters,
                );
            }
            Input::Tick => {
                let waiters = auth.keys.tick(cx);
                Self::wake(
                    cx,
                    threads,
                    conns,
                    http_rates,
                    principal_conns,
                    auth,
                    waiters,
                );
                let mut beats = Vec::new();
                heartbeats.poll(now, &mut beats);
                for beat in beats {
                    let (conn, out) = match beat {
                        Beat::Ping(conn) => (conn, Output::Ping { conn }),
                        Beat::Expired(conn) => (
                            conn,
                            Output::Close {
                                conn,
                                reason: CloseReason::Dropped,
                            },
                        ),
                        Beat::IdlePing(conn) => {
                            channels.idle_ping(cx, conn);
                            continue;
                        }
                        Beat::IdleExpired(conn) => {
                            channels.idle_expired(cx, conn);
                            continue;
                        }
                    };
                    match conns.get(&conn) {
                        Some(ConnKind::Channels) => cx.out.push_unfenced(out),
                        _ => cx.out.push(out),
                    }
                }
                channels.tick(cx);
            }
            Input::Shutdown => {
                channels.shutdown(cx);
                let mut open: Vec<ConnId> = conns
                    .iter()
                    .filter(|(_, kind)| **kind == ConnKind::Threads)
                    .map(|(conn, _)| *conn)
                    .collect();
                open.sort();
                for conn in open {
                    cx.out.push_unfenced(Output::Close {
                        conn,
                        reason: CloseReason::GoingAway,
                    });
                }
            }
        }
        Ok(())
    }

    /// A `/v1/threads…` request: authenticated (or parked until the key
    /// set arrives), rate-limited per principal, then decided.
    fn threads_http(
        cx: &mut Ctx<'_>,
        api: ThreadsApi<'_>,
        auth: &mut Auth,
        req: RequestId,
        request: &HttpRequest<'_>,
        may_wait: bool,
    ) {
        let token = crate::edge::bearer(request.authorization);
        let principal = match token {
            Ok(token) => match auth.authenticate(cx, Some(token), may_wait) {
                Authn::Decided(principal) => principal,
                Authn::Wait => return auth.keys.park_http(req, request),
            },
            Err(err) => Err(err),
        };
        let limits = cx.limits;
        let refused = principal.as_ref().ok().and_then(|p| {
            api.http_rates
                .check(p, cx.now, limits.http_rate, limits.http_rate_window_ms)
                .err()
        });
        match refused {
            Some(limited) => {
                cx.metrics.count_error(crate::ErrorCode::RateLimited);
                let response = limited.threads_response();
                cx.out.push_unfenced(Output::Respond { req, response });
            }
            None => api.threads.http(cx, req, principal, request),
        }
    }

    /// A `/v1/ws` socket opened, or resumed at `subscriptions`. A token
    /// naming an unknown `kid` leaves it open but unauthenticated (its
    /// frames queue) until the key set arrives.
    fn open_threads(
        cx: &mut Ctx<'_>,
        threads: &mut Threads,
        conns: &mut HashMap<ConnId, ConnKind>,
        heartbeats: &mut Heartbeats,
        principal_conns: &mut PrincipalConns,
        auth: &mut Auth,
        open: Opening<'_>,
    ) -> Result<(), Misuse> {
        let Opening {
            conn,
            token,
            subscriptions,
        } = open;
        Self::register(conns, conn, ConnKind::Threads)?;
        heartbeats.open(cx.now, conn, false);
        match auth.authenticate(cx, token, true) {
            Authn::Decided(principal) => {
                Self::admit_threads(cx, threads, conns, principal_conns, conn, principal);
            }
            Authn::Wait => {
                auth.keys.park_open(conn, token.unwrap_or_default());
                threads.open_pending(cx, conn);
            }
        }
        if !subscriptions.is_empty() {
            threads.resume_socket(cx, conn, subscriptions);
        }
        Ok(())
    }

    /// Opens `/v1/ws` socket `conn` for `principal`; one over a connection
    /// limit is refused (see [`conn_limits`]).
    fn admit_threads(
        cx: &mut Ctx<'_>,
        threads: &mut Threads,
        conns: &HashMap<ConnId, ConnKind>,
        principal_conns: &mut PrincipalConns,
        conn: ConnId,
        principal: Result<crate::PrincipalId, AuthError>,
    ) {
        if let Ok(p) = &principal {
            let limits = cx.limits;
            let admitted = principal_conns.admit(
                conn,
                p,
                conns.len(),
                limits.max_connections,
                limits.max_connections_per_principal,
            );
            if let Err(err) = admitted {
                cx.metrics.count_error(err.code());
                threads.refuse_busy(cx, conn, &err);
                return;
            }
        }
        threads.open(cx, conn, principal);
    }

    /// Decides again what waited for the key set; an unknown `kid` is now
    /// refused.
    #[allow(clippy::too_many_arguments)]
    fn wake(
        cx: &mut Ctx<'_>,
        threads: &mut Threads,
        conns: &HashMap<ConnId, ConnKind>,
        http_rates: &mut HttpRates<PrincipalId>,
        principal_conns: &mut PrincipalConns,
        auth: &mut Auth,
        waiters: Vec<Waiter>,
    ) {
        for waiter in waiters {
            match waiter {
                Waiter::Http { req, request } => {
                    let api = ThreadsApi {
                        threads: &mut *threads,
                        http_rates: &mut *http_rates,
                    };
                    Self::threads_http(cx, api, auth, req, &request.borrow(), false);
                }
                Waiter::Open { conn, token } => {
                    let Authn::Decided(principal) = auth.authenticate(cx, Some(&token), false)
                    else {
                        continue;
                    };
                    Self::admit_threads(cx, threads, conns, principal_conns, conn, principal);
                }
            }
        }
    }

    fn register(
        conns: &mut HashMap<ConnId, ConnKind>,
        conn: ConnId,
        kind: ConnKind,
    ) -> Result<(), Misuse> {
        if conns.insert(conn, kind).is_some() {
            return Err(Misuse::ConnInUse(conn));
        }
        Ok(())
    }

    fn kind_of(conns: &HashMap<ConnId, ConnKind>, conn: ConnId) -> Result<ConnKind, Misuse> {
        conns.get(&conn).copied().ok_or(Misuse::UnknownConn(conn))
    }

    /// Where the subscriptions of `/v1/ws` connection `conn` stand: per
    /// thread (in id order), the next seq it sends. `None` when `conn` is no
    /// open `/v1/ws` connection. A host that must be able to rebuild its
    /// sockets on another engine keeps this after each input and passes it
    /// to [`Input::ResumeThreads`]; once every output has been performed and
    /// nothing is in flight, each position is the last seq delivered + 1.
    #[must_use]
    pub fn thread_subscriptions(&self, conn: ConnId) -> Option<Vec<(ThreadId, u64)>> {
        self.threads.subscriptions(conn)
    }

    /// Threads with live subscriptions on this engine, in id order: what a
    /// cluster node checks against the store when the broker may have lost
    /// a change (feeding what it finds as [`Input::Changed`]).
    #[must_use]
    pub fn subscribed_threads(&self) -> Vec<ThreadId> {
        self.threads.subscribed_threads()
    }

    /// This node's channel state (presence members and subscriber counts)
    /// under a new `seq` taken at `now`: what the broker should hold for it
    /// (written again at each periodic check, which repairs lost writes).
    #[must_use]
    pub fn local_state(&mut self, now: Millis) -> NodeState {
        self.channels.local_state(now)
    }

    /// The next output, or `None` when there is nothing (yet) to do.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        let out = self.out.pop();
        match &out {
            Some(Output::Send { .. }) => self.metrics.frames_out += 1,
            Some(Output::SendAll { conns, .. }) => self.metrics.frames_out += conns.len() as u64,
            _ => {}
        }
        out
    }

    /// When to deliver the next [`Input::Tick`].
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Millis> {
        let window = self.config.limits.webhook_batch_ms;
        [
            self.heartbeats.next_due(),
            self.channels.next_deadline(window),
            self.auth.keys.deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Decides a `/socket` upgrade before it happens (SPEC §6): the
    /// accepted handshake that [`Input::OpenChannels`] needs, or the
    /// plain-text HTTP error to answer instead of upgrading.
    pub fn channel_handshake(
        &self,
        upgrade: &ChannelsUpgrade,
    ) -> Result<AcceptedHandshake, HttpResponse> {
        let global = self.config.limits.max_connections;
        if let Some(refused) = conn_limits::refuse_upgrade(self.conns.len(), global) {
            return Err(refused);
        }
        self.channels.handshake(upgrade)
    }

    /// The engine's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The configured limits (the host sizes frames and queues from them).
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }
}
