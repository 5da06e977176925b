//! Connection limits beyond one app's `max_connections`: sockets of both
//! protocols in all ([`Limits::max_connections`](crate::Limits::max_connections))
//! and `/v1/ws` sockets of one principal
//! ([`Limits::max_connections_per_principal`](crate::Limits::max_connections_per_principal)).
//! 0 is no limit. A `/socket` over the global limit is refused before it
//! upgrades (`503` with `Retry-After`); a `/v1/ws` socket, whose principal
//! is known only once it is open, gets an unscoped `rate_limited` error and
//! close 1013.

use crate::error::BubbleError;
use crate::http::HttpResponse;
use crate::ids::{ConnId, PrincipalId};
use crate::maps::HashMap;

/// Seconds a client refused for the global limit is told to wait.
pub(crate) const BUSY_RETRY_AFTER_S: u64 = 5;

/// The `/v1/ws` sockets each principal holds.
#[derive(Debug, Default)]
pub(crate) struct PrincipalConns {
    principal_of: HashMap<ConnId, PrincipalId>,
    counts: HashMap<PrincipalId, usize>,
}

impl PrincipalConns {
    /// Admits `conn` for `principal`, or returns why not: `open` sockets are
    /// open now (this one included), and the limits.
    pub(crate) fn admit(
        &mut self,
        conn: ConnId,
        principal: &PrincipalId,
        open: usize,
        global: usize,
        per_principal: usize,
    ) -> Result<(), BubbleError> {
        if global > 0 && open > global {
            return Err(BubbleError::RateLimited(format!(
                "The server holds its maximum of {global} connections; try again later."
            )));
        }
        let held = self.counts.get(principal).copied().unwrap_or(0);
        if per_principal > 0 && held >= per_principal {
            return Err(BubbleError::RateLimited(format!(
                "Principal \"{principal}\" holds its maximum of {per_principal} connections."
            )));
        }
        self.counts.insert(principal.clone(), held + 1);
        self.principal_of.insert(conn, principal.clone());
        Ok(())
    }

    /// `conn` closed.
    pub(crate) fn closed(&mut self, conn: ConnId) {
        let Some(principal) = self.principal_of.remove(&conn) else {
            return;
        };
        if let Some(n) = self.counts.get_mut(&principal) {
            *n -= 1;
            if *n == 0 {
                self.counts.remove(&principal);
            }
        }
    }
}

/// The refusal of a `/socket` upgrade when `open` sockets reach `global`.
pub(crate) fn refuse_upgrade(open: usize, global: usize) -> Option<HttpResponse> {
    if global == 0 || open < global {
        return None;
    }
    let mut response = HttpResponse::text(503, "Server connection limit reached");
    response.retry_after = Some(BUSY_RETRY_AFTER_S);
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_principal_counts_and_frees_on_close() {
        let mut conns = PrincipalConns::default();
        let alice = PrincipalId::new("alice");
        let bob = PrincipalId::new("bob");
        assert!(conns.admit(ConnId(1), &alice, 1, 0, 2).is_ok());
        assert!(conns.admit(ConnId(2), &alice, 2, 0, 2).is_ok());
        let refused = conns.admit(ConnId(3), &alice, 3, 0, 2).expect_err("third");
        assert_eq!(refused.code(), crate::ErrorCode::RateLimited);
        assert!(conns.admit(ConnId(4), &bob, 3, 0, 2).is_ok());
        conns.closed(ConnId(3));
        conns.closed(ConnId(1));
        assert!(conns.admit(ConnId(5), &alice, 3, 0, 2).is_ok());
        conns.closed(ConnId(2));
        conns.closed(ConnId(5));
        conns.closed(ConnId(4));
        assert!(conns.counts.is_empty() && conns.principal_of.is_empty());
    }

    #[test]
    fn the_global_limit_counts_every_socket() {
        let mut conns = PrincipalConns::default();
        let alice = PrincipalId::new("alice");
        assert!(conns.admit(ConnId(1), &alice, 3, 3, 0).is_ok());
        assert!(conns.admit(ConnId(2), &alice, 4, 3, 0).is_err());
        assert_eq!(refuse_upgrade(2, 3), None);
        let full = refuse_upgrade(3, 3).expect("full");
        assert_eq!(
            (full.status, full.retry_after),
            (503, Some(BUSY_RETRY_AFTER_S))
        );
        assert_eq!(refuse_upgrade(1_000_000, 0), None);
    }
}
