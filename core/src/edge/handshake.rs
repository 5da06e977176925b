//! The `/socket` and `/app/:key` handshakes: what the edge reads from the
//! upgrade request.
//! The accepted handshake that opening the socket requires is vocabulary
//! ([`crate::io::AcceptedHandshake`]).

use crate::ChannelProtocol;

use super::query::Query;

/// A `/socket` upgrade request as the edge read it (SPEC §6), before the
/// engine decides it with [`Engine::channel_handshake`](crate::Engine::channel_handshake).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelsUpgrade {
    /// The `appKey` query parameter (`None` when absent or empty); for
    /// `/app/:key`, the key (`None`: a path under `/app` without one, which
    /// the engine refuses with Pusher's 4005).
    pub app_key: Option<String>,
    /// `/socket`: `protocol=2` asks for `pubb:subscription_succeeded`;
    /// anything else (absent, `1`, `3`…) is the legacy acknowledgement.
    /// `/app/:key`: [`ChannelProtocol::Pusher`].
    pub protocol: ChannelProtocol,
    /// `/app/:key`: the `protocol` query value (Pusher's protocol version).
    pub version: Option<String>,
}

impl ChannelsUpgrade {
    pub(crate) fn from_query(query: &Query) -> ChannelsUpgrade {
        ChannelsUpgrade {
            app_key: query.get("appKey").map(str::to_owned),
            protocol: match query.get("protocol") {
                Some("2") => ChannelProtocol::V2,
                _ => ChannelProtocol::Legacy,
            },
            version: None,
        }
    }

    /// A Pusher upgrade: the key from the path (`None`: the path has
    /// none), the version from the query.
    pub(crate) fn pusher(key: Option<&str>, query: &Query) -> ChannelsUpgrade {
        ChannelsUpgrade {
            app_key: key.map(str::to_owned),
            protocol: ChannelProtocol::Pusher,
            version: query.get("protocol").map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(query: &str) -> ChannelsUpgrade {
        ChannelsUpgrade::from_query(&Query::parse(query).unwrap())
    }

    #[test]
    fn app_key_and_protocol_flag() {
        let v2 = read("appKey=app-key&protocol=2");
        assert_eq!(v2.app_key.as_deref(), Some("app-key"));
        assert_eq!(v2.protocol, ChannelProtocol::V2);
        for legacy in [
            "appKey=k",
            "appKey=k&protocol=1",
            "appKey=k&protocol=",
            "appKey=k&protocol=22",
            "appKey=k&protocol=2&protocol=3",
        ] {
            assert_eq!(read(legacy).protocol, ChannelProtocol::Legacy, "{legacy}");
        }
        assert_eq!(read("appKey=&protocol=2").app_key, None);
        assert_eq!(read("protocol=2").app_key, None);
    }
}
