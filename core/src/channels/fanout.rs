//! Getting a publication or a member event to its audience: the channel's
//! subscribers on this node, one shared frame each, and, in a cluster, the
//! other nodes.

use crate::cluster::ClusterMessage;
use crate::ctx::Ctx;
use crate::ids::ConnId;
use crate::io::{Output, SharedFrame};

use super::frames;
use super::registry::App;

/// Sends `frame` to every subscriber of `channel` on this node but
/// `except`; returns how many it reached.
pub(crate) fn send(
    app: &App,
    cx: &mut Ctx<'_>,
    channel: &str,
    frame: &SharedFrame,
    except: Option<ConnId>,
) -> u64 {
    let Some(entry) = app.channels.get(channel) else {
        return 0;
    };
    let mut sent = 0;
    for &conn in entry.subscribers.iter().filter(|&&c| Some(c) != except) {
        cx.out.push_unfenced(Output::Send {
            conn,
            frame: frame.clone(),
        });
        sent += 1;
    }
    sent
}

/// Delivers a publication's `payload` on each of `channels`, leaving out
/// the socket whose `socket_id` is `excluded` if it is connected here.
pub(crate) fn deliver(
    app: &App,
    cx: &mut Ctx<'_>,
    channels: &[String],
    payload: &str,
    excluded: Option<&str>,
) {
    let except = excluded.and_then(|id| app.sockets_by_id.get(id)).copied();
    for channel in channels {
        if !app.channels.contains_key(channel) {
            continue;
        }
        let frame = frames::delivery(channel, payload);
        cx.metrics.deliveries += send(app, cx, channel, &frame, except);
    }
}

/// Tells the other nodes, when this engine is one node of a cluster.
pub(crate) fn announce(cx: &mut Ctx<'_>, message: ClusterMessage) {
    if cx.cluster {
        cx.out.push_unfenced(Output::Broadcast { message });
    }
}
