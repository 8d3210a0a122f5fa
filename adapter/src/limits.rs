//! Limits on what a caller may send, checked at the adapter so that the
//! answer names the tool's own argument or header (the database checks the
//! same limits again), and the cap on echoes of a caller's input in error
//! messages.

/// Longest id a caller may send: session ids, accessors, owners to act for
/// (X-User-Id), workspaces, labels, ghost ids.
pub const MAX_ID_CHARS: usize = 256;

/// Longest free-text reason (kept in revisions and the audit log).
pub const MAX_REASON_CHARS: usize = 1000;

/// Characters of a caller's input that an error message repeats.
pub const ECHO_CHARS: usize = 80;

/// At most [`ECHO_CHARS`] characters of `s`, with "…" when cut: error
/// messages repeat what the caller sent so that it can tell which value
/// was wrong, never a whole megabyte of it.
pub fn clip(s: &str) -> String {
    let mut chars = s.chars();
    let head: String = chars.by_ref().take(ECHO_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// Longest message passed on from the database.
pub const MAX_MESSAGE_CHARS: usize = 2000;

/// A database message with every quoted part ('…' or "…") longer than
/// [`ECHO_CHARS`] cut, and the whole within [`MAX_MESSAGE_CHARS`]: engram's
/// messages quote the caller's input (a workspace name, a label), which must
/// not come back whole when it is megabytes long.
pub fn clip_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE_CHARS + 8));
    let mut rest = message;
    while let Some(start) = rest.find(['\'', '"']) {
        let quote = rest.as_bytes()[start] as char;
        out.push_str(&rest[..=start]);
        rest = &rest[start + 1..];
        let end = rest.find(quote).unwrap_or(rest.len());
        out.push_str(&clip(&rest[..end]));
        rest = &rest[end..];
        if let Some(r) = rest.strip_prefix(quote) {
            out.push(quote);
            rest = r;
        }
    }
    out.push_str(rest);
    if out.chars().count() > MAX_MESSAGE_CHARS {
        out = out.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "…";
    }
    out
}

/// Refuses `value` when it is longer than `max` characters; `what` names it
/// as the caller knows it (the tool argument or header).
pub fn check_len(what: &str, value: &str, max: usize) -> Result<(), String> {
    let n = value.chars().count();
    if n > max {
        return Err(format!(
            "{what} is {n} characters long; the limit is {max}. Send a shorter one."
        ));
    }
    Ok(())
}

/// [`check_len`] for an optional value.
pub fn check_opt(what: &str, value: Option<&str>, max: usize) -> Result<(), String> {
    value.map_or(Ok(()), |v| check_len(what, v, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_are_capped() {
        assert_eq!(clip("short"), "short");
        let long = "x".repeat(3_000_000);
        let c = clip(&long);
        assert_eq!(c.chars().count(), ECHO_CHARS + 1);
        assert!(c.ends_with('…'));
        assert_eq!(clip(&"é".repeat(ECHO_CHARS)), "é".repeat(ECHO_CHARS));
    }

    #[test]
    fn quoted_echoes_in_database_messages_are_capped() {
        let name = "w".repeat(3_000_000);
        let m = clip_quoted(&format!("Workspace \"{name}\" not found. Use memory_workspace_list"));
        assert!(m.starts_with("Workspace \"www"), "{m}");
        assert!(m.ends_with("…\" not found. Use memory_workspace_list"), "{m}");
        assert!(m.chars().count() < 200);
        assert_eq!(clip_quoted("it's fine"), "it's fine");
        assert_eq!(clip_quoted("a 'b' \"c\""), "a 'b' \"c\"");
        assert!(clip_quoted(&"z".repeat(5000)).chars().count() <= MAX_MESSAGE_CHARS + 1);
    }

    #[test]
    fn lengths_are_counted_in_characters() {
        assert!(check_len("session_id", &"é".repeat(MAX_ID_CHARS), MAX_ID_CHARS).is_ok());
        let e = check_len("session_id", &"é".repeat(MAX_ID_CHARS + 1), MAX_ID_CHARS).unwrap_err();
        assert!(e.starts_with("session_id is 257 characters"), "{e}");
        assert!(check_opt("reason", None, 1).is_ok());
    }
}
