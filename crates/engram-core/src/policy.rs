//! The mode policy of captured events (docs/CONTINUITY.md).
//!
//! A conversation runs in a cognitive *mode*: `dual` (the owner working with
//! the agent: everything is remembered), `agent` (the agent acting on its
//! own: only the results of actions are remembered) or `emulation` (someone
//! talking to a persona of the owner: nothing is written). Every capture
//! asks these functions, and nothing else may inline the rules: a new mode
//! or event type is added here, once.

use crate::error::{Error, Result};

/// A cognitive mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Dual,
    Agent,
    Emulation,
}

/// Who is talking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Owner,
    Guest,
}

/// What a captured event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Conversation,
    ToolInvocation,
    FileRead,
    FileWrite,
    CodeApproval,
    CodeRejection,
    Observation,
    Summary,
}

pub const MODES: [&str; 3] = ["dual", "agent", "emulation"];
pub const ROLES: [&str; 2] = ["owner", "guest"];
pub const EVENT_TYPES: [&str; 8] = [
    "conversation",
    "tool_invocation",
    "file_read",
    "file_write",
    "code_approval",
    "code_rejection",
    "observation",
    "summary",
];

/// The tool call an agent makes to answer in words: in agent mode it is a
/// reply, not an action, and is not captured.
pub const CONVERSATIONAL_RESPONSE: &str = "conversational_response";

fn unknown(what: &str, value: &str, allowed: &[&str]) -> Error {
    Error::invalid(
        format!("{what} '{}' is unknown", crate::error::echo(value)),
        format!("use one of {}", allowed.join(", ")),
    )
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        Ok(match s {
            "dual" => Mode::Dual,
            "agent" => Mode::Agent,
            "emulation" => Mode::Emulation,
            _ => return Err(unknown("mode", s, &MODES)),
        })
    }
}

impl Role {
    pub fn parse(s: &str) -> Result<Role> {
        Ok(match s {
            "owner" => Role::Owner,
            "guest" => Role::Guest,
            _ => return Err(unknown("role", s, &ROLES)),
        })
    }
}

impl EventType {
    pub fn parse(s: &str) -> Result<EventType> {
        Ok(match s {
            "conversation" => EventType::Conversation,
            "tool_invocation" => EventType::ToolInvocation,
            "file_read" => EventType::FileRead,
            "file_write" => EventType::FileWrite,
            "code_approval" => EventType::CodeApproval,
            "code_rejection" => EventType::CodeRejection,
            "observation" => EventType::Observation,
            "summary" => EventType::Summary,
            _ => return Err(unknown("event_type", s, &EVENT_TYPES)),
        })
    }
}

/// Whether `mode` persists an event of `event`: dual everything; agent the
/// results of actions (tool invocations, file writes, code approvals and
/// rejections) and summaries; emulation nothing.
pub fn can_write(mode: Mode, event: EventType) -> bool {
    use EventType::*;
    match mode {
        Mode::Dual => true,
        Mode::Agent => matches!(
            event,
            ToolInvocation | FileWrite | CodeApproval | CodeRejection | Summary
        ),
        Mode::Emulation => false,
    }
}

/// Whether `mode` captures a call of `tool_name`: never in emulation; in
/// agent mode every tool but the conversational reply.
pub fn should_capture_tool(mode: Mode, tool_name: &str) -> bool {
    match mode {
        Mode::Dual => true,
        Mode::Agent => tool_name != CONVERSATIONAL_RESPONSE,
        Mode::Emulation => false,
    }
}

/// How many memories a context package holds: 2 for a guest in any mode;
/// otherwise dual 12, agent 6, emulation 3.
pub fn context_depth(mode: Mode, role: Role) -> u32 {
    match (role, mode) {
        (Role::Guest, _) => 2,
        (Role::Owner, Mode::Dual) => 12,
        (Role::Owner, Mode::Agent) => 6,
        (Role::Owner, Mode::Emulation) => 3,
    }
}

/// Why a capture is skipped, or `None` when it is written: the policy
/// applied to one event, with the reason a caller can show.
pub fn skip_reason(mode: Mode, event: EventType, tool_name: Option<&str>) -> Option<String> {
    if !can_write(mode, event) {
        return Some(match mode {
            Mode::Emulation => "emulation mode is read-only: nothing is captured".to_string(),
            _ => format!("{} mode does not capture {} events", mode_name(mode), event_name(event)),
        });
    }
    if event == EventType::ToolInvocation {
        if let Some(tool) = tool_name {
            if !should_capture_tool(mode, tool) {
                return Some(format!("{} mode does not capture calls of {tool}", mode_name(mode)));
            }
        }
    }
    None
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Dual => "dual",
        Mode::Agent => "agent",
        Mode::Emulation => "emulation",
    }
}

fn event_name(event: EventType) -> &'static str {
    EVENT_TYPES[event as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Vec<EventType> {
        EVENT_TYPES.iter().map(|e| EventType::parse(e).unwrap()).collect()
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_errors() {
        for (i, e) in events().into_iter().enumerate() {
            assert_eq!(event_name(e), EVENT_TYPES[i]);
        }
        for m in MODES {
            assert_eq!(mode_name(Mode::parse(m).unwrap()), m);
        }
        let e = Mode::parse("turbo").unwrap_err();
        assert!(e.hint.contains("dual, agent, emulation"), "{}", e.hint);
        assert!(Role::parse("admin").is_err());
        assert!(EventType::parse("dream").unwrap_err().hint.contains("tool_invocation"));
    }

    #[test]
    fn dual_writes_everything_and_emulation_nothing() {
        for e in events() {
            assert!(can_write(Mode::Dual, e));
            assert!(!can_write(Mode::Emulation, e));
        }
    }

    #[test]
    fn agent_writes_the_results_of_actions_and_summaries() {
        let written: Vec<EventType> = events().into_iter().filter(|e| can_write(Mode::Agent, *e)).collect();
        use EventType::*;
        assert_eq!(
            written,
            vec![ToolInvocation, FileWrite, CodeApproval, CodeRejection, Summary]
        );
    }

    #[test]
    fn tool_capture_and_context_depth() {
        assert!(should_capture_tool(Mode::Dual, CONVERSATIONAL_RESPONSE));
        assert!(!should_capture_tool(Mode::Agent, CONVERSATIONAL_RESPONSE));
        assert!(should_capture_tool(Mode::Agent, "run_tests"));
        assert!(!should_capture_tool(Mode::Emulation, "run_tests"));
        assert_eq!(context_depth(Mode::Dual, Role::Owner), 12);
        assert_eq!(context_depth(Mode::Agent, Role::Owner), 6);
        assert_eq!(context_depth(Mode::Emulation, Role::Owner), 3);
        for m in [Mode::Dual, Mode::Agent, Mode::Emulation] {
            assert_eq!(context_depth(m, Role::Guest), 2);
        }
    }

    #[test]
    fn a_skipped_capture_says_why() {
        assert_eq!(skip_reason(Mode::Dual, EventType::Conversation, None), None);
        assert!(skip_reason(Mode::Emulation, EventType::Summary, None)
            .unwrap()
            .contains("read-only"));
        assert_eq!(
            skip_reason(Mode::Agent, EventType::FileRead, None).unwrap(),
            "agent mode does not capture file_read events"
        );
        assert!(
            skip_reason(Mode::Agent, EventType::ToolInvocation, Some(CONVERSATIONAL_RESPONSE))
                .unwrap()
                .contains(CONVERSATIONAL_RESPONSE)
        );
        assert_eq!(
            skip_reason(Mode::Agent, EventType::ToolInvocation, Some("run_tests")),
            None
        );
    }
}
