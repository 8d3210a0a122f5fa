//! A text read as a statement: the words it is about, the values it states
//! (times, dates, amounts, counts, states, names), and the marks that
//! scope it (an environment, the past, an addition, an approximation).

use super::lexicon::*;
use std::collections::BTreeSet;

/// What a value measures: "at 9:00" and "in room 4" state different
/// things, so only values of one kind (and, for numbers, one unit) can
/// contradict each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Time,
    /// A weekday, a time of day, a month, a day of a month.
    Date,
    /// A count or size, grouped by its unit ("10 seats", "port 8080").
    Number,
    Money,
    /// A status word ("enabled", "remote", "vegetarian").
    State,
    /// A named person, place, organisation, product or service that is
    /// not the statement's subject ("led by Tom", "moved to Porto").
    Named,
}

/// A value: its kind, its group (a number's unit; empty otherwise) and its
/// normalised spelling.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Value {
    pub kind: Kind,
    pub group: String,
    pub value: String,
}

pub struct Statement {
    pub words: Vec<String>,
    /// The words, lower case, space-separated, a space at each end.
    pub lower: String,
    pub subject: BTreeSet<String>,
    pub values: BTreeSet<Value>,
    /// The names it gives (its opener and its named values): who or what
    /// holds what it tells.
    pub holders: BTreeSet<String>,
    /// Ticket keys and other ids it names.
    pub ids: BTreeSet<String>,
    pub environments: BTreeSet<String>,
    /// The keys of the named things it names (crate::entities).
    pub entities: BTreeSet<String>,
    /// The relation whose fact it tells, when it opens with one ("Raj's
    /// wife prefers", "my sister lives"): not the fact of the person named.
    pub relation: Option<String>,
    pub role: bool,
    /// The subject words after an exclusive preference ("prefers sencha
    /// green tea": sencha, green, tea).
    pub preferred: Option<BTreeSet<String>>,
    pub negated: bool,
    pub addition: bool,
    pub history: bool,
    pub approximate: bool,
}

/// Bytes of a text the rules read.
pub const MAX_STATEMENT_BYTES: usize = 2048;
/// Values kept per text (those that sort first): comparing two texts'
/// values is quadratic in their number.
pub const MAX_VALUES: usize = 32;

/// The subject word standing for the writer of a first-person text.
pub const WRITER: &str = "@writer";

/// The words of a text, lowercased, with surrounding punctuation and
/// possessives removed; internal `-`, `:` and `.` kept (ids, times). A
/// currency sign stays on its amount ("$29").
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '"' | '!' | '?' | '/'))
        .map(|w| {
            let sign = w.starts_with(['$', '€', '£', '¥']);
            let w = w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
            let w = w
                .strip_suffix("'s")
                .or_else(|| w.strip_suffix("’s"))
                .map(str::to_string)
                .unwrap_or(w);
            if sign && !w.is_empty() {
                format!("${w}")
            } else {
                w
            }
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// "drinks" and "drink" are one subject word, and so are synonyms
/// ("deadline" and "due"); short words stay as they are.
pub fn stem(w: &str) -> String {
    let w = if w.len() > 4 && w.ends_with('s') && !w.ends_with("ss") {
        &w[..w.len() - 1]
    } else {
        w
    };
    SYNONYMS
        .iter()
        .find(|(s, _)| *s == w)
        .map_or_else(|| w.to_string(), |(_, to)| to.to_string())
}

/// Ticket ids and the like: letters and digits joined by a dash
/// (OPS-99172, ERR-4521): they name a subject, they are not a value.
pub fn is_id(w: &str) -> bool {
    w.contains('-') && w.chars().any(|c| c.is_ascii_digit()) && w.chars().any(|c| c.is_alphabetic())
}

fn month(w: &str) -> Option<u32> {
    MONTHS.iter().find(|(m, _)| *m == w).map(|(_, n)| *n)
}

/// A day of the month: "15", "15th", "1st", "22nd", "3rd".
fn day(w: &str) -> Option<u32> {
    let digits = ordinal_digits(w).unwrap_or(w);
    let d: u32 = digits.parse().ok()?;
    (1..=31).contains(&d).then_some(d)
}

/// "15th" -> "15"; None for a word that is not an ordinal.
fn ordinal_digits(w: &str) -> Option<&str> {
    ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|s| w.strip_suffix(s))
        .filter(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
}

fn is_time(w: &str) -> bool {
    let digits_then = |suffix: &str| {
        w.strip_suffix(suffix)
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    (w.contains(':') && w.chars().next().is_some_and(|c| c.is_ascii_digit())) || digits_then("am") || digits_then("pm")
}

fn am_or_pm(w: &str) -> bool {
    w.ends_with("am") || w.ends_with("pm")
}

/// One spelling per time: "9am", "9:00" and "09:00am" are 9:00, "9pm" is
/// 21:00, "12am" 0:00.
pub fn normalise_time(w: &str) -> String {
    let (body, pm) = match (w.strip_suffix("pm"), w.strip_suffix("am")) {
        (Some(b), _) => (b, true),
        (None, Some(b)) => (b, false),
        _ => (w, false),
    };
    let mut parts = body.splitn(2, ':');
    let Some(hour) = parts.next().and_then(|h| h.parse::<u32>().ok()) else {
        return w.to_string();
    };
    let minutes = parts.next().unwrap_or("00");
    let hour = match (pm, am_or_pm(w)) {
        (true, _) if hour < 12 => hour + 12,
        (false, true) if hour == 12 => 0,
        _ => hour,
    };
    format!("{hour}:{minutes}")
}

/// "nine" -> "9", "twenty" -> "20"; digits as written, separators dropped
/// ("1,450" -> "1450").
pub fn normalise_number(w: &str) -> String {
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
    w.replace(',', "")
}

fn is_number(w: &str) -> bool {
    (w.chars().any(|c| c.is_ascii_digit()) && !is_id(w)) || NUMBER_WORDS.contains(&w)
}

/// Whether two dates can be one day: "June" and "June 2" can, "the 1st"
/// and "March 1" can, "June 2" and "June 3" cannot.
pub fn dates_agree(a: &str, b: &str) -> bool {
    let parts = |d: &str| -> (Option<String>, Option<String>) {
        match d.split_once('-') {
            Some((m, day)) => ((m != "*").then(|| m.to_string()), Some(day.to_string())),
            None => (Some(d.to_string()), None),
        }
    };
    let ((ma, da), (mb, db)) = (parts(a), parts(b));
    let agree = |x: Option<String>, y: Option<String>| x.is_none() || y.is_none() || x == y;
    agree(ma, mb) && agree(da, db)
}

impl Statement {
    /// Reads the first [`MAX_STATEMENT_BYTES`] of `text`: what a fact says
    /// is at its start, and the rules then cost the same for a sentence and
    /// for a 256 KiB memory.
    pub fn parse(text: &str) -> Statement {
        let mut cut = text.len().min(MAX_STATEMENT_BYTES);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let text = &text[..cut];
        let ws = words(text);
        let lower = format!(" {} ", ws.join(" "));
        let mut subject = BTreeSet::new();
        let mut values = BTreeSet::new();
        let mut negated = false;
        let value = |kind, group: &str, v: String| Value {
            kind,
            group: group.to_string(),
            value: v,
        };
        // Named things: the first one, when the text opens with it, is
        // what the statement is about; the others are values it states.
        let named = crate::entities::extract(text);
        let opening = text
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        let mut ids = BTreeSet::new();
        let mut named_words = BTreeSet::new();
        let mut holders = BTreeSet::new();
        for (i, e) in named.iter().enumerate() {
            use crate::entities::Kind as E;
            match e.kind {
                E::Id => {
                    ids.insert(e.key.clone());
                    continue;
                }
                E::Email | E::Url | E::Handle => continue,
                _ => {}
            }
            let spelled = words(&e.name);
            let first_word = e.key.split(' ').next().unwrap_or("");
            if i == 0 && opening.contains(first_word) {
                // the text opens with it: what it is about (its words stay
                // subject words)
                holders.insert(e.key.clone());
                continue;
            }
            named_words.extend(spelled.iter().cloned());
            named_words.extend(e.key.split(' ').map(str::to_string));
            // "took over from Dana", "replaced Jenkins with": what was
            let former = spelled
                .first()
                .is_some_and(|first| ws.windows(2).any(|p| &p[1] == first && FORMER.contains(&p[0].as_str())));
            if !former {
                values.insert(value(Kind::Named, "", e.key.clone()));
                holders.insert(e.key.clone());
            }
        }
        let mut skip = false;
        for (i, w) in ws.iter().enumerate() {
            if skip {
                skip = false;
                continue;
            }
            let next = ws.get(i + 1).map(String::as_str).unwrap_or("");
            // "August 15th", "15 Aug": one date; "June" alone a month; "the 1st" a day
            if let (Some(m), Some(d)) = (month(w), day(next)) {
                values.insert(value(Kind::Date, "", format!("{m:02}-{d:02}")));
                skip = true;
                continue;
            }
            if let (Some(d), Some(m)) = (day(w), month(next)) {
                values.insert(value(Kind::Date, "", format!("{m:02}-{d:02}")));
                skip = true;
                continue;
            }
            if let Some(m) = month(w).filter(|_| w != "may" && w.len() > 3) {
                values.insert(value(Kind::Date, "", format!("{m:02}")));
                continue;
            }
            if FIRST_PERSON.contains(&w.as_str()) {
                subject.insert(WRITER.to_string());
            } else if NEGATIONS.contains(&w.as_str()) || w.ends_with("n't") {
                negated = true;
            } else if STATES.contains(&w.as_str()) {
                values.insert(value(Kind::State, "", w.clone()));
            } else if w == "reopened" {
                values.insert(value(Kind::State, "", "open".into()));
            } else if (w == "on" || w == "off") && i > 0 && SWITCHED.contains(&ws[i - 1].as_str()) {
                values.insert(value(Kind::State, "", w.clone()));
            } else if DAY_WORDS.contains(&w.as_str()) {
                values.insert(value(Kind::Date, "", w.clone()));
            } else if is_time(w) {
                values.insert(value(Kind::Time, "", normalise_time(w)));
            } else if let Some(d) = ordinal_digits(w)
                .and_then(|d| d.parse::<u32>().ok())
                .filter(|d| *d <= 31)
            {
                values.insert(value(Kind::Date, "", format!("*-{d:02}")));
            } else if let Some(amount) = w.strip_prefix('$') {
                values.insert(value(Kind::Money, "", normalise_number(amount)));
            } else if is_number(w) {
                if CURRENCIES.contains(&next) {
                    values.insert(value(Kind::Money, "", normalise_number(w)));
                } else {
                    values.insert(value(Kind::Number, &unit(&ws, i, &named_words), normalise_number(w)));
                }
            } else if !STOPWORDS.contains(&w.as_str())
                && !CHANGE_VERBS.contains(&w.as_str())
                && !EXPLICIT_CUES.contains(&w.as_str())
                && !WEAK_CUES.contains(&w.as_str())
                && !named_words.contains(w)
                && !ENVIRONMENTS.contains(&w.as_str())
                && w.len() >= 3
            {
                subject.insert(stem(w));
            }
        }
        let environments = ws
            .iter()
            .flat_map(|w| std::iter::once(w.as_str()).chain(w.split('-')))
            .filter(|w| ENVIRONMENTS.contains(w))
            .map(|w| match w {
                "production" => "prod".to_string(),
                "development" => "dev".to_string(),
                "testing" | "load-test" => "test".to_string(),
                other => other.to_string(),
            })
            .collect();
        let preferred = ws
            .iter()
            .position(|w| EXCLUSIVE_PREFERENCES.contains(&w.as_str()))
            .map(|at| {
                ws[at + 1..]
                    .iter()
                    .map(|w| stem(w))
                    .filter(|w| subject.contains(w))
                    .collect::<BTreeSet<String>>()
            });
        // "Raj's wife prefers", "my sister lives" (not "went to live with
        // my aunt", "the standup with my boss")
        let owner_words = ["my", "our", "his", "her", "their"];
        let spelled_possessive = text
            .split_whitespace()
            .next()
            .is_some_and(|w| w.ends_with("'s") || w.ends_with("’s"));
        let relation = match ws.as_slice() {
            [first, second, ..]
                if (owner_words.contains(&first.as_str()) || spelled_possessive)
                    && RELATIONS.contains(&second.as_str()) =>
            {
                Some(second.clone())
            }
            _ => None,
        };
        let entities = named.iter().map(|e| e.key.clone()).collect();
        while values.len() > MAX_VALUES {
            values.pop_last();
        }
        Statement {
            entities,
            relation,
            role: ws.iter().any(|w| ROLES.contains(&w.as_str())),
            preferred,
            addition: holds(&lower, ADDITIONS),
            history: holds(&lower, HISTORY),
            approximate: holds(&lower, APPROXIMATE) || text.contains('~'),
            words: ws,
            lower,
            subject,
            values,
            holders,
            ids,
            environments,
            negated,
        }
    }

    /// Its values of one kind and group.
    pub fn of(&self, kind: Kind, group: &str) -> Vec<&str> {
        self.values
            .iter()
            .filter(|v| v.kind == kind && v.group == group)
            .map(|v| v.value.as_str())
            .collect()
    }
}

/// What a number counts: the word after it ("10 seats", "45 minutes"),
/// else the subject word before it ("port 8080", "version 3"); stemmed.
fn unit(ws: &[String], i: usize, named: &BTreeSet<String>) -> String {
    let usable = |w: &String| {
        w.len() >= 2
            && w.chars().all(|c| c.is_alphabetic() || c == '-')
            && !STOPWORDS.contains(&w.as_str())
            && !CHANGE_VERBS.contains(&w.as_str())
            && !WEAK_CUES.contains(&w.as_str())
            && !EXPLICIT_CUES.contains(&w.as_str())
            && !named.contains(w)
    };
    // a product's version: "Postgres 14"
    if let Some(w) = i.checked_sub(1).map(|p| &ws[p]).filter(|w| named.contains(*w)) {
        return w.clone();
    }
    if let Some(w) = ws.get(i + 1).filter(|w| usable(w)) {
        return stem(w);
    }
    ws[..i]
        .iter()
        .rev()
        .take(2)
        .find(|w| usable(w))
        .map(|w| stem(w))
        .unwrap_or_default()
}

/// Whether the two statements state different values of one kind (and
/// unit): each states one the other does not agree with. Added detail
/// ("Friday" -> "Friday evening", "June" -> "June 2") is not a change, nor
/// are two numbers when one is approximate.
pub fn changed_values(a: &Statement, b: &Statement) -> Option<Kind> {
    let groups: BTreeSet<(Kind, &str)> = a
        .values
        .iter()
        .filter(|v| b.values.iter().any(|w| w.kind == v.kind && w.group == v.group))
        .map(|v| (v.kind, v.group.as_str()))
        .collect();
    groups.into_iter().find_map(|(kind, group)| {
        if matches!(kind, Kind::Number | Kind::Money) && (a.approximate || b.approximate) {
            return None;
        }
        let (x, y) = (a.of(kind, group), b.of(kind, group));
        let agree = |p: &str, q: &str| if kind == Kind::Date { dates_agree(p, q) } else { p == q };
        let unmatched = |from: &[&str], to: &[&str]| from.iter().any(|p| !to.iter().any(|q| agree(p, q)));
        (unmatched(&x, &y) && unmatched(&y, &x)).then_some(kind)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_normalised() {
        assert_eq!(words("Alice's (new) role: lead!"), ["alice", "new", "role", "lead"]);
        assert_eq!(words("costs $29 a month"), ["costs", "$29", "a", "month"]);
        assert_eq!(stem("drinks"), "drink");
        assert_eq!(stem("class"), "class");
        assert_eq!(stem("deadline"), "due");
        assert!(is_id("ops-99172") && !is_id("10:30"));
        assert_eq!(normalise_time("9pm"), "21:00");
        assert_eq!(normalise_time("12am"), "0:00");
        assert_eq!(normalise_time("12pm"), "12:00");
        assert_eq!(normalise_number("nine"), "9");
        assert_eq!(normalise_number("1,450"), "1450");
    }

    #[test]
    fn values_have_kinds_and_units() {
        let s = Statement::parse("The Pro plan costs $29 per month and includes 10 seats");
        assert_eq!(s.of(Kind::Money, ""), ["29"]);
        assert_eq!(s.of(Kind::Number, "seat"), ["10"]);
        let (a, b) = (
            Statement::parse("The standup is at 9"),
            Statement::parse("The standup moved to 10"),
        );
        assert_eq!(
            (a.of(Kind::Number, ""), b.of(Kind::Number, "")),
            (vec!["9"], vec!["10"])
        );
        let s = Statement::parse("billing-api listens on port 8080 in prod");
        assert_eq!(s.of(Kind::Number, "port"), ["8080"]);
        assert!(s.environments.contains("prod"));
        let s = Statement::parse("My rent is due on the 1st; the report is due on August 15th");
        assert_eq!(s.of(Kind::Date, ""), ["*-01", "08-15"]);
        assert!(Statement::parse("I used to live in Lyon").history);
        assert!(Statement::parse("Ken also likes blues").addition);
        assert!(Statement::parse("The plan costs about $30").approximate);
    }

    #[test]
    fn dates_agree_when_one_refines_the_other() {
        assert!(dates_agree("06", "06-02"));
        assert!(dates_agree("*-01", "03-01"));
        assert!(!dates_agree("06-02", "06-03"));
        assert!(!dates_agree("06", "07-02"));
    }
}
