//! SQL bindings of the mode policy of captured events (engram-core's
//! `policy`): IMMUTABLE, and the only place SQL learns the rules.

use crate::errors::OrRaise;
use engram_core::policy::{self, EventType, Mode, Role};
use pgrx::prelude::*;

/// Whether `mode` (dual, agent, emulation) persists an event of `event_type`.
#[pg_extern(immutable, parallel_safe, strict)]
fn can_write(mode: &str, event_type: &str) -> bool {
    policy::can_write(Mode::parse(mode).or_raise(), EventType::parse(event_type).or_raise())
}

/// Whether `mode` captures a call of `tool_name`.
#[pg_extern(immutable, parallel_safe, strict)]
fn should_capture_tool(mode: &str, tool_name: &str) -> bool {
    policy::should_capture_tool(Mode::parse(mode).or_raise(), tool_name)
}

/// How many memories a context package of `mode` holds for `role` (owner, guest).
#[pg_extern(immutable, parallel_safe)]
fn context_depth(mode: &str, role: default!(&str, "'owner'")) -> i32 {
    policy::context_depth(Mode::parse(mode).or_raise(), Role::parse(role).or_raise()) as i32
}

/// Why a capture would be skipped, or NULL when it would be written.
#[pg_extern(immutable, parallel_safe)]
fn _capture_skip_reason(mode: &str, event_type: &str, tool_name: Option<&str>) -> Option<String> {
    policy::skip_reason(
        Mode::parse(mode).or_raise(),
        EventType::parse(event_type).or_raise(),
        tool_name,
    )
}
