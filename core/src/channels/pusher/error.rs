//! `pusher:error`: the codes of Pusher's protocol documentation.
//!
//! Pusher's ranges: 4000–4099 close the connection, and reconnecting with
//! the same parameters will not succeed; 4100–4199 close it, and the client
//! may reconnect after backing off (1 s or more); 4200–4299 close it, and
//! the client may reconnect at once; 4300–4399 are any other error, and
//! the connection stays open. An error without a code (`null`) reports a
//! refused message and closes nothing.

/// A `pusher:error` a Pusher socket hears. Those with a code in
/// 4000–4299 close the socket with that code right after; the others
/// (4300–4399, or no code) only report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PusherError {
    /// 4001: no app has the key in the path.
    #[error("Application does not exist")]
    AppNotFound,
    /// 4004: the app holds its `max_connections` sockets.
    #[error("Application is over connection quota")]
    OverQuota,
    /// 4005: a path under `/app/` that is not `/app/:key`.
    #[error("Path not found")]
    PathNotFound,
    /// 4006: `protocol` is not a number.
    #[error("Invalid version string format")]
    InvalidVersion,
    /// 4007: a protocol version other than 7.
    #[error("Unsupported protocol version")]
    UnsupportedProtocol,
    /// 4008: no `protocol` in the query.
    #[error("No protocol version supplied")]
    NoProtocol,
    /// 4009: the app's backend terminated the user's connections.
    #[error("You got disconnected by the app")]
    Terminated,
    /// 4009: a `pusher:signin` with a wrong signature or bad `user_data`.
    #[error("Connection not authorized: invalid signin")]
    SigninRefused,
    /// 4100: more commands than the command rate allows.
    #[error("Over capacity")]
    OverCapacity,
    /// 4200: the server is going away; reconnect at once (to another node).
    #[error("Generic reconnect immediately")]
    Reconnect,
    /// 4201: the server's `pusher:ping` (and WebSocket Ping) got no answer.
    #[error("Pong reply not received")]
    PongTimeout,
    /// 4301: more client events than 10 per second.
    #[error("Client event rejected due to rate limit")]
    ClientEventRate,
    /// The app's `client_events` is off.
    #[error("Client events are not enabled for this app")]
    ClientEventsDisabled,
    /// A client event on a public channel.
    #[error("Client events are only supported on private and presence channels")]
    ClientEventPublic,
    /// A client event on a channel the socket is not subscribed to.
    #[error("Client event rejected: not subscribed to {0}")]
    ClientEventNotSubscribed(String),
    /// A client event name over 200 characters, or data over the limit.
    #[error("Client event rejected: name or data too large")]
    ClientEventTooLarge,
    /// A refused subscription, said as Pusher says it (a bad signature,
    /// key or `channel_data`, a bad name, the channel limit).
    #[error("{0}")]
    SubscriptionRefused(String),
}

impl PusherError {
    /// The `code` of the `pusher:error` (`None`: Pusher sends `null`).
    pub fn code(&self) -> Option<u16> {
        match self {
            PusherError::AppNotFound => Some(4001),
            PusherError::OverQuota => Some(4004),
            PusherError::PathNotFound => Some(4005),
            PusherError::InvalidVersion => Some(4006),
            PusherError::UnsupportedProtocol => Some(4007),
            PusherError::NoProtocol => Some(4008),
            PusherError::Terminated | PusherError::SigninRefused => Some(4009),
            PusherError::OverCapacity => Some(4100),
            PusherError::Reconnect => Some(4200),
            PusherError::PongTimeout => Some(4201),
            PusherError::ClientEventRate => Some(4301),
            PusherError::ClientEventsDisabled
            | PusherError::ClientEventPublic
            | PusherError::ClientEventNotSubscribed(_)
            | PusherError::ClientEventTooLarge
            | PusherError::SubscriptionRefused(_) => None,
        }
    }

    /// The close code that follows the error, for connection errors.
    pub fn close_code(&self) -> Option<u16> {
        self.code().filter(|code| (4000..4300).contains(code))
    }
}
