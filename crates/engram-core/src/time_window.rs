//! The time a query names, read into a window (docs/TIME_AND_ENTITIES.md):
//! English relative and absolute expressions ("yesterday", "last week", "3
//! days ago", "on Monday", "in May 2023", "since March", "before May 5",
//! "2023-05-05") against a reference time. Search boosts memories whose
//! `occurred_at` falls in the window; nothing here filters.
//!
//! Days are UTC calendar days and weeks start on Monday (ISO 8601). A name
//! without a year means its latest occurrence not after the reference day
//! ("May" in June 2024 is May 2024; in April 2024, May 2023), except after
//! "next". The first expression found wins. "may" and "march" are months
//! only where a date is meant (capitalised, after "in", "since", "last", …,
//! or next to a day or year): "I may go" names no time.

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc, Weekday};

/// A half-open window `[start, end)`; an open side is `None` ("before May 5"
/// has no start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
}

/// The window `text` names, read against `reference`; `None` when it names
/// no time.
pub fn time_window(text: &str, reference: DateTime<Utc>) -> Option<Window> {
    let tokens = tokens(text);
    let today = reference.date_naive();
    for i in 0..tokens.len() {
        let bound = match tokens[i].lower.as_str() {
            "since" | "after" | "from" => Some(Bound::From),
            "before" | "until" | "till" => Some(Bound::Until),
            _ => None,
        };
        if let Some(bound) = bound {
            if let Some((period, _)) = period_at(&tokens, i + 1, today) {
                return Some(match bound {
                    // "since March": from its start to the end of the reference day;
                    // "after March": from its end.
                    Bound::From if tokens[i].lower == "after" => Window {
                        start: Some(midnight(period.1)),
                        end: None,
                    },
                    Bound::From => Window {
                        start: Some(midnight(period.0)),
                        end: Some(midnight(today.succ_opt()?).max(midnight(period.1))),
                    },
                    Bound::Until => Window {
                        start: None,
                        end: Some(midnight(period.0)),
                    },
                });
            }
        }
        if let Some((period, _)) = period_at(&tokens, i, today) {
            return Some(Window {
                start: Some(midnight(period.0)),
                end: Some(midnight(period.1)),
            });
        }
    }
    None
}

enum Bound {
    From,
    Until,
}

fn midnight(d: NaiveDate) -> DateTime<Utc> {
    d.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc()
}

struct Token {
    lower: String,
    capitalised: bool,
}

/// Words, numbers and dates (`2023-05-05`, `5/5/2023`) of `text`, lowercased,
/// ordinal suffixes dropped ("5th" -> "5").
fn tokens(text: &str) -> Vec<Token> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '/'))
        .map(|w| w.trim_matches(|c| c == '-' || c == '/'))
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut lower = w.to_lowercase();
            for suffix in ["st", "nd", "rd", "th"] {
                if lower.len() > suffix.len()
                    && lower.ends_with(suffix)
                    && lower[..lower.len() - suffix.len()].chars().all(|c| c.is_ascii_digit())
                {
                    lower.truncate(lower.len() - suffix.len());
                }
            }
            Token {
                capitalised: w.chars().next().is_some_and(char::is_uppercase),
                lower,
            }
        })
        .collect()
}

/// A period `[first day, day after the last)`.
type Period = (NaiveDate, NaiveDate);

/// The period named at token `i`, and how many tokens name it.
fn period_at(t: &[Token], i: usize, today: NaiveDate) -> Option<(Period, usize)> {
    let word = |k: usize| t.get(i + k).map(|x| x.lower.as_str());
    let w0 = word(0)?;
    match w0 {
        "today" => return Some(((today, today + Duration::days(1)), 1)),
        "yesterday" => return Some(((today - Duration::days(1), today), 1)),
        "tomorrow" => return Some(((today + Duration::days(1), today + Duration::days(2)), 1)),
        "last" | "this" | "next" | "past" | "previous" | "coming" => {
            let step = match w0 {
                "last" | "past" | "previous" => -1,
                "this" => 0,
                _ => 1,
            };
            if let Some(unit) = word(1).and_then(unit) {
                return Some((shift(unit, today, step), 2));
            }
            if let Some(day) = word(1).and_then(weekday) {
                return Some((relative_weekday(today, day, step), 2));
            }
            if let Some(month) = word(1).and_then(month) {
                let year = match step {
                    -1 => latest_month(today, month, true),
                    0 => today.year(),
                    _ => next_month(today, month),
                };
                return Some((month_period(year, month)?, 2));
            }
            return None;
        }
        "in" | "on" | "during" | "of" => {
            // "in 2023", "in May", "on Monday": the preposition makes a month
            // name a month ("in may").
            if let Some(year) = word(1).and_then(year) {
                return Some((
                    (
                        NaiveDate::from_ymd_opt(year, 1, 1)?,
                        NaiveDate::from_ymd_opt(year + 1, 1, 1)?,
                    ),
                    2,
                ));
            }
            return period_at_date(t, i + 1, today, true).map(|(p, n)| (p, n + 1));
        }
        _ => {}
    }
    // "3 days ago", "a week ago", "two years ago"
    if let (Some(n), Some(u), Some("ago")) = (count(w0), word(1).and_then(unit), word(2)) {
        return Some((ago(u, today, n)?, 3));
    }
    period_at_date(t, i, today, false)
}

/// A date, month or weekday at token `i`: `2023-05-05`, `2023-05`, `5/5/2023`
/// (day first when the first part is above 12, else month first), `May 5`,
/// `5 May`, `May 5 2023`, `May 2023`, `May`, `Monday`.
fn period_at_date(t: &[Token], i: usize, today: NaiveDate, after_preposition: bool) -> Option<(Period, usize)> {
    let tok = t.get(i)?;
    let word = |k: usize| t.get(i + k).map(|x| x.lower.as_str());
    if let Some(p) = numeric_date(&tok.lower) {
        return Some((p, 1));
    }
    if let Some(day) = weekday(&tok.lower) {
        return Some((relative_weekday(today, day, 0), 1));
    }
    // "5 May [2023]", "5th of May"
    if let Some(d) = day_number(&tok.lower) {
        let of = usize::from(word(1) == Some("of"));
        if let Some(m) = word(1 + of).and_then(month) {
            return match word(2 + of).and_then(year) {
                Some(y) => Some((day_period(y, m, d)?, 3 + of)),
                None => Some((day_period(latest_day(today, m, d), m, d)?, 2 + of)),
            };
        }
    }
    let m = month(&tok.lower)?;
    let next_is_date = word(1).is_some_and(|w| day_number(w).is_some() || year(w).is_some());
    // (A capital at the start of the text says nothing: "March on".)
    if is_ambiguous_month(&tok.lower) && !((tok.capitalised && i > 0) || after_preposition || next_is_date) {
        return None;
    }
    // "May 5 [2023]", "May 2023", "May"
    match (word(1).and_then(day_number), word(1).and_then(year)) {
        (_, Some(y)) => Some((month_period(y, m)?, 2)),
        (Some(d), None) => match word(2).and_then(year) {
            Some(y) => Some((day_period(y, m, d)?, 3)),
            None => Some((day_period(latest_day(today, m, d), m, d)?, 2)),
        },
        (None, None) => Some((month_period(latest_month(today, m, false), m)?, 1)),
    }
}

#[derive(Clone, Copy)]
enum Unit {
    Day,
    Week,
    Month,
    Year,
}

fn unit(w: &str) -> Option<Unit> {
    match w {
        "day" | "days" => Some(Unit::Day),
        "week" | "weeks" => Some(Unit::Week),
        "month" | "months" => Some(Unit::Month),
        "year" | "years" => Some(Unit::Year),
        _ => None,
    }
}

fn count(w: &str) -> Option<i64> {
    const WORDS: [&str; 12] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    ];
    match w {
        "a" | "an" => Some(1),
        "couple" => Some(2),
        _ => WORDS
            .iter()
            .position(|x| *x == w)
            .map(|p| p as i64 + 1)
            .or_else(|| w.parse::<i64>().ok().filter(|n| (0..=10_000).contains(n))),
    }
}

/// The weekday a full lower-case name names.
pub fn weekday(w: &str) -> Option<Weekday> {
    Some(match w {
        "monday" => Weekday::Mon,
        "tuesday" => Weekday::Tue,
        "wednesday" => Weekday::Wed,
        "thursday" => Weekday::Thu,
        "friday" => Weekday::Fri,
        "saturday" => Weekday::Sat,
        "sunday" => Weekday::Sun,
        _ => return None,
    })
}

/// Month names, January first (entities never take one for a name).
pub const MONTHS: [&str; 12] = [
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
];

/// The month (1-12) of a full name or a three-letter abbreviation ("sept"
/// too).
fn month(w: &str) -> Option<u32> {
    MONTHS
        .iter()
        .position(|m| *m == w || (w.len() >= 3 && m.starts_with(w) && (w.len() == 3 || w == "sept")))
        .map(|p| p as u32 + 1)
}

/// Month names that are also common words: months only where a date is meant.
fn is_ambiguous_month(w: &str) -> bool {
    matches!(w, "may" | "march" | "mar" | "jan" | "jun" | "aug" | "dec" | "sat")
}

fn year(w: &str) -> Option<i32> {
    (w.len() == 4)
        .then(|| w.parse::<i32>().ok())
        .flatten()
        .filter(|y| (1900..=2200).contains(y))
}

fn day_number(w: &str) -> Option<u32> {
    (w.len() <= 2)
        .then(|| w.parse::<u32>().ok())
        .flatten()
        .filter(|d| (1..=31).contains(d))
}

/// `2023-05-05`, `2023-05`, `2023/05/05`, `5/5/2023`, `25/12/2023`.
fn numeric_date(w: &str) -> Option<Period> {
    let parts: Vec<&str> = w.split(['-', '/']).collect();
    let num = |s: &str| s.parse::<u32>().ok();
    match parts.as_slice() {
        [y, m] if y.len() == 4 => month_period(y.parse().ok()?, num(m)?),
        [y, m, d] if y.len() == 4 => day_period(y.parse().ok()?, num(m)?, num(d)?),
        [a, b, y] if y.len() == 4 => {
            let (a, b) = (num(a)?, num(b)?);
            let (m, d) = if a > 12 { (b, a) } else { (a, b) };
            day_period(y.parse().ok()?, m, d)
        }
        _ => None,
    }
}

fn day_period(y: i32, m: u32, d: u32) -> Option<Period> {
    let day = NaiveDate::from_ymd_opt(y, m, d)?;
    Some((day, day.succ_opt()?))
}

fn month_period(y: i32, m: u32) -> Option<Period> {
    let first = NaiveDate::from_ymd_opt(y, m, 1)?;
    let next = if m == 12 {
        NaiveDate::from_ymd_opt(y + 1, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(y, m + 1, 1)?
    };
    Some((first, next))
}

fn week_of(d: NaiveDate) -> Period {
    let monday = d - Duration::days(i64::from(d.weekday().num_days_from_monday()));
    (monday, monday + Duration::days(7))
}

/// The day, week, month or year `step` units from the one holding `today`.
fn shift(u: Unit, today: NaiveDate, step: i64) -> Period {
    match u {
        Unit::Day => {
            let d = today + Duration::days(step);
            (d, d + Duration::days(1))
        }
        Unit::Week => week_of(today + Duration::weeks(step)),
        Unit::Month => {
            let months = i64::from(today.year()) * 12 + i64::from(today.month0()) + step;
            month_period((months.div_euclid(12)) as i32, (months.rem_euclid(12)) as u32 + 1).expect("a month in range")
        }
        Unit::Year => {
            let y = today.year() + step as i32;
            (
                NaiveDate::from_ymd_opt(y, 1, 1).expect("a year in range"),
                NaiveDate::from_ymd_opt(y + 1, 1, 1).expect("a year in range"),
            )
        }
    }
}

/// "3 days ago": that day; "2 weeks ago": that week; months and years alike.
fn ago(u: Unit, today: NaiveDate, n: i64) -> Option<Period> {
    (n <= 10_000).then(|| shift(u, today, -n))
}

/// This week's `day` (step 0), last week's (-1) or next week's (1).
fn relative_weekday(today: NaiveDate, day: Weekday, step: i64) -> Period {
    let (monday, _) = week_of(today + Duration::weeks(step));
    let d = monday + Duration::days(i64::from(day.num_days_from_monday()));
    // "this Monday" said on a Wednesday is two days ago, and a bare weekday
    // is the latest one not after today: this week's when it is still to
    // come is last week's.
    if step == 0 && d > today {
        let back = d - Duration::weeks(1);
        return (back, back + Duration::days(1));
    }
    (d, d + Duration::days(1))
}

/// The year of the latest `m` not after `today`'s month (strictly before it
/// when `strictly`: "last May" in May is a year ago).
fn latest_month(today: NaiveDate, m: u32, strictly: bool) -> i32 {
    if m < today.month() || (m == today.month() && !strictly) {
        today.year()
    } else {
        today.year() - 1
    }
}

/// The year of the next `m` after `today`'s month.
fn next_month(today: NaiveDate, m: u32) -> i32 {
    if m > today.month() {
        today.year()
    } else {
        today.year() + 1
    }
}

/// The year of the latest `m`/`d` not after `today`.
fn latest_day(today: NaiveDate, m: u32, d: u32) -> i32 {
    match NaiveDate::from_ymd_opt(today.year(), m, d) {
        Some(x) if x <= today => today.year(),
        _ => today.year() - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wednesday 2024-06-12, noon UTC.
    fn reference() -> DateTime<Utc> {
        NaiveDate::from_ymd_opt(2024, 6, 12)
            .unwrap()
            .and_hms_opt(12, 0, 0)
            .unwrap()
            .and_utc()
    }

    fn days(text: &str) -> Option<(String, String)> {
        let w = time_window(text, reference())?;
        let show = |d: Option<DateTime<Utc>>| d.map_or("open".to_string(), |d| d.date_naive().to_string());
        Some((show(w.start), show(w.end)))
    }

    fn is(text: &str, start: &str, end: &str) {
        assert_eq!(days(text), Some((start.to_string(), end.to_string())), "{text}");
    }

    #[test]
    fn relative_days_weeks_months_years() {
        is("what did I do yesterday", "2024-06-11", "2024-06-12");
        is("today's standup", "2024-06-12", "2024-06-13");
        is("what did I decide last week about pricing", "2024-06-03", "2024-06-10");
        is("this week", "2024-06-10", "2024-06-17");
        is("plans for next week", "2024-06-17", "2024-06-24");
        is("last month", "2024-05-01", "2024-06-01");
        is("this month", "2024-06-01", "2024-07-01");
        is("next month", "2024-07-01", "2024-08-01");
        is("last year", "2023-01-01", "2024-01-01");
        is("this year", "2024-01-01", "2025-01-01");
        is("next year", "2025-01-01", "2026-01-01");
    }

    #[test]
    fn amounts_ago() {
        is("3 days ago", "2024-06-09", "2024-06-10");
        is("a week ago", "2024-06-03", "2024-06-10");
        is("two weeks ago", "2024-05-27", "2024-06-03");
        is("6 months ago", "2023-12-01", "2024-01-01");
        is("what did we say two years ago", "2022-01-01", "2023-01-01");
        is("an hour ago or a day ago", "2024-06-11", "2024-06-12");
    }

    #[test]
    fn weekdays() {
        // Wednesday reference: Monday is two days ago, Friday last week's.
        is("on Monday", "2024-06-10", "2024-06-11");
        is("monday", "2024-06-10", "2024-06-11");
        is("Friday's meeting", "2024-06-07", "2024-06-08");
        is("last friday", "2024-06-07", "2024-06-08");
        is("next tuesday", "2024-06-18", "2024-06-19");
        is("wednesday", "2024-06-12", "2024-06-13");
    }

    #[test]
    fn months_with_and_without_years() {
        is("in May", "2024-05-01", "2024-06-01");
        is("in may", "2024-05-01", "2024-06-01");
        is("September", "2023-09-01", "2023-10-01");
        is("the deadline in May 2023", "2023-05-01", "2023-06-01");
        is("sept 2021", "2021-09-01", "2021-10-01");
        is("last march", "2024-03-01", "2024-04-01");
        is("last june", "2023-06-01", "2023-07-01");
        is("next march", "2025-03-01", "2025-04-01");
        is("in 2023", "2023-01-01", "2024-01-01");
    }

    #[test]
    fn days_of_months() {
        is("May 5", "2024-05-05", "2024-05-06");
        is("on 5 May", "2024-05-05", "2024-05-06");
        is("May 5th, 2023", "2023-05-05", "2023-05-06");
        is("5th of July", "2023-07-05", "2023-07-06");
        is("December 25", "2023-12-25", "2023-12-26");
    }

    #[test]
    fn numeric_dates() {
        is("on 2023-05-05", "2023-05-05", "2023-05-06");
        is("2023-05", "2023-05-01", "2023-06-01");
        is("2023/05/07", "2023-05-07", "2023-05-08");
        is("25/12/2023", "2023-12-25", "2023-12-26");
        is("5/7/2023", "2023-05-07", "2023-05-08");
    }

    #[test]
    fn open_windows() {
        is("since March", "2024-03-01", "2024-06-13");
        is("everything since 2024-06-01", "2024-06-01", "2024-06-13");
        is("after May 5", "2024-05-06", "open");
        is("what was the deadline before May 5", "open", "2024-05-05");
        is("until last week", "open", "2024-06-03");
    }

    #[test]
    fn text_without_a_time_names_none() {
        for text in [
            "I may go to the gym",
            "March on, said the general",
            "Vera favourite tea gyokuro",
            "ticket ABC-1234 and error E1001",
            "the 5 reasons",
            "",
            "a day",
            "weeks",
            "version 2.1.3",
        ] {
            assert_eq!(days(text), None, "{text}");
        }
    }

    #[test]
    fn impossible_dates_name_none() {
        assert_eq!(days("2023-02-30"), None);
        assert_eq!(days("13/13/2023"), None);
    }
}
