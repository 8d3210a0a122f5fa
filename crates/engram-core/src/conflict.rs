//! Which stored memories a new one conflicts with, and why.
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

const STOPWORDS: &[&str] = &[
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "being", "am", "to", "of", "in", "on", "at", "for",
    "with", "by", "from", "and", "or", "but", "it", "its", "this", "that", "these", "those", "as", "has", "have",
    "had", "do", "does", "did", "will", "would", "should", "can", "could", "i", "we", "you", "he", "she", "they", "my",
    "our", "your", "his", "her", "their", "me", "us", "them", "so", "then", "than", "there", "here", "also", "just",
    "into", "about", "over", "under", "up", "down", "out", "all", "any", "some", "every", "each", "what", "which",
    "who", "when", "where", "how", "why", "use", "uses", "used", "using",
];

/// Words by which a statement announces that it replaces an earlier one,
/// with their inflections: one shared subject word is enough. Not the -ing
/// forms: "Erin is moving to the cottage" tells a plan, not a corrected
/// fact.
const STRONG_CUES: &[&str] = &[
    "move",
    "moved",
    "moves",
    "change",
    "changed",
    "changes",
    "rename",
    "renamed",
    "reschedule",
    "rescheduled",
    "postpone",
    "postponed",
    "replace",
    "replaced",
    "replaces",
    "switch",
    "switched",
    "switches",
    "reassign",
    "reassigned",
    "upgrade",
    "upgraded",
    "downgrade",
    "downgraded",
    "migrate",
    "migrated",
    "cancel",
    "cancelled",
    "canceled",
    "correction",
    "corrected",
    "update",
    "updated",
    "actually",
    "instead",
    "anymore",
    "wrong",
];

/// Phrases that announce a replacement.
const CUE_PHRASES: &[&str] = &["no longer", "from now on", "as of"];

/// Words that often announce a replacement but also appear in plain
/// statements: they need two shared subject words, and "new" counts only
/// before one of them ("the new office", not "two new engineers").
const WEAK_CUES: &[&str] = &["now", "new", "starting"];

const NEGATIONS: &[&str] = &["not", "no", "never", "none", "nobody", "nothing", "cannot"];

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
    w.chars().any(|c| c.is_ascii_digit()) && !is_id(w) || WEEKDAYS_MONTHS.contains(&w) || NUMBER_WORDS.contains(&w)
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
    if w.contains(':') || digits_then("am") || digits_then("pm") {
        Kind::Time
    } else if WEEKDAYS_MONTHS.contains(&w) {
        Kind::Date
    } else {
        Kind::Number
    }
}

/// One spelling per value: "9am", "9:00" and "09:00am" are 9:00, "9pm" is
/// 21:00, "nine" is 9.
fn normalise(w: &str) -> String {
    if let Some(i) = NUMBER_WORDS.iter().position(|n| *n == w) {
        return match i {
            0..=12 => i.to_string(),
            13 => "20".into(),
            14 => "30".into(),
            15 => "40".into(),
            16 => "50".into(),
            17 => "100".into(),
            18 => "1000".into(),
            _ => "1000000".into(),
        };
    }
    let (body, pm) = match (w.strip_suffix("pm"), w.strip_suffix("am")) {
        (Some(b), _) => (b, true),
        (None, Some(b)) => (b, false),
        _ => (w, false),
    };
    if kind(w) != Kind::Time {
        return w.to_string();
    }
    let mut parts = body.splitn(2, ':');
    let hour: u32 = match parts.next().and_then(|h| h.parse().ok()) {
        Some(h) => h,
        None => return w.to_string(),
    };
    let minutes = parts.next().unwrap_or("00");
    let hour = if pm && hour < 12 { hour + 12 } else { hour };
    format!("{hour}:{minutes}")
}

struct Parsed {
    words: Vec<String>,
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
            values.insert((kind(w), normalise(w)));
        } else if !STOPWORDS.contains(&w.as_str())
            && !STRONG_CUES.contains(&w.as_str())
            && !WEAK_CUES.contains(&w.as_str())
            && w.len() >= 3
        {
            subject.insert(stem(w));
        }
    }
    Parsed {
        words: ws.clone(),
        subject,
        values,
        negated,
        lower: format!(" {} ", ws.join(" ")),
    }
}

/// The strongest correction cue in a text.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Cue {
    None,
    Weak,
    Strong,
}

fn cue(p: &Parsed, shared: &BTreeSet<&String>) -> Cue {
    let has = |list: &[&str]| list.iter().any(|c| p.lower.contains(&format!(" {c} ")));
    let new_shared = p
        .words
        .windows(2)
        .any(|w| w[0] == "new" && shared.contains(&stem(&w[1])));
    let weak = WEAK_CUES
        .iter()
        .filter(|c| **c != "new")
        .any(|c| p.lower.contains(&format!(" {c} ")));
    if has(STRONG_CUES) || has(CUE_PHRASES) || new_shared {
        Cue::Strong
    } else if weak {
        Cue::Weak
    } else {
        Cue::None
    }
}

/// Whether the two texts name one entity (by its case- and accent-folded key).
fn shares_entity(a: &str, b: &str) -> bool {
    let theirs = crate::entities::extract(b);
    crate::entities::extract(a)
        .iter()
        .any(|e| theirs.iter().any(|t| t.key == e.key))
}

/// The reasons `new_text` conflicts with `old_text`, given their cosine
/// similarity and the conflict threshold; empty when it does not.
pub fn reasons(new_text: &str, old_text: &str, cosine: f32, threshold: f32) -> Vec<Reason> {
    let mut out = Vec::new();
    if cosine >= threshold {
        out.push(Reason::Similar);
    }
    let (n, o) = (parse(new_text), parse(old_text));
    let shared_words: BTreeSet<&String> = n.subject.intersection(&o.subject).collect();
    // A named thing both texts are about (a person, a project, a ticket:
    // crate::entities) says more about their subject than a common noun:
    // it counts as one more shared subject word.
    let shared = shared_words.len() + usize::from(shares_entity(new_text, old_text));
    let smaller = n.subject.len().min(o.subject.len()).max(1);
    // The same statement: two subject words or more in common, and most of
    // the shorter text's.
    let same_statement = shared >= 2 && shared as f32 / smaller as f32 >= SAME_STATEMENT;
    let needed = match cue(&n, &shared_words) {
        Cue::Strong => 1,
        Cue::Weak => 2,
        Cue::None => usize::MAX,
    };
    if cosine >= CUE_FLOOR && shared >= needed {
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
    // A value changed when each side states one of a kind that the other
    // lacks: added detail ("Friday" -> "Friday evening") is not a change.
    let changed = [Kind::Time, Kind::Date, Kind::Number].into_iter().any(|k| {
        let (a, b) = (of(&n, k), of(&o, k));
        !a.is_subset(&b) && !b.is_subset(&a)
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
            ["correction"]
        );
        assert_eq!(
            names("Correction: Alice drinks black coffee", "Alice drinks green tea", 0.6),
            ["correction"]
        );
        // weak cues need the same statement; "new" only before a shared word
        assert!(names(
            "Maria hired two new engineers for the payments team",
            "Maria leads the payments team",
            0.6
        )
        .is_empty());
        assert_eq!(
            names("The new office is in Paris", "The office is in Lyon", 0.64),
            ["correction"]
        );
        assert!(names("Alice drinks coffee without sugar", "Alice drinks coffee", 0.8).is_empty());
        assert!(names(
            "Erin is moving to the lighthouse keeper's cottage in June",
            "Erin works on the lighthouse project",
            0.7
        )
        .is_empty());
        // a correction of a correction is one too
        assert_eq!(
            names("Actually the office moved to Berlin", "The new office is in Paris", 0.6),
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
            names(
                "Dinner with the client is on Saturday at 8pm",
                "Dinner with the client is on Friday at 7pm",
                0.8
            ),
            ["changed_value"]
        );
        // one time, spelled two ways; added detail; "am" as a verb
        assert!(names("The daily standup is at 9am", "The daily standup is at 9:00", 0.8).is_empty());
        assert!(names(
            "Dinner with the client is on Friday evening",
            "Dinner with the client is on Friday",
            0.8
        )
        .is_empty());
        assert!(names(
            "The billing API listens on port 8080 with 4 workers",
            "The billing API listens on port 8080",
            0.8
        )
        .is_empty());
        assert!(names(
            "I am running the daily standup at 9am",
            "The daily standup is at 9am",
            0.8
        )
        .is_empty());
        assert_eq!(normalise("9pm"), "21:00");
        assert_eq!(normalise("nine"), "9");
    }

    #[test]
    fn a_shared_entity_strengthens_the_subject() {
        // one shared word and a weak cue: not enough on its own...
        assert!(names("the office now opens at noon", "the office plan is ready", 0.6).is_empty());
        // ...but a shared person is the same subject
        assert_eq!(
            names("Vera now drinks sencha", "Vera's favourite tea is gyokuro", 0.6),
            vec!["correction"]
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
