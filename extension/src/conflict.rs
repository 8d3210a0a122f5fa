//! SQL bindings of engram-core's conflict rules (`conflict`), which
//! `engram.remember` asks for each of the nearest stored memories.

use pgrx::prelude::*;

/// The reasons `new_text` conflicts with a stored `old_text` (engram-core's
/// `conflict`): empty when it does not.
#[pg_extern(immutable, parallel_safe, strict)]
fn _conflict_reasons(new_text: &str, old_text: &str, similarity: f32, threshold: f32) -> Vec<String> {
    engram_core::conflict::reasons(new_text, old_text, similarity, threshold)
        .into_iter()
        .map(|r| r.name().to_string())
        .collect()
}

/// The conflict reasons by which a memory stored anyway superseded the one
/// it conflicted with, before `supersedes` named what to close. The current
/// API calls it no more; the library keeps it because the SQL of earlier
/// releases binds it (an update starts from their install).
#[pg_extern(immutable, parallel_safe)]
fn _superseding_reasons() -> Vec<String> {
    engram_core::conflict::Reason::ALL
        .iter()
        .filter(|r| r.supersedes())
        .map(|r| r.name().to_string())
        .collect()
}

/// For each of a search's facts, the 1-based position of the newer fact
/// that contradicts it, 0 for none (engram-core's `contradicted_by`):
/// `times` are when each holds from (epoch seconds), `cosines` the
/// row-major matrix of their pairwise similarities.
#[pg_extern(immutable, parallel_safe, strict)]
fn _contradicted_by(texts: Vec<String>, times: Vec<f64>, cosines: Vec<f32>, threshold: f32) -> Vec<i32> {
    if times.len() != texts.len() || cosines.len() != texts.len() * texts.len() {
        error!("engram._contradicted_by: one time per text and one cosine per pair");
    }
    // search passes its first 20 hits; the pairs are quadratic in their number
    if texts.len() > 20 {
        error!("engram._contradicted_by: at most 20 texts, not {}", texts.len());
    }
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    engram_core::conflict::contradicted_by(&texts, &times, &cosines, threshold)
        .into_iter()
        .map(|j| j.map_or(0, |j| j as i32 + 1))
        .collect()
}
