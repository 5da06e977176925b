//! The one decision every thread operation goes through (SPEC §3).

use crate::error::BubbleError;
use crate::ids::{PrincipalId, ThreadId};
use crate::model::AppendableType;
use crate::policy::{Capability, CapabilitySet, Role};

/// What an operation needs on its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// One capability.
    Cap(Capability),
    /// Any `events.<type>` append capability (a self-join).
    AnyAppend,
}

impl From<Capability> for Need {
    fn from(cap: Capability) -> Need {
        Need::Cap(cap)
    }
}

/// The capabilities `principal` holds on `thread`, as the policy derived them.
#[derive(Debug, Clone, Copy)]
pub struct Access<'a> {
    /// Who asks.
    pub principal: &'a PrincipalId,
    /// The thread target.
    pub thread: &'a ThreadId,
    /// What the caller holds there ([`effective_capabilities`]).
    pub held: CapabilitySet,
}

/// The capabilities held on a thread by a caller who is an admin (`admin`),
/// holds `own` directly on the thread, and holds `ancestors` on its parent,
/// grandparent, … (nearest first; `None` where there is no grant).
///
/// Admins hold everything. A grant on an ancestor confers only the
/// [`CapabilitySet::INHERITABLE`] part of its role, transitively.
pub fn effective_capabilities(
    admin: bool,
    own: Option<Role>,
    ancestors: impl IntoIterator<Item = Option<Role>>,
) -> CapabilitySet {
    if admin {
        return CapabilitySet::ALL;
    }
    let direct = own.map_or(CapabilitySet::EMPTY, Role::capabilities);
    ancestors.into_iter().flatten().fold(direct, |held, role| {
        held.union(role.capabilities().intersection(CapabilitySet::INHERITABLE))
    })
}

/// Decides whether `access` allows an operation needing `need`.
///
/// Denial hiding: a caller without `thread.read` gets
/// [`BubbleError::ThreadNotFound`], exactly as if the thread did not exist;
/// a caller who can read but lacks the capability gets
/// [`BubbleError::Forbidden`] naming it. A refused self-join names
/// `events.message_part`, the capability a participant needs to take part.
pub fn authorize(access: &Access<'_>, need: impl Into<Need>) -> Result<(), BubbleError> {
    if !access.held.contains(Capability::ThreadRead) {
        return Err(BubbleError::ThreadNotFound(access.thread.clone()));
    }
    let (allowed, named) = match need.into() {
        Need::Cap(cap) => (access.held.contains(cap), cap),
        Need::AnyAppend => (
            access.held.intersects(CapabilitySet::APPENDS),
            Capability::Append(AppendableType::MessagePart),
        ),
    };
    if allowed {
        Ok(())
    } else {
        Err(BubbleError::Forbidden {
            principal: access.principal.clone(),
            capability: named,
            thread: access.thread.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn role_table(role: Role) -> &'static [&'static str] {
        match role {
            Role::Owner => &[
                "thread.read",
                "thread.manage",
                "grants.manage",
                "participants.manage",
                "subthreads.create",
                "events.subscribe",
                "events.run_started",
                "events.message_part",
                "events.tool_call_approval",
                "events.run_finished",
            ],
            Role::ThreadManager => &[
                "thread.read",
                "thread.manage",
                "participants.manage",
                "subthreads.create",
                "events.subscribe",
                "events.run_started",
                "events.message_part",
                "events.tool_call_approval",
                "events.run_finished",
            ],
            Role::Member => &[
                "thread.read",
                "events.subscribe",
                "subthreads.create",
                "events.run_started",
                "events.message_part",
                "events.tool_call_approval",
                "events.run_finished",
            ],
            Role::Reader => &["thread.read", "events.subscribe"],
        }
    }

    const INHERITED: [&str; 3] = ["thread.read", "events.subscribe", "thread.manage"];

    fn decide(held: CapabilitySet, cap: Capability) -> Result<(), ErrorCode> {
        let (p, t) = (
            PrincipalId::new("alice"),
            ThreadId::parse("thread-1").unwrap(),
        );
        authorize(
            &Access {
                principal: &p,
                thread: &t,
                held,
            },
            cap,
        )
        .map_err(|e| e.code())
    }

    fn expected(allowed: bool, readable: bool) -> Result<(), ErrorCode> {
        match (allowed, readable) {
            (true, _) => Ok(()),
            (false, true) => Err(ErrorCode::Forbidden),
            (false, false) => Err(ErrorCode::NotFound),
        }
    }

    #[test]
    fn role_capability_matrix() {
        for role in Role::ALL {
            let table = role_table(role);
            let cases = [
                (
                    "direct",
                    effective_capabilities(false, Some(role), []),
                    table.to_vec(),
                ),
                (
                    "parent",
                    effective_capabilities(false, None, [Some(role)]),
                    inherited(table),
                ),
                (
                    "grandparent",
                    effective_capabilities(false, None, [None, Some(role)]),
                    inherited(table),
                ),
            ];
            for (how, held, granted) in cases {
                for cap in Capability::ALL {
                    let allowed = granted.contains(&cap.as_str());
                    let readable = granted.contains(&"thread.read");
                    assert_eq!(
                        decide(held, cap),
                        expected(allowed, readable),
                        "{role:?} {how} {cap}"
                    );
                }
            }
        }
    }

    fn inherited(table: &[&'static str]) -> Vec<&'static str> {
        table
            .iter()
            .copied()
            .filter(|c| INHERITED.contains(c))
            .collect()
    }

    #[test]
    fn no_grant_hides_and_admin_holds_everything() {
        let none = effective_capabilities(false, None, [None, None]);
        let admin = effective_capabilities(true, None, []);
        for cap in Capability::ALL {
            assert_eq!(decide(none, cap), Err(ErrorCode::NotFound));
            assert_eq!(decide(admin, cap), Ok(()));
        }
    }

    #[test]
    fn forbidden_message_matches_seed() {
        let (p, t) = (
            PrincipalId::new("alice"),
            ThreadId::parse("thread-1").unwrap(),
        );
        let held = Role::Reader.capabilities();
        let err = authorize(
            &Access {
                principal: &p,
                thread: &t,
                held,
            },
            Capability::Append(AppendableType::MessagePart),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Principal \"alice\" lacks \"events.message_part\" on thread \"thread-1\"."
        );
    }

    #[test]
    fn self_join_needs_any_append() {
        let (p, t) = (
            PrincipalId::new("alice"),
            ThreadId::parse("thread-1").unwrap(),
        );
        let reader = Access {
            principal: &p,
            thread: &t,
            held: Role::Reader.capabilities(),
        };
        assert_eq!(
            authorize(&reader, Need::AnyAppend).unwrap_err().code(),
            ErrorCode::Forbidden
        );
        let one = CapabilitySet::of(&[
            Capability::ThreadRead,
            Capability::Append(AppendableType::RunFinished),
        ]);
        let member = Access {
            principal: &p,
            thread: &t,
            held: one,
        };
        assert_eq!(authorize(&member, Need::AnyAppend), Ok(()));
    }

    #[test]
    fn inheritance_unions_the_nearest_grants() {
        let held = effective_capabilities(false, Some(Role::Reader), [Some(Role::Owner)]);
        assert!(held.contains(Capability::ThreadManage));
        assert!(!held.contains(Capability::GrantsManage));
        assert!(!held.contains(Capability::Append(AppendableType::RunStarted)));
    }
}
