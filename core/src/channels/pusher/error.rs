//! `pusher:error`: the codes of Pusher's protocol documentation.

/// A `pusher:error` a Pusher socket hears. Connection errors
/// (4000–4199) close the socket with their code right after; the others
/// only report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PusherError {
    /// 4001: no app has the key in the path.
    #[error("Application does not exist")]
    AppNotFound,
    /// 4004: the app holds its `max_connections` sockets.
    #[error("Application is over connection quota")]
    OverQuota,
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
}

impl PusherError {
    /// The `code` of the `pusher:error` (`None`: Pusher sends `null`).
    pub fn code(&self) -> Option<u16> {
        match self {
            PusherError::AppNotFound => Some(4001),
            PusherError::OverQuota => Some(4004),
            PusherError::InvalidVersion => Some(4006),
            PusherError::UnsupportedProtocol => Some(4007),
            PusherError::NoProtocol => Some(4008),
            PusherError::Terminated | PusherError::SigninRefused => Some(4009),
            PusherError::OverCapacity => Some(4100),
            PusherError::ClientEventRate => Some(4301),
            PusherError::ClientEventsDisabled
            | PusherError::ClientEventPublic
            | PusherError::ClientEventNotSubscribed(_)
            | PusherError::ClientEventTooLarge => None,
        }
    }

    /// The close code that follows the error, for connection errors.
    pub fn close_code(&self) -> Option<u16> {
        self.code().filter(|code| (4000..4300).contains(code))
    }
}
