//! What other nodes of the cluster say about channels: their publications
//! and their presence members.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::cluster::{ClusterMessage, PresenceEntry};
use crate::ctx::Ctx;

use super::fanout;
use super::pusher::webhooks;
use super::registry::{AppIdx, Registry};
use super::wire::MemberEvent;

/// Applies one message from `node`.
pub(crate) fn message(reg: &mut Registry, cx: &mut Ctx<'_>, node: &str, message: ClusterMessage) {
    match message {
        ClusterMessage::Publication {
            app_id,
            channels,
            payload,
            socket_id,
        } => {
            if let Some(app) = reg.app_by_id(&app_id) {
                fanout::deliver(
                    &reg.apps[app],
                    cx,
                    &channels,
                    &payload,
                    socket_id.as_deref(),
                );
            }
        }
        ClusterMessage::MemberJoined {
            app_id,
            channel,
            user_id,
            user_info,
        } => {
            if let Some(app) = reg.app_by_id(&app_id) {
                let info = user_info.and_then(|raw| serde_json::from_str(&raw).ok());
                joined(reg, cx, app, &channel, node, &user_id, info);
            }
        }
        ClusterMessage::MemberLeft {
            app_id,
            channel,
            user_id,
        } => {
            if let Some(app) = reg.app_by_id(&app_id) {
                left(reg, cx, app, &channel, node, &user_id);
            }
        }
        ClusterMessage::ChannelOccupancy {
            app_id,
            channel,
            occupied,
            reported,
        } => {
            if let Some(app) = reg.app_by_id(&app_id) {
                let change = (occupied, reported);
                webhooks::remote_occupancy(reg, app, node, &channel, change);
            }
        }
        ClusterMessage::TerminateUser { app_id, user_id } => {
            if let Some(app) = reg.app_by_id(&app_id) {
                super::pusher::http::terminate_here(reg, cx, app, &user_id);
            }
        }
        ClusterMessage::NodeGone { node: gone } => {
            for app in 0..reg.apps.len() {
                let held: Vec<String> = reg.apps[app]
                    .remote_occupied
                    .iter()
                    .filter(|(_, nodes)| nodes.contains(&gone))
                    .map(|(channel, _)| channel.clone())
                    .collect();
                for channel in held {
                    webhooks::remote_occupancy(reg, app, &gone, &channel, (false, false));
                }
            }
            for app in 0..reg.apps.len() {
                for (channel, node, user) in remote_members(reg, app) {
                    if node == gone {
                        left(reg, cx, app, &channel, &node, &user);
                    }
                }
            }
        }
        ClusterMessage::ThreadChanged { .. } => {}
    }
}

/// Replaces what this node knows of the other nodes' members with
/// `entries`, announcing the difference to local subscribers.
pub(crate) fn resync(reg: &mut Registry, cx: &mut Ctx<'_>, entries: Vec<PresenceEntry>) {
    let mut wanted: BTreeSet<(AppIdx, String, String, String)> = BTreeSet::new();
    let mut infos: BTreeMap<(AppIdx, String, String), Option<Value>> = BTreeMap::new();
    for entry in entries {
        let Some(app) = reg.app_by_id(&entry.app_id) else {
            continue;
        };
        let info = entry
            .user_info
            .and_then(|raw| serde_json::from_str(&raw).ok());
        infos.insert((app, entry.channel.clone(), entry.user_id.clone()), info);
        wanted.insert((app, entry.channel, entry.node, entry.user_id));
    }
    for app in 0..reg.apps.len() {
        for (channel, node, user) in remote_members(reg, app) {
            if !wanted.remove(&(app, channel.clone(), node.clone(), user.clone())) {
                left(reg, cx, app, &channel, &node, &user);
            }
        }
    }
    for (app, channel, node, user) in wanted {
        let info = infos
            .get(&(app, channel.clone(), user.clone()))
            .cloned()
            .flatten();
        joined(reg, cx, app, &channel, &node, &user, info);
    }
}

/// This node's own members, as the announcements that re-create them.
pub(crate) fn local_members(reg: &Registry) -> Vec<ClusterMessage> {
    let mut members = Vec::new();
    for app in &reg.apps {
        for (channel, presence) in &app.presence {
            for (user, info) in presence.local_members() {
                members.push(ClusterMessage::MemberJoined {
                    app_id: app.config.id.clone(),
                    channel: channel.clone(),
                    user_id: user.to_owned(),
                    user_info: info.map(Value::to_string),
                });
            }
        }
    }
    members
}

/// Every `(channel, node, user)` held for other nodes in `app`.
fn remote_members(reg: &Registry, app: AppIdx) -> Vec<(String, String, String)> {
    reg.apps[app]
        .presence
        .iter()
        .flat_map(|(channel, presence)| {
            presence
                .remote_pairs()
                .into_iter()
                .map(move |(node, user)| (channel.clone(), node, user))
        })
        .collect()
}

fn joined(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    app: AppIdx,
    channel: &str,
    node: &str,
    user: &str,
    info: Option<Value>,
) {
    let state = &mut reg.apps[app];
    let presence = state.presence.entry(channel.to_owned()).or_default();
    if presence.join_remote(node, user, info) {
        let info = presence.info(user).cloned();
        let added = MemberEvent::Added {
            user_id: user,
            info: info.as_ref(),
        };
        fanout::member(state, cx, channel, added, None);
    }
}

fn left(reg: &mut Registry, cx: &mut Ctx<'_>, app: AppIdx, channel: &str, node: &str, user: &str) {
    let state = &mut reg.apps[app];
    let Some(presence) = state.presence.get_mut(channel) else {
        return;
    };
    let gone = presence.leave_remote(node, user);
    if presence.is_empty() {
        state.presence.remove(channel);
    }
    if gone {
        fanout::member(
            state,
            cx,
            channel,
            MemberEvent::Removed { user_id: user },
            None,
        );
    }
}
