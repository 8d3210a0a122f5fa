//! Conversation turns as memories: the text a turn is embedded as, and how
//! the turns a search found are read as conversations.
//!
//! A turn alone is often too short to mean anything to an embedding model
//! ("Yes, the second one", "Sounds good, book it"): what it answers is in
//! the turn before it. So an episodic memory of a session is embedded with
//! that turn after its own text ([`contextual_text`]). Only the vector
//! changes: the stored content, and so the full-text leg of search, is the
//! turn alone.

/// Characters of the previous turn added to a turn's embedded text. The
/// local model reads about 256 word pieces (some 1,000 characters of
/// English); the turn comes first and keeps most of them, the context
/// fills what a short turn leaves.
pub const CONTEXT_CHARS: usize = 400;

/// The text a conversation turn is embedded as: the turn, then (after a
/// blank line) the end of the turn before it in its session, at most
/// [`CONTEXT_CHARS`] characters cut at a word boundary. Without a previous
/// turn (the session's first, or a memory outside a session), the turn
/// alone.
pub fn contextual_text(turn: &str, previous: Option<&str>) -> String {
    let Some(previous) = previous.map(str::trim).filter(|p| !p.is_empty()) else {
        return turn.to_string();
    };
    format!("{turn}\n\n{}", tail(previous, CONTEXT_CHARS))
}

/// The last `max` characters of `text`, starting at a word: what a reply
/// answers is at the end of the turn it replies to.
fn tail(text: &str, max: usize) -> &str {
    let count = text.chars().count();
    if count <= max {
        return text;
    }
    let start = text.char_indices().nth(count - max).map_or(0, |(i, _)| i);
    let cut = &text[start..];
    match cut.find(char::is_whitespace) {
        Some(i) if i < cut.len() / 2 => cut[i..].trim_start(),
        _ => cut,
    }
}

/// The sessions of turns in the order a search found them, each once: the
/// session of a turn id is what comes before its last `:` ("S3:12" -> "S3",
/// "D1:4" -> "D1"); an id without one is its own session.
pub fn sessions_in_order<S: AsRef<str>>(turns: &[S]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in turns {
        let t = t.as_ref();
        let s = t.rsplit_once(':').map_or(t, |(s, _)| s).to_string();
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_embedded_with_the_end_of_the_one_before() {
        assert_eq!(contextual_text("Yes, book it", None), "Yes, book it");
        assert_eq!(contextual_text("Yes, book it", Some("  ")), "Yes, book it");
        assert_eq!(
            contextual_text("Yes, book it", Some("Shall I book the 7:40 flight to Lisbon?")),
            "Yes, book it\n\nShall I book the 7:40 flight to Lisbon?"
        );
        // a long previous turn: its end, from a word
        let long = format!("{} the last words", "word ".repeat(200));
        let text = contextual_text("Sure", Some(&long));
        let context = text.strip_prefix("Sure\n\n").unwrap();
        assert!(context.chars().count() <= CONTEXT_CHARS, "{}", context.len());
        assert!(
            context.ends_with("the last words") && context.starts_with("word"),
            "{context}"
        );
        // multi-byte text is cut on a character boundary
        let accents = "é".repeat(1000);
        assert_eq!(contextual_text("ok", Some(&accents)).chars().count(), 4 + CONTEXT_CHARS);
    }

    #[test]
    fn sessions_come_in_the_order_of_their_first_turn() {
        let found = ["S3:12", "S1:2", "S3:4", "lonely", "D1:4"];
        assert_eq!(sessions_in_order(&found), ["S3", "S1", "lonely", "D1"]);
        assert!(sessions_in_order::<&str>(&[]).is_empty());
    }
}
