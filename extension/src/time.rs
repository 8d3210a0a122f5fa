//! SQL bindings of engram-core's time reading (`time_window`) and the
//! search boost of memories in the window a query names.

use chrono::{DateTime, Duration, Utc};
use pgrx::prelude::*;

/// The window `query_text` names, read against a reference moment given as
/// epoch seconds and the UTC offset (seconds) of the caller's time zone at
/// that moment: `[start, end)` in epoch seconds, an open side NULL; NULL
/// when the text names no time. Days are the caller's calendar days: the
/// reference is shifted to local wall time, read, and the window shifted
/// back. engram.time_window wraps it as a tstzrange.
#[pg_extern(immutable, parallel_safe, strict)]
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

/// A search hit's relevance with engram-core's window boost when the
/// memory happened in the window the query names. The search of 0.13.0 to
/// 0.19.0 calls it; engram-core `ranking` scores this release's.
#[pg_extern(sql = false)]
fn _window_boosted(relevance: f32, in_window: bool) -> f32 {
    engram_core::search::window_boosted(f64::from(relevance), in_window) as f32
}
