//! What other nodes of the cluster say about channels: their publications,
//! presence members and subscriber counts, one message at a time or as the
//! broker's snapshot of every node ([`NodeState`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::cluster::{ChannelRow, ClusterMessage, MemberRow, NodeState};
use crate::ctx::Ctx;
use crate::ids::Millis;

use super::fanout;
use super::frames;
use super::pusher::webhooks::{self, WebhookEvent};
use super::registry::{AppIdx, Registry};
use super::wire::MemberEvent;

/// Applies one message from `node`. State messages older than what is
/// applied of `node` already (a snapshot held them) are dropped.
pub(crate) fn message(reg: &mut Registry, cx: &mut Ctx<'_>, node: &str, message: ClusterMessage) {
    // The host feeds a `NodeGone` this node published itself under its own id.
    if node != reg.peers.me() && !reg.peers.heard(node, message.seq()) {
        return;
    }
    // A state message's origin time is its seq, in milliseconds.
    let at = message.seq().map_or(cx.now, |seq| Millis(seq / 1000));
    match message {
        ClusterMessage::Publication {
            app_id,
            channels,
            payload,
            socket_id,
            client_event,
            at,
        } => {
            let Some(app) = reg.app_by_id(&app_id) else {
                return;
            };
            fanout::deliver(
                &reg.apps[app],
                cx,
                &channels,
                &payload,
                socket_id.as_deref(),
            );
            if let (true, Some(socket_id), Some(channel)) =
                (client_event, socket_id, channels.first())
            {
                let at = if at == 0 { cx.now } else { Millis(at) };
                report_client_event(reg, app, channel, &payload, (socket_id, at));
            }
        }
        ClusterMessage::MemberJoined {
            app_id,
            channel,
            user_id,
            user_info,
            ..
        } => {
            if let Some(app) = reg.app_by_id(&app_id) {
                let info = user_info.and_then(|raw| serde_json::from_str(&raw).ok());
                joined(reg, cx, (app, &channel), (node, &user_id), info, at);
            }
        }
        ClusterMessage::MemberLeft {
            app_id,
            channel,
            user_id,
            ..
        } => {
            if let Some(app) = reg.app_by_id(&app_id) {
                left(reg, cx, (app, &channel), (node, &user_id), at);
            }
        }
        ClusterMessage::Subscribers {
            app_id,
            channel,
            count,
            ..
        } => {
            if let Some(app) = reg.app_by_id(&app_id) {
                set_count(reg, (app, &channel), node, count, at);
            }
        }
        ClusterMessage::TerminateUser { app_id, user_id } => {
            if let Some(app) = reg.app_by_id(&app_id) {
                super::pusher::http::terminate_here(reg, cx, app, &user_id);
            }
        }
        ClusterMessage::NodeGone { node: gone } => {
            if gone != reg.peers.me() && reg.peers.gone(&gone) {
                forget(reg, cx, &gone);
            }
        }
        ClusterMessage::Hello { since } => reg.peers.hello(node, since),
        ClusterMessage::ThreadChanged { .. } => {}
    }
}

/// A client event another node relayed: its `client_event` webhook, if
/// this node reports the channel.
fn report_client_event(
    reg: &mut Registry,
    app: AppIdx,
    channel: &str,
    payload: &str,
    (socket_id, at): (String, Millis),
) {
    let Some(parts) = frames::payload_parts(payload) else {
        return;
    };
    let event = WebhookEvent::ClientEvent {
        channel: channel.to_owned(),
        event: parts.name,
        data: parts.data,
        socket_id,
        user_id: parts.user_id,
    };
    webhooks::report(reg, app, event, at);
}

/// Applies the broker's snapshot of the other nodes: each node's rows
/// replace what is known of it unless a newer message of it was applied;
/// a known node missing from it twice in a row is gone. The first snapshot
/// settles the node: it reports webhooks from then on, and says hello so
/// the others count it among the reporters at once (not at their next
/// snapshot).
pub(crate) fn snapshot(reg: &mut Registry, cx: &mut Ctx<'_>, nodes: Vec<NodeState>) {
    let present: BTreeSet<String> = nodes.iter().map(|n| n.node.clone()).collect();
    for state in nodes {
        if reg.peers.snapshot(&state.node, state.seq, state.since) {
            replace(reg, cx, &state.node, &state.members, &state.channels);
        }
    }
    for gone in reg.peers.missing_from(&present) {
        forget(reg, cx, &gone);
    }
    if let Some(since) = reg.peers.settle(cx.now) {
        fanout::announce(cx, ClusterMessage::Hello { since });
    }
}

/// Removes everything `node` held: its members leave, its subscribers go.
fn forget(reg: &mut Registry, cx: &mut Ctx<'_>, node: &str) {
    replace(reg, cx, node, &[], &[]);
}

/// Makes what is known of `node` exactly `members` and `channels`. Per
/// channel, a count that grows is applied before the members change and
/// one that shrinks after, so `channel_occupied` comes before the members'
/// events and `channel_vacated` after them.
fn replace(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    node: &str,
    members: &[MemberRow],
    channels: &[ChannelRow],
) {
    let mut counts: BTreeMap<(AppIdx, String), u64> = BTreeMap::new();
    for row in channels {
        if let Some(app) = reg.app_by_id(&row.app_id) {
            counts.insert((app, row.channel.clone()), row.count);
        }
    }
    for (app, state) in reg.apps.iter().enumerate() {
        for (channel, nodes) in &state.remote_counts {
            if nodes.contains_key(node) {
                counts.entry((app, channel.clone())).or_insert(0);
            }
        }
    }
    let held = |reg: &Registry, app: AppIdx, channel: &str| {
        reg.apps[app]
            .remote_counts
            .get(channel)
            .and_then(|nodes| nodes.get(node))
            .copied()
            .unwrap_or(0)
    };
    for ((app, channel), &count) in &counts {
        if count > held(reg, *app, channel) {
            set_count(reg, (*app, channel), node, count, cx.now);
        }
    }
    sync_members(reg, cx, node, members);
    for ((app, channel), &count) in &counts {
        if count < held(reg, *app, channel) {
            set_count(reg, (*app, channel), node, count, cx.now);
        }
    }
}

/// Makes `node`'s presence members exactly `rows`.
fn sync_members(reg: &mut Registry, cx: &mut Ctx<'_>, node: &str, rows: &[MemberRow]) {
    let mut wanted: BTreeMap<(AppIdx, String, String), Option<Value>> = BTreeMap::new();
    for row in rows {
        if let Some(app) = reg.app_by_id(&row.app_id) {
            let info = row
                .user_info
                .as_deref()
                .and_then(|raw| serde_json::from_str(raw).ok());
            wanted.insert((app, row.channel.clone(), row.user_id.clone()), info);
        }
    }
    for app in 0..reg.apps.len() {
        for (channel, user) in members_of(reg, app, node) {
            if wanted
                .remove(&(app, channel.clone(), user.clone()))
                .is_none()
            {
                left(reg, cx, (app, &channel), (node, &user), cx.now);
            }
        }
    }
    for ((app, channel, user), info) in wanted {
        joined(reg, cx, (app, &channel), (node, &user), info, cx.now);
    }
}

/// This node's own channel state, as the broker should hold it, under a
/// new `seq` (a node that restarted under the same id replaces what its
/// last run left at once).
pub(crate) fn local_state(reg: &mut Registry, now: Millis) -> NodeState {
    let seq = reg.peers.next_seq(now);
    let mut state = NodeState {
        node: reg.peers.me().to_owned(),
        seq,
        since: reg.peers.since(),
        ..NodeState::default()
    };
    for app in &reg.apps {
        for (channel, presence) in &app.presence {
            for (user, info) in presence.local_members() {
                state.members.push(MemberRow {
                    app_id: app.config.id.clone(),
                    channel: channel.clone(),
                    user_id: user.to_owned(),
                    user_info: info.map(Value::to_string),
                });
            }
        }
        for (channel, entry) in &app.channels {
            state.channels.push(ChannelRow {
                app_id: app.config.id.clone(),
                channel: channel.clone(),
                count: entry.subscribers.len() as u64,
            });
        }
    }
    state
}

/// Every `(channel, user)` held for `node` in `app`.
fn members_of(reg: &Registry, app: AppIdx, node: &str) -> Vec<(String, String)> {
    reg.apps[app]
        .presence
        .iter()
        .flat_map(|(channel, presence)| {
            presence
                .remote_pairs()
                .into_iter()
                .filter(|(n, _)| n == node)
                .map(move |(_, user)| (channel.clone(), user))
        })
        .collect()
}

/// `node` has `count` subscribers of `channel` since `at`; reports the
/// channel's occupancy if that changed it.
fn set_count(
    reg: &mut Registry,
    (app, channel): (AppIdx, &str),
    node: &str,
    count: u64,
    at: Millis,
) {
    let state = &mut reg.apps[app];
    let was = state.occupied(channel);
    let nodes = state.remote_counts.entry(channel.to_owned()).or_default();
    if count == 0 {
        nodes.remove(node);
    } else {
        nodes.insert(node.to_owned(), count);
    }
    if nodes.is_empty() {
        state.remote_counts.remove(channel);
    }
    let now = state.occupied(channel);
    if was != now {
        let channel = channel.to_owned();
        let event = if now {
            WebhookEvent::Occupied { channel }
        } else {
            WebhookEvent::Vacated { channel }
        };
        webhooks::report(reg, app, event, at);
    }
}

/// `user` has a socket on `node` in presence `channel` since `at`.
fn joined(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    (app, channel): (AppIdx, &str),
    (node, user): (&str, &str),
    info: Option<Value>,
    at: Millis,
) {
    let state = &mut reg.apps[app];
    let presence = state.presence.entry(channel.to_owned()).or_default();
    if !presence.join_remote(node, user, info) {
        return;
    }
    let info = presence.info(user).cloned();
    let added = MemberEvent::Added {
        user_id: user,
        info: info.as_ref(),
    };
    fanout::member(state, cx, channel, added, None);
    let event = WebhookEvent::MemberAdded {
        channel: channel.to_owned(),
        user_id: user.to_owned(),
    };
    webhooks::report(reg, app, event, at);
}

/// `user` has no socket on `node` in presence `channel` since `at`.
fn left(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    (app, channel): (AppIdx, &str),
    (node, user): (&str, &str),
    at: Millis,
) {
    let state = &mut reg.apps[app];
    let Some(presence) = state.presence.get_mut(channel) else {
        return;
    };
    let gone = presence.leave_remote(node, user);
    if presence.is_empty() {
        state.presence.remove(channel);
    }
    if !gone {
        return;
    }
    fanout::member(
        state,
        cx,
        channel,
        MemberEvent::Removed { user_id: user },
        None,
    );
    let event = WebhookEvent::MemberRemoved {
        channel: channel.to_owned(),
        user_id: user.to_owned(),
    };
    webhooks::report(reg, app, event, at);
}
