//! Requests and sockets whose token names an unknown `kid`, waiting for
//! the key set a fetch brings (see [`super::refresh`]).

use crate::config::JwksConfig;
use crate::ctx::Ctx;
use crate::http::{HttpRequest, OwnedRequest};
use crate::ids::{ConnId, Millis, RequestId};
use crate::io::Output;

use super::refresh::{Due, Refresh, Wait};

/// Requests and sockets that may wait for a fetch at once; past this, a
/// token with an unknown `kid` is refused without waiting.
pub const MAX_WAITING: usize = 256;

/// Something decided again once the key set changes.
#[derive(Debug)]
pub(crate) enum Waiter {
    /// A `/v1/threads…` request.
    Http {
        /// The host's handle.
        req: RequestId,
        /// The request.
        request: OwnedRequest,
    },
    /// A `/v1/ws` socket, open but not yet authenticated.
    Open {
        /// The socket.
        conn: ConnId,
        /// Its bearer.
        token: String,
    },
}

/// The fetch schedule of a refreshable key set and who waits for it.
#[derive(Debug, Default)]
pub(crate) struct KeyWait {
    refresh: Option<Refresh>,
    waiting: Vec<Waiter>,
}

impl KeyWait {
    /// The schedule of `jwks` (none when the set cannot be fetched).
    pub(crate) fn new(jwks: Option<&JwksConfig>) -> KeyWait {
        KeyWait {
            refresh: jwks.and_then(|j| j.refresh).map(Refresh::new),
            waiting: Vec::new(),
        }
    }

    /// A token named an unknown `kid`: true when it may wait for a fetch
    /// (asking the host for one when it starts now).
    pub(crate) fn may_wait(&mut self, cx: &mut Ctx<'_>) -> bool {
        let Some(refresh) = &mut self.refresh else {
            return false;
        };
        if self.waiting.len() >= MAX_WAITING {
            return false;
        }
        match refresh.unknown_key(cx.now) {
            Wait::Started => {
                cx.out.push_unfenced(Output::FetchKeys);
                true
            }
            Wait::InFlight => true,
            Wait::No => false,
        }
    }

    /// Parks an HTTP request (after [`KeyWait::may_wait`] said yes).
    pub(crate) fn park_http(&mut self, req: RequestId, request: &HttpRequest<'_>) {
        let request = OwnedRequest::from(request);
        self.waiting.push(Waiter::Http { req, request });
    }

    /// Parks a socket's authentication (after [`KeyWait::may_wait`] said yes).
    pub(crate) fn park_open(&mut self, conn: ConnId, token: &str) {
        let token = token.to_owned();
        self.waiting.push(Waiter::Open { conn, token });
    }

    /// The socket closed: it waits no more.
    pub(crate) fn forget(&mut self, conn: ConnId) {
        self.waiting
            .retain(|w| !matches!(w, Waiter::Open { conn: c, .. } if *c == conn));
    }

    /// When [`KeyWait::tick`] has something to do.
    pub(crate) fn deadline(&self) -> Option<Millis> {
        self.refresh.as_ref().map(Refresh::deadline)
    }

    /// Asks for a scheduled fetch when one is due; returns who waited for
    /// a fetch that timed out.
    pub(crate) fn tick(&mut self, cx: &mut Ctx<'_>) -> Vec<Waiter> {
        let Some(refresh) = &mut self.refresh else {
            return Vec::new();
        };
        match refresh.tick(cx.now) {
            Due::Nothing => Vec::new(),
            Due::Fetch => {
                cx.out.push_unfenced(Output::FetchKeys);
                Vec::new()
            }
            Due::TimedOut => std::mem::take(&mut self.waiting),
        }
    }

    /// The fetch settled (loaded or failed): who waited for it.
    pub(crate) fn settled(&mut self, now: Millis) -> Vec<Waiter> {
        if let Some(refresh) = &mut self.refresh {
            refresh.settled(now);
        }
        std::mem::take(&mut self.waiting)
    }
}
