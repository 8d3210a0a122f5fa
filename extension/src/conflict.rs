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
