//! Channel names and the access rules their prefixes imply.

/// Longest channel name a socket may subscribe to, in bytes (SPEC §6).
pub const MAX_CHANNEL_NAME_BYTES: usize = 200;

/// Longest channel name a Pusher client may use, in characters (Pusher's
/// channel naming conventions: 164, prefixes included).
pub const MAX_PUSHER_CHANNEL_CHARS: usize = crate::edge::PUSHER_CHANNEL_CHARS;

/// What a channel's name says about who may subscribe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// Anyone holding the app key.
    Public,
    /// `private-…`: a signature over `socket_id:channel`.
    Private,
    /// `presence-…`: a signature over `socket_id:channel:channel_data`.
    Presence,
}

impl ChannelKind {
    /// The kind of `channel`, from its prefix.
    pub fn of(channel: &str) -> ChannelKind {
        if channel.starts_with("presence-") {
            ChannelKind::Presence
        } else if channel.starts_with("private-") {
            ChannelKind::Private
        } else {
            ChannelKind::Public
        }
    }

    /// Whether subscribing needs a signature.
    pub fn is_restricted(self) -> bool {
        self != ChannelKind::Public
    }
}

/// Whether a socket may name `channel`: 1–200 bytes of `[A-Za-z0-9_\-=@,.;]`.
pub fn is_valid_subscription_name(channel: &str) -> bool {
    (1..=MAX_CHANNEL_NAME_BYTES).contains(&channel.len())
        && channel.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'=' | b'@' | b',' | b'.' | b';')
        })
}

/// Whether a Pusher socket or Pusher's HTTP API may name `channel`: the
/// same alphabet, at most [`MAX_PUSHER_CHANNEL_CHARS`] characters.
pub fn is_valid_pusher_name(channel: &str) -> bool {
    channel.len() <= MAX_PUSHER_CHANNEL_CHARS && is_valid_subscription_name(channel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_prefixes() {
        assert_eq!(ChannelKind::of("notifications"), ChannelKind::Public);
        assert_eq!(ChannelKind::of("private-user-42"), ChannelKind::Private);
        assert_eq!(ChannelKind::of("presence-team-42"), ChannelKind::Presence);
        assert_eq!(ChannelKind::of("privatefoo"), ChannelKind::Public);
    }

    #[test]
    fn subscription_names() {
        assert!(is_valid_subscription_name("a-Z_0=@,.;"));
        assert!(is_valid_subscription_name(&"x".repeat(200)));
        assert!(!is_valid_subscription_name(&"x".repeat(201)));
        assert!(!is_valid_subscription_name(""));
        assert!(!is_valid_subscription_name("has space"));
        assert!(!is_valid_subscription_name("slash/no"));
        assert!(!is_valid_subscription_name("é"));
        assert!(is_valid_pusher_name(&"x".repeat(164)));
        assert!(!is_valid_pusher_name(&"x".repeat(165)));
        assert!(!is_valid_pusher_name("has space"));
    }
}
