//! SQL bindings of engram-core's time reading (`time_window`) and the
//! search boost of memories in the window a query names.

use chrono::{DateTime, Duration, Utc};
use pgrx::datum::{Range, RangeBound, TimestampWithTimeZone};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// The window `query_text` names, read against a reference moment given as
/// epoch seconds and the UTC offset (seconds) of the caller's time zone at
/// that moment: `[start, end)` in epoch seconds, an open side NULL; NULL
/// when the text names no time. Days are the caller's calendar days: the
/// reference is shifted to local wall time, read, and the window shifted
/// back. [`query_window`] wraps it as a tstzrange. (Not in SQL since
/// 0.23.0; the install scripts of the releases before create it from this
/// library.)
#[pg_extern(immutable, parallel_safe, strict, sql = false)]
fn _time_window_bounds(query_text: &str, reference_epoch: f64, utc_offset_s: i32) -> Option<Vec<Option<f64>>> {
    if !reference_epoch.is_finite() {
        return None;
    }
    let offset = Duration::seconds(i64::from(utc_offset_s));
    let micros = (reference_epoch * 1e6).round() as i64;
    let local = DateTime::<Utc>::from_timestamp_micros(micros)? + offset;
    let window = engram_core::time_window::time_window(query_text, local)?;
    let epoch = |t: Option<DateTime<Utc>>| t.map(|t| (t - offset).timestamp_micros() as f64 / 1e6);
    Some(vec![epoch(window.start), epoch(window.end)])
}

/// The time query_text names ("yesterday", "last week", "two years ago",
/// "in May 2023", "since March", "before May 5", "2024-03-01"), read
/// against reference_time (default now) in the session's time zone, as a
/// half-open range [start, end); NULL when it names no time. Search boosts
/// the memories whose occurred_at falls in it.
#[pg_extern(stable, parallel_safe, name = "time_window")]
fn time_window(
    query_text: Option<&str>,
    reference_time: default!(Option<TimestampWithTimeZone>, "NULL"),
) -> Option<Range<TimestampWithTimeZone>> {
    crate::search::query_words(query_text)?;
    query_window(query_text?, reference_time.unwrap_or_else(now))
}

/// The transaction's start time (now()).
pub(crate) fn now() -> TimestampWithTimeZone {
    // SAFETY: reads the transaction's start time.
    TimestampWithTimeZone::try_from(unsafe { pg_sys::GetCurrentTransactionStartTimestamp() })
        .unwrap_or_else(|_| error!("engram: the transaction's start time is out of range"))
}

/// The window `query_text` names, read against `reference` in the
/// session's time zone: engram.time_window, and engram.search's and
/// engram.context's window. None when the text names no time or the
/// reference is infinite.
pub(crate) fn query_window(query_text: &str, reference: TimestampWithTimeZone) -> Option<Range<TimestampWithTimeZone>> {
    const PG_EPOCH_S: f64 = 946_684_800.0;
    let at = pg_sys::TimestampTz::from(reference);
    if at == i64::MIN || at == i64::MAX {
        return None;
    }
    // extract(timezone FROM reference): the session zone's offset then
    // SAFETY: converts a finite timestamp in the session time zone.
    let offset = unsafe {
        let (mut tz, mut fsec) = (0, 0);
        let mut tm: pg_sys::pg_tm = std::mem::zeroed();
        if pg_sys::timestamp2tm(
            at,
            &mut tz,
            &mut tm,
            &mut fsec,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        ) != 0
        {
            return None;
        }
        -tz
    };
    // (a query is at most 64 KiB, engram.search checks; the reading needs
    // no more than its start)
    let limit = engram_core::limits::MAX_QUERY_BYTES;
    let text = match query_text.char_indices().nth(limit) {
        Some((cut, _)) => &query_text[..cut],
        None => query_text,
    };
    // (epoch seconds, as extract(epoch ...)::float8 reads them: the same
    // double for any time from 1685 to 2255, within a few microseconds
    // outside, which the reading rounds away)
    let epoch = (i128::from(at) + (PG_EPOCH_S as i128) * 1_000_000) as f64 / 1e6;
    let bounds = _time_window_bounds(text, epoch, offset)?;
    // to_timestamp(seconds), as the SQL function converts each bound (and
    // refuses one out of range, 22008)
    let bound = |b: Option<f64>| -> RangeBound<TimestampWithTimeZone> {
        let Some(s) = b else {
            return RangeBound::Infinite;
        };
        let us = ((s - PG_EPOCH_S) * 1e6).round_ties_even();
        match TimestampWithTimeZone::try_from(us as i64) {
            Ok(t) if us.abs() < 9.2e18 => t.into(),
            _ => crate::search::sql_error(
                PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
                "timestamp out of range".into(),
            ),
        }
    };
    let (start, end) = (
        bound(bounds.first().copied().flatten()),
        bound(bounds.get(1).copied().flatten()),
    );
    Some(Range::new(
        start,
        match end {
            RangeBound::Inclusive(t) => RangeBound::Exclusive(t),
            other => other,
        },
    ))
}

/// A search hit's relevance with engram-core's window boost when the
/// memory happened in the window the query names. The search of 0.13.0 to
/// 0.19.0 calls it; engram-core `ranking` scores this release's.
#[pg_extern(sql = false)]
fn _window_boosted(relevance: f32, in_window: bool) -> f32 {
    engram_core::search::window_boosted(f64::from(relevance), in_window) as f32
}
