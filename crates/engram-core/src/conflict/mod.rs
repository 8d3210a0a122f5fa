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
//!   A text that only adds detail to the stored one ("auth-service runs
//!   on AWS" -> "... in AWS us-east-1") is not a duplicate.
//! - `correction`: the new text says outright that it replaces something
//!   ("no longer", "actually", "instead", "these days", …), or uses a verb
//!   of change ("moved", "switched", "pushed back", "took over") while the
//!   two state different values of one kind; it shares a subject word
//!   with the stored one, and their cosine is at least [`CUE_FLOOR`].
//! - `changed_value`: both texts state a value of one kind (a time, a
//!   date, an amount, a count of one unit, a state such as "enabled" or
//!   "vegetarian", a name such as the place someone lives in), the values
//!   differ, and either most of what the shorter one says besides its
//!   values is in the other (the same statement with another value) or
//!   an update word says so; or two statements name different holders of
//!   one role ("Maria leads the payments team" / "Tom leads …"). Cosine at
//!   least [`VALUE_FLOOR`] ([`CUE_FLOOR`] with an update word).
//! - `negation`: the same statement, negated in one of the two; cosine at
//!   least [`VALUE_FLOOR`].
//!
//! What makes two facts compatible whatever their words: different ids
//! (OPS-1432 and OPS-1433), different environments (prod and staging), a
//! fact told as past ("used to", "until 2023"), an addition ("also",
//! "another", "a second"), an approximate number ("about $30" and "$29").
//!
//! The rules work on words ([`lexicon`]), so they are language-specific
//! (English) and deliberately simple; `tests/tests/conflicts.rs` measures
//! them on a development set and on pairs written by someone who never
//! saw them.

mod lexicon;
mod statement;

use lexicon::{holds, CHANGE_VERBS, EXPLICIT_CUES, WEAK_CUES};
use statement::{changed_values, Kind, Statement};
use std::collections::BTreeSet;

/// Lowest cosine at which a correction cue counts.
pub const CUE_FLOOR: f32 = 0.45;
/// Lowest cosine at which a changed value or a negation counts.
pub const VALUE_FLOOR: f32 = 0.5;
/// Share of the shorter text's subject words the other must contain for a
/// changed value or a negation.
pub const SAME_STATEMENT: f32 = 0.6;

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

/// The strongest correction cue in a text.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cue {
    None,
    /// "now", "new", "started": a replacement with two shared subject words.
    Weak,
    /// A verb of change: a replacement when a value changed.
    Verb,
    /// "no longer", "actually": a replacement.
    Explicit,
}

fn cue(s: &Statement, shared: &BTreeSet<&String>) -> Cue {
    let new_shared = s
        .words
        .windows(2)
        .any(|w| w[0] == "new" && shared.contains(&statement::stem(&w[1])));
    let weak = WEAK_CUES.iter().filter(|c| **c != "new").any(|c| holds(&s.lower, &[c]));
    if s.addition {
        Cue::None
    } else if holds(&s.lower, EXPLICIT_CUES) {
        Cue::Explicit
    } else if holds(&s.lower, CHANGE_VERBS) || new_shared {
        Cue::Verb
    } else if weak {
        Cue::Weak
    } else {
        Cue::None
    }
}

/// Whether the two texts name one entity (by its case- and accent-folded key).
fn shares_entity(n: &Statement, o: &Statement) -> bool {
    !n.entities.is_disjoint(&o.entities)
}

/// Whether the two are about different things whatever their words:
/// different ids, different environments, someone's relation and not
/// them ("Raj prefers tea" / "Raj's wife prefers coffee").
fn different_instances(n: &Statement, o: &Statement) -> bool {
    let disjoint = |a: &BTreeSet<String>, b: &BTreeSet<String>| !a.is_empty() && !b.is_empty() && a.is_disjoint(b);
    disjoint(&n.ids, &o.ids) || disjoint(&n.environments, &o.environments) || n.relation != o.relation
}

/// Whether `n` only adds detail to `o`: every value of `o` agrees with one
/// of `n`'s, and `n` states one that `o` does not ("AWS" -> "AWS
/// us-east-1", "in June" -> "on June 2").
fn elaborates(n: &Statement, o: &Statement) -> bool {
    let agrees = |v: &statement::Value, w: &statement::Value| {
        v.kind == w.kind
            && v.group == w.group
            && if v.kind == Kind::Date {
                statement::dates_agree(&v.value, &w.value)
            } else {
                v.value == w.value
            }
    };
    // (a name the other text also gives, as its subject, is no detail)
    let given_by_other = |w: &statement::Value| w.kind == Kind::Named && o.entities.contains(&w.value);
    let added = |w: &statement::Value| !o.values.contains(w) && !given_by_other(w);
    o.values.iter().all(|v| n.values.iter().any(|w| agrees(v, w))) && n.values.iter().any(added)
}

/// The reasons `new_text` conflicts with `old_text`, given their cosine
/// similarity and the conflict threshold; empty when it does not.
pub fn reasons(new_text: &str, old_text: &str, cosine: f32, threshold: f32) -> Vec<Reason> {
    reasons_of(
        &Statement::parse(new_text),
        &Statement::parse(old_text),
        cosine,
        threshold,
    )
}

fn reasons_of(n: &Statement, o: &Statement, cosine: f32, threshold: f32) -> Vec<Reason> {
    let mut out = Vec::new();
    if different_instances(n, o) {
        return out;
    }
    if cosine >= threshold && !elaborates(n, o) && !n.addition {
        out.push(Reason::Similar);
    }
    // A fact told as past, added to another, or said again, replaces nothing.
    if n.history || o.history || n.addition || restates(n, o) {
        return out;
    }
    let shared_words: BTreeSet<&String> = n.subject.intersection(&o.subject).collect();
    // A named thing both texts are about (a person, a project, a ticket:
    // crate::entities) says more about their subject than a common noun:
    // it counts as one more shared subject word.
    let shared = shared_words.len() + usize::from(shares_entity(n, o));
    let smaller = n.subject.len().min(o.subject.len()).max(1);
    // The same statement: two subject words or more in common, and most of
    // the shorter text's.
    let same_statement = shared >= 2 && shared as f32 / smaller as f32 >= SAME_STATEMENT;
    let changed = changed_values(n, o);
    let cue = cue(n, &shared_words);
    // another holder: "Sofia owns the redesign" / "the redesign was
    // reassigned to Dev"
    let other_holder = !n.holders.is_empty() && !o.holders.is_empty() && n.holders.is_disjoint(&o.holders);
    let corrected = match cue {
        Cue::Explicit => shared >= 1,
        Cue::Verb => shared >= 1 && (changed.is_some() || n.negated != o.negated || other_holder),
        Cue::Weak => shared >= 2,
        Cue::None => false,
    };
    if cosine >= CUE_FLOOR && corrected {
        out.push(Reason::Correction);
    }
    // An update word and another value: a state (the writer's diet, a
    // ticket's status) needs one shared subject word, any other value two
    // ("the Q3 report is due on August 15th" / "the Q3 report deadline
    // was pushed back to September 1st").
    let updated = cue != Cue::None
        && changed.is_some_and(|k| shared >= 2 || (k == Kind::State && shared >= 1))
        && cosine >= CUE_FLOOR;
    // another object of one exclusive preference: "Vera prefers sencha
    // green tea" / "Vera prefers gyokuro"
    let preference_changed = match (&n.preferred, &o.preferred) {
        (Some(a), Some(b)) => !a.is_empty() && !b.is_empty() && a.is_disjoint(b) && shared >= 2,
        _ => false,
    };
    if (cosine >= VALUE_FLOOR && same_statement && changed.is_some())
        || (cosine >= VALUE_FLOOR && preference_changed)
        || updated
        || (cosine >= VALUE_FLOOR && n.role && o.role && owners_differ(n, o))
    {
        out.push(Reason::ChangedValue);
    }
    if cosine >= VALUE_FLOOR && same_statement && n.negated != o.negated {
        out.push(Reason::Negation);
    }
    out
}

/// Whether `new_text` reads as an update of `old_text`'s subject: an
/// update word of any strength (not an addition), a subject word or name
/// in common, and a cosine of at least [`CUE_FLOOR`]. Too weak to report
/// a conflict ("started" and "now" are in plain statements too), enough
/// to read the newer of two facts found together first.
pub fn announces_update(new_text: &str, old_text: &str, cosine: f32) -> bool {
    announces_update_of(&Statement::parse(new_text), &Statement::parse(old_text), cosine)
}

fn announces_update_of(n: &Statement, o: &Statement, cosine: f32) -> bool {
    if cosine < CUE_FLOOR {
        return false;
    }
    if different_instances(n, o) || n.history || n.addition || restates(n, o) {
        return false;
    }
    let shared: BTreeSet<&String> = n.subject.intersection(&o.subject).collect();
    cue(n, &shared) != Cue::None && (!shared.is_empty() || !n.holders.is_disjoint(&o.holders))
}

/// Whether `n` says nothing `o` does not: its subject words and values are
/// all in `o` ("I live in Lisbon now" after "I live in Lisbon").
fn restates(n: &Statement, o: &Statement) -> bool {
    n.subject.is_subset(&o.subject) && n.values.is_subset(&o.values) && n.negated == o.negated
}

/// Two statements of who holds one role: different names, and every other
/// subject word of the shorter one in the other ("Maria leads the payments
/// team" / "Tom leads the payments team"; "The release captain for v3.2
/// is Aisha").
fn owners_differ(n: &Statement, o: &Statement) -> bool {
    if n.holders.is_empty() || o.holders.is_empty() || !n.holders.is_disjoint(&o.holders) {
        return false;
    }
    let rest = |s: &Statement| -> BTreeSet<String> {
        let names: BTreeSet<&str> = s.holders.iter().flat_map(|h| h.split(' ')).collect();
        s.subject
            .iter()
            .filter(|w| !names.contains(w.as_str()))
            .cloned()
            .collect()
    };
    let (x, y) = (rest(n), rest(o));
    let (small, large) = if x.len() <= y.len() { (&x, &y) } else { (&y, &x) };
    small.len() >= 2 && small.is_subset(large)
}

/// For each of a search's facts, the newer one that contradicts it, if
/// any: `texts[j]` with `times[j] > times[i]` (when each holds from) whose
/// rules against `texts[i]` give a reason that supersedes (correction,
/// changed value, negation), or that announces an update of its subject
/// ([`announces_update`]: an ordering, not a conflict). `cosines` is the row-major matrix of the
/// facts' pairwise cosine similarities. Search ranks a fact right after
/// the newer one that contradicts it, so that the current value is read
/// first when both are returned.
pub fn contradicted_by(texts: &[&str], times: &[f64], cosines: &[f32], threshold: f32) -> Vec<Option<usize>> {
    let n = texts.len();
    assert!(
        times.len() == n && cosines.len() == n * n,
        "one time per text, one cosine per pair"
    );
    // each text read once
    let parsed: Vec<Statement> = texts.iter().map(|t| Statement::parse(t)).collect();
    (0..n)
        .map(|i| {
            (0..n)
                .filter(|&j| times[j] > times[i] && cosines[j * n + i] >= CUE_FLOOR)
                .filter(|&j| {
                    let cosine = cosines[j * n + i];
                    announces_update_of(&parsed[j], &parsed[i], cosine)
                        || reasons_of(&parsed[j], &parsed[i], cosine, threshold)
                            .into_iter()
                            .any(Reason::supersedes)
                })
                .max_by(|&a, &b| times[a].total_cmp(&times[b]))
        })
        .collect()
}

/// The row-major matrix of pairwise cosine similarities that
/// [`contradicted_by`] reads, computed as pgvector's `1 - (a <=> b)` is:
/// sums in `f32`, the quotient in `f64`, clamped to [-1, 1]; 0 where
/// either vector is empty (a memory without an embedding), NaN where one
/// is the zero vector (pgvector's cosine distance is NaN there too).
pub fn pairwise_cosines(vectors: &[&[f32]]) -> Vec<f32> {
    let n = vectors.len();
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = cosine(vectors[i], vectors[j]);
        }
    }
    out
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.is_empty() || b.is_empty() || a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    let similarity = f64::from(dot) / (f64::from(na) * f64::from(nb)).sqrt();
    if similarity.is_nan() {
        return f32::NAN;
    }
    // (1 - distance, as the SQL reads it)
    (1.0 - (1.0 - similarity.clamp(-1.0, 1.0))) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairwise_cosines_are_pgvectors() {
        let a: &[f32] = &[1.0, 0.0];
        let b: &[f32] = &[1.0, 1.0];
        let c: &[f32] = &[-2.0, 0.0];
        let m = pairwise_cosines(&[a, b, c, &[]]);
        assert_eq!(m.len(), 16);
        assert!((m[0] - 1.0).abs() < 1e-6);
        assert!((m[1] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(m[1], m[4], "symmetric");
        assert!((m[2] + 1.0).abs() < 1e-6, "opposite");
        // no embedding: 0 against everything, itself included
        assert!(m[3] == 0.0 && m[12] == 0.0 && m[15] == 0.0);
        // the zero vector has no direction
        assert!(pairwise_cosines(&[&[0.0, 0.0], a])[1].is_nan());
    }

    fn names(new: &str, old: &str, cos: f32) -> Vec<&'static str> {
        reasons(new, old, cos, 0.85).into_iter().map(Reason::name).collect()
    }

    /// Whether the rules give `reason` (among others).
    fn flags(new: &str, old: &str, cos: f32, reason: &str) -> bool {
        names(new, old, cos).contains(&reason)
    }

    #[test]
    fn a_correction_cue_on_the_same_subject_is_a_conflict() {
        assert!(flags(
            "The standup moved to 10:00",
            "The standup is at 9:00",
            0.7,
            "correction"
        ));
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
        assert!(flags(
            "The new office is in Paris",
            "The office is in Lyon",
            0.64,
            "correction"
        ));
        assert!(names("Alice drinks coffee without sugar", "Alice drinks coffee", 0.8).is_empty());
        assert!(names(
            "Erin is moving to the lighthouse keeper's cottage in June",
            "Erin works on the lighthouse project",
            0.7
        )
        .is_empty());
        // a correction of a correction is one too
        assert!(flags(
            "Actually the office moved to Berlin",
            "The new office is in Paris",
            0.6,
            "correction"
        ));
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
    fn a_moved_date_with_an_update_word_is_a_conflict() {
        assert!(flags(
            "The Q3 report deadline was pushed back to September 1st",
            "The Q3 report is due on August 15th",
            0.6,
            "changed_value"
        ));
        // the same date, written two ways, is no change
        assert!(names(
            "The Q3 report is due on 15 August",
            "The Q3 report is due on August 15th",
            0.8
        )
        .is_empty());
        // a date of another thing of the same subject, added with "also"
        assert!(names(
            "The Q3 report also needs a review on September 1st",
            "The Q3 report is due on August 15th",
            0.6
        )
        .is_empty());
    }

    #[test]
    fn states_places_and_owners_are_values() {
        assert!(flags(
            "The dark-mode flag is disabled",
            "The dark-mode flag is enabled",
            0.9,
            "changed_value"
        ));
        assert!(flags(
            "I started eating fish again, so pescatarian is fine now",
            "I'm vegetarian",
            0.5,
            "changed_value"
        ));
        assert!(flags(
            "Tom leads the payments team",
            "Maria leads the payments team",
            0.8,
            "changed_value"
        ));
        // another team, or another person with the same trait, is no change
        assert!(names("Tom leads the search team", "Maria leads the payments team", 0.7).is_empty());
        assert!(names("Ben is vegetarian", "Ana is vegetarian", 0.8).is_empty());
        assert!(flags(
            "Nadia moved to Porto",
            "Nadia lives in Lisbon",
            0.6,
            "correction"
        ));
    }

    #[test]
    fn the_newer_of_two_contradicting_facts_is_named() {
        let texts = [
            "The Q3 report is due on August 15th",
            "The office plants need water",
            "The Q3 report deadline was pushed back to September 1st",
        ];
        let cosines = [1.0, 0.1, 0.7, 0.1, 1.0, 0.1, 0.7, 0.1, 1.0];
        assert_eq!(
            contradicted_by(&texts, &[1.0, 2.0, 3.0], &cosines, 0.85),
            [Some(2), None, None]
        );
        // written in the other order, the deadline of August is the news
        assert_eq!(
            contradicted_by(&texts, &[3.0, 2.0, 1.0], &cosines, 0.85),
            [None, None, Some(0)]
        );
    }

    #[test]
    fn an_update_word_orders_without_reporting_a_conflict() {
        let (new, old) = ("I'm back at work full-time as of Monday", "I'm on parental leave");
        assert!(announces_update(new, old, 0.5));
        assert!(!announces_update("Ken also likes blues now", "Ken likes jazz", 0.7));
        assert!(!announces_update(new, old, 0.3));
    }

    #[test]
    fn another_object_of_an_exclusive_preference_is_another_value() {
        assert!(flags(
            "Vera prefers gyokuro",
            "Vera prefers sencha green tea",
            0.7,
            "changed_value"
        ));
        assert!(names("Vera likes gyokuro", "Vera likes sencha green tea", 0.7).is_empty());
        // (another preference of hers: a value change needs VALUE_FLOOR)
        assert!(names("Vera's favourite tea is sencha", "Vera prefers the dark theme", 0.49).is_empty());
        assert!(names("Tom prefers gyokuro", "Vera prefers sencha green tea", 0.6).is_empty());
        assert!(names(
            "Raj's wife prefers coffee in the morning",
            "Raj prefers tea in the morning",
            0.8
        )
        .is_empty());
    }

    #[test]
    fn a_restatement_is_no_correction_and_a_relation_elsewhere_changes_nothing() {
        assert!(names("I live in Lisbon now", "I live in Lisbon", 0.8).is_empty());
        assert!(flags(
            "Actually I live in Porto now, next to my sister",
            "I live in Lisbon",
            0.7,
            "correction"
        ));
        assert!(flags(
            "The standup with my boss moved to 10:00",
            "The standup is at 9:00",
            0.7,
            "correction"
        ));
    }

    #[test]
    fn a_long_text_is_read_from_its_start_only() {
        let numbers: String = (0..60_000).map(|n| format!("{n} ")).collect();
        let s = Statement::parse(&numbers);
        assert!(s.values.len() <= statement::MAX_VALUES);
        assert!(s.words.len() < statement::MAX_STATEMENT_BYTES);
        let accents = "é".repeat(5000);
        assert!(Statement::parse(&accents).words.len() <= 1);
        let texts = [numbers.as_str(); 20];
        let cosines = [0.9f32; 400];
        let times: Vec<f64> = (0..20).map(f64::from).collect();
        assert_eq!(contradicted_by(&texts, &times, &cosines, 0.85).len(), 20);
    }

    #[test]
    fn what_scopes_a_fact_keeps_it_apart() {
        // other ids, other environments
        assert!(names("Ticket OPS-1433 is closed", "Ticket OPS-1432 is open", 0.9).is_empty());
        assert!(names(
            "billing-api runs 1 replica in staging",
            "billing-api runs 4 replicas in prod",
            0.8
        )
        .is_empty());
        // the past, an addition, an approximation, another attribute
        assert!(names("I live in Bordeaux", "I used to live in Lyon", 0.7).is_empty());
        assert!(names("Ken also likes blues", "Ken likes jazz", 0.8).is_empty());
        assert!(names(
            "The Pro plan is $29 per month",
            "The Pro plan costs about $30 a month",
            0.8
        )
        .is_empty());
        assert!(names(
            "The Pro plan includes 10 seats",
            "The Pro plan costs $29 per month",
            0.7
        )
        .is_empty());
        assert!(names(
            "My rent is due on the 1st of each month",
            "My rent is 1,450 euros a month",
            0.7
        )
        .is_empty());
        // a verb of change in another sense
        assert!(names(
            "I moved the couch into the bedroom of my Lyon flat",
            "I live in Lyon",
            0.6
        )
        .is_empty());
        assert!(names(
            "Raj switched tea brands to a loose-leaf Assam",
            "Raj drinks tea in the morning",
            0.6
        )
        .is_empty());
        // added detail is no duplicate; a refined date no change
        assert!(names("auth-service runs in AWS us-east-1", "auth-service runs on AWS", 0.9).is_empty());
        assert!(names(
            "The mobile app launches on June 2",
            "The mobile app launches in June",
            0.9
        )
        .is_empty());
    }
}
