//! Which stored memories a new one conflicts with, and why (issue 9).
//!
//! Cosine similarity alone cannot tell a fact's correction from a
//! compatible fact on the same subject: with all-MiniLM-L6-v2, "the standup
//! is at 9" and "the standup moved to 10" score about as close as "the
//! standup is at 9" and "the standup is in room 4". So `remember` asks,
//! for each of the nearest stored memories, for the reasons below; a
//! memory with at least one reason is reported as a conflict, with them.
//!
//! - `similar`: cosine at or above the conflict threshold (a near
//!   paraphrase: a duplicate in meaning, or a contradiction so close in
//!   wording that the model cannot tell).
//! - `correction`: the new text carries a correction cue ("moved",
//!   "changed", "no longer", "now", "update:", "actually", …), shares a
//!   subject word with the stored one, and their cosine is at least
//!   [`CUE_FLOOR`].
//! - `changed_value`: both texts state a value (a number, a time, a
//!   weekday or month), the values differ, and most of what the shorter
//!   one says besides its values is in the other (the same statement with
//!   another value); cosine at least [`VALUE_FLOOR`].
//! - `negation`: the same statement, negated in one of the two; cosine at
//!   least [`VALUE_FLOOR`].
//!
//! The rules work on words, so they are language-specific (English) and
//! deliberately simple; `tests/tests/conflicts.rs` measures them on a
//! labelled set of contradictions, paraphrases and compatible facts.

use std::collections::BTreeSet;

/// Lowest cosine at which a correction cue counts.
pub const CUE_FLOOR: f32 = 0.45;
/// Lowest cosine at which a changed value or a negation counts.
pub const VALUE_FLOOR: f32 = 0.5;
/// Share of the shorter text's subject words the other must contain for a
/// changed value or a negation.
pub const SAME_STATEMENT: f32 = 0.6;
/// Candidates below this cosine are never conflicts (the SQL side fetches
/// the nearest memories at or above min(threshold, CANDIDATE_FLOOR)).
pub const CANDIDATE_FLOOR: f32 = CUE_FLOOR;

const STOPWORDS: &[&str] = &[
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "being", "am", "to", "of", "in", "on", "at", "for",
    "with", "by", "from", "and", "or", "but", "it", "its", "this", "that", "these", "those", "as", "has", "have",
    "had", "do", "does", "did", "will", "would", "should", "can", "could", "i", "we", "you", "he", "she", "they", "my",
    "our", "your", "his", "her", "their", "me", "us", "them", "so", "then", "than", "there", "here", "also", "just",
    "into", "about", "over", "under", "up", "down", "out", "all", "any", "some", "every", "each", "what", "which",
    "who", "when", "where", "how", "why", "use", "uses", "used", "using",
];

/// Words and phrases by which a statement announces that it replaces an
/// earlier one.
const CUES: &[&str] = &[
    "moved",
    "changed",
    "no longer",
    "now",
    "update:",
    "updated",
    "correction",
    "actually",
    "instead",
    "switched",
    "renamed",
    "rescheduled",
    "postponed",
    "replaced",
    "anymore",
    "cancelled",
    "canceled",
    "from now on",
    "as of",
    "starting",
    "new",
    "wrong",
];

const NEGATIONS: &[&str] = &["not", "no", "never", "none", "nobody", "nothing", "cannot", "without"];

const WEEKDAYS_MONTHS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "noon",
    "midnight",
    "morning",
    "afternoon",
    "evening",
    "tonight",
    "tomorrow",
    "yesterday",
    "today",
];

const NUMBER_WORDS: &[&str] = &[
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "twenty", "thirty", "forty", "fifty", "hundred", "thousand", "million",
];

/// Why a stored memory conflicts with a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    Similar,
    Correction,
    ChangedValue,
    Negation,
}

impl Reason {
    pub const ALL: [Reason; 4] = [
        Reason::Similar,
        Reason::Correction,
        Reason::ChangedValue,
        Reason::Negation,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reason::Similar => "similar",
            Reason::Correction => "correction",
            Reason::ChangedValue => "changed_value",
            Reason::Negation => "negation",
        }
    }

    /// Reasons that mean the new memory replaces the stored one: stored
    /// anyway (force), it supersedes it.
    pub fn supersedes(self) -> bool {
        !matches!(self, Reason::Similar)
    }
}

/// The words of a text, lowercased, with surrounding punctuation and
/// possessives removed; internal `-`, `:` and `.` kept (ids, times).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '"' | '!' | '?' | '/'))
        .map(|w| {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
            let w = w
                .strip_suffix("'s")
                .or_else(|| w.strip_suffix("’s"))
                .map(str::to_string)
                .unwrap_or(w);
            w
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// "drinks" and "drink" are one subject word; short words stay as they are.
fn stem(w: &str) -> String {
    if w.len() > 4 && w.ends_with('s') && !w.ends_with("ss") {
        w[..w.len() - 1].to_string()
    } else {
        w.to_string()
    }
}

fn is_value(w: &str) -> bool {
    w.chars().any(|c| c.is_ascii_digit()) && !is_id(w)
        || WEEKDAYS_MONTHS.contains(&w)
        || NUMBER_WORDS.contains(&w)
        || w == "am"
        || w == "pm"
}

/// Ticket ids and the like: letters and digits joined by a dash
/// (OPS-99172, ERR-4521): they name a subject, they are not a value.
fn is_id(w: &str) -> bool {
    w.contains('-') && w.chars().any(|c| c.is_ascii_digit()) && w.chars().any(|c| c.is_alphabetic())
}

/// What a value measures: "at 9:00" and "in room 4" state different
/// things, so only values of one kind can contradict each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Time,
    Date,
    Number,
}

fn kind(w: &str) -> Kind {
    let digits_then = |suffix: &str| {
        w.strip_suffix(suffix)
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    if w.contains(':') || w == "am" || w == "pm" || digits_then("am") || digits_then("pm") {
        Kind::Time
    } else if WEEKDAYS_MONTHS.contains(&w) {
        Kind::Date
    } else {
        Kind::Number
    }
}

struct Parsed {
    subject: BTreeSet<String>,
    values: BTreeSet<(Kind, String)>,
    negated: bool,
    lower: String,
}

fn parse(text: &str) -> Parsed {
    let ws = words(text);
    let mut subject = BTreeSet::new();
    let mut values = BTreeSet::new();
    let mut negated = false;
    for w in &ws {
        if NEGATIONS.contains(&w.as_str()) || w.ends_with("n't") {
            negated = true;
        } else if is_value(w) {
            values.insert((kind(w), w.clone()));
        } else if !STOPWORDS.contains(&w.as_str()) && !CUES.contains(&w.as_str()) && w.len() >= 3 {
            subject.insert(stem(w));
        }
    }
    Parsed {
        subject,
        values,
        negated,
        lower: format!(" {} ", ws.join(" ")),
    }
}

fn has_cue(p: &Parsed, text: &str) -> bool {
    let lower = text.to_lowercase();
    CUES.iter().any(|c| {
        if c.ends_with(':') {
            lower.contains(c)
        } else {
            p.lower.contains(&format!(" {c} "))
        }
    })
}

/// The reasons `new_text` conflicts with `old_text`, given their cosine
/// similarity and the conflict threshold; empty when it does not.
pub fn reasons(new_text: &str, old_text: &str, cosine: f32, threshold: f32) -> Vec<Reason> {
    let mut out = Vec::new();
    if cosine >= threshold {
        out.push(Reason::Similar);
    }
    let (n, o) = (parse(new_text), parse(old_text));
    let shared = n.subject.intersection(&o.subject).count();
    let smaller = n.subject.len().min(o.subject.len()).max(1);
    let same_statement = shared as f32 / smaller as f32 >= SAME_STATEMENT;
    if cosine >= CUE_FLOOR && shared >= 1 && has_cue(&n, new_text) && !has_cue(&o, old_text) {
        out.push(Reason::Correction);
    }
    // Values of a kind both state, and that differ.
    let of = |p: &Parsed, k: Kind| -> BTreeSet<String> {
        p.values
            .iter()
            .filter(|(vk, _)| *vk == k)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let changed = [Kind::Time, Kind::Date, Kind::Number].into_iter().any(|k| {
        let (a, b) = (of(&n, k), of(&o, k));
        !a.is_empty() && !b.is_empty() && a != b
    });
    if cosine >= VALUE_FLOOR && same_statement && changed {
        out.push(Reason::ChangedValue);
    }
    if cosine >= VALUE_FLOOR && same_statement && n.negated != o.negated {
        out.push(Reason::Negation);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(new: &str, old: &str, cos: f32) -> Vec<&'static str> {
        reasons(new, old, cos, 0.85).into_iter().map(Reason::name).collect()
    }

    #[test]
    fn a_correction_cue_on_the_same_subject_is_a_conflict() {
        assert_eq!(
            names("The standup moved to 10:00", "The standup is at 9:00", 0.7),
            ["correction", "changed_value"]
        );
        assert_eq!(
            names("Correction: Alice drinks black coffee", "Alice drinks green tea", 0.6),
            ["correction"]
        );
        // the cue alone, on another subject, is not
        assert!(names("Bob now works remotely", "Alice drinks green tea", 0.5).is_empty());
        // nor below the floor
        assert!(names("The standup moved to 10:00", "The standup is at 9:00", 0.3).is_empty());
    }

    #[test]
    fn another_value_of_the_same_statement_is_a_conflict() {
        assert_eq!(
            names("The API listens on port 9090", "The API listens on port 8080", 0.8),
            ["changed_value"]
        );
        assert_eq!(
            names("The deploy window is Thursday", "The deploy window is Tuesday", 0.8),
            ["changed_value"]
        );
        // different statements about one subject, each with its own value
        assert!(names("Server A has 8 cores", "Server A has 16 GB of RAM and two disks", 0.7).is_empty());
        // a time and a room number are different kinds of value
        assert!(names("The daily standup is in room 4", "The daily standup is at 9:00", 0.65).is_empty());
        assert_eq!(
            names("Dinner is on Saturday at 8pm", "Dinner is on Friday at 7pm", 0.8),
            ["changed_value"]
        );
    }

    #[test]
    fn negation_and_similarity() {
        assert_eq!(
            names("Alice does not drink coffee", "Alice drinks coffee", 0.8),
            ["negation"]
        );
        assert_eq!(
            names(
                "Alice drinks green tea every morning",
                "Every morning Alice has green tea",
                0.93
            ),
            ["similar"]
        );
        // ticket ids name a subject, they are not values
        assert!(names("OPS-99172 is assigned to Maria", "OPS-99172 blocks the release", 0.6).is_empty());
    }

    #[test]
    fn words_are_normalised() {
        assert_eq!(words("Alice's (new) role: lead!"), ["alice", "new", "role", "lead"]);
        assert_eq!(stem("drinks"), "drink");
        assert_eq!(stem("class"), "class");
        assert!(is_value("10:30") && is_value("tuesday") && !is_value("ops-99172") && is_id("ops-99172"));
    }
}
