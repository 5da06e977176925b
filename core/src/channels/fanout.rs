//! Getting a publication or a member event to its audience: the channel's
//! subscribers on this node, one shared frame per wire format, and, in a
//! cluster, the other nodes.

use crate::cluster::ClusterMessage;
use crate::ctx::Ctx;
use crate::ids::ConnId;
use crate::io::{Output, SharedFrame};

use super::frames::{self, PayloadParts};
use super::pusher;
use super::registry::App;
use super::wire::{Codec, MemberEvent};

/// Sends to every subscriber of `channel` on this node but `except` the
/// frame `render` builds for its wire format: one output per wire format,
/// its frame built once and its recipients listed; returns how many it
/// reached.
fn send_rendered(
    app: &App,
    cx: &mut Ctx<'_>,
    channel: &str,
    except: Option<ConnId>,
    mut render: impl FnMut(Codec) -> Option<SharedFrame>,
) -> u64 {
    let Some(entry) = app.channels.get(channel) else {
        return 0;
    };
    let mut sent = 0;
    for codec in [Codec::Pubb, Codec::Pusher] {
        let mut conns = entry.audience(codec).to_vec();
        if let Some(at) = except.and_then(|c| conns.binary_search(&c).ok()) {
            conns.remove(at);
        }
        if conns.is_empty() {
            continue;
        }
        let Some(frame) = render(codec) else {
            continue;
        };
        sent += conns.len() as u64;
        cx.out.push_unfenced(Output::SendAll { conns, frame });
    }
    sent
}

/// Tells every subscriber of `channel` here but `except` of a presence change.
pub(crate) fn member(
    app: &App,
    cx: &mut Ctx<'_>,
    channel: &str,
    event: MemberEvent<'_>,
    except: Option<ConnId>,
) {
    send_rendered(app, cx, channel, except, |codec| {
        Some(event.render(codec, channel))
    });
}

/// Delivers a publication's `payload` on each of `channels`, leaving out
/// the socket whose `socket_id` is `excluded` if it is connected here.
/// Pusher subscribers get the payload's parts, read back once.
pub(crate) fn deliver(
    app: &App,
    cx: &mut Ctx<'_>,
    channels: &[String],
    payload: &str,
    excluded: Option<&str>,
) {
    let except = excluded.and_then(|id| app.sockets_by_id.get(id)).copied();
    let mut parts: Option<Option<PayloadParts>> = None;
    for channel in channels {
        if !app.channels.contains_key(channel) {
            continue;
        }
        cx.metrics.deliveries += send_rendered(app, cx, channel, except, |codec| match codec {
            Codec::Pubb => Some(frames::delivery(channel, payload)),
            Codec::Pusher => parts
                .get_or_insert_with(|| frames::payload_parts(payload))
                .as_ref()
                .map(|p| pusher::frames::event(channel, &p.name, &p.data, p.user_id.as_deref())),
        });
    }
}

/// Sends an accepted publication out: to subscribers here, and to the
/// other nodes of a cluster. A Pusher client event (`client_event`) is
/// marked so, for the node that reports its channel's webhooks.
pub(crate) fn publish(
    app: &App,
    cx: &mut Ctx<'_>,
    (channels, payload): (Vec<String>, String),
    socket_id: Option<String>,
    client_event: bool,
) {
    deliver(app, cx, &channels, &payload, socket_id.as_deref());
    announce(
        cx,
        ClusterMessage::Publication {
            app_id: app.config.id.clone(),
            channels,
            payload,
            socket_id,
            client_event,
            at: if client_event { cx.now.0 } else { 0 },
        },
    );
    cx.metrics.publishes += 1;
}

/// Tells the other nodes, when this engine is one node of a cluster.
pub(crate) fn announce(cx: &mut Ctx<'_>, message: ClusterMessage) {
    if cx.cluster {
        cx.out.push_unfenced(Output::Broadcast { message });
    }
}
