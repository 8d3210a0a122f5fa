//! SQL bindings of the scope lists (engram-core `quant` and `blocks`). The
//! lists themselves (engram.scope_blocks, engram.scope_entries,
//! engram.scope_sizes) are tables kept by triggers in sql/api/scope_lists.sql; these
//! functions are what the triggers and engram._knn call.

use engram_core::{blocks, quant};
use pgrx::prelude::*;

/// The quantized form of an embedding (given as real[]: pgvector's cast).
#[pg_extern(immutable, strict, parallel_safe)]
fn _quantize(embedding: Vec<Option<f32>>) -> Vec<u8> {
    let values: Vec<f32> = embedding.into_iter().map(|v| v.unwrap_or(f32::NAN)).collect();
    quant::quantize(&values)
}

/// Approximate cosine distance of two quantized embeddings. Unused by
/// 0.10.0's SQL (blocks are scanned by engram._nearest), but kept: the
/// upgrade scripts from 0.3.0 on create it, and CREATE FUNCTION needs the
/// symbol in this library for an old database to update through them.
#[pg_extern(immutable, strict, parallel_safe)]
fn _qdist(a: &[u8], b: &[u8]) -> f32 {
    quant::distance(a, b)
}

fn corrupted(message: String) -> ! {
    ereport!(
        PgLogLevel::ERROR,
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!("{message}: run SELECT engram.rebuild_lists() as a superuser")
    );
    unreachable!("ERROR does not return")
}

fn count(n: i32) -> usize {
    usize::try_from(n).unwrap_or_else(|_| corrupted(format!("a scope-list block counts {n} entries")))
}

/// Entries a block holds when each quantized vector is `qvec_len` bytes.
#[pg_extern(immutable, strict, parallel_safe)]
fn _block_capacity(qvec_len: i32) -> i32 {
    blocks::capacity(usize::try_from(qvec_len).unwrap_or(0)) as i32
}

/// Transition function of the engram._nearest aggregate: folds one block
/// row (`n` entries) into the running candidates, keeping the `k` nearest
/// to the quantized `query`.
#[pg_extern(immutable, strict, parallel_safe)]
fn _nearest_step(state: &[u8], entries: &[u8], n: i32, query: &[u8], k: i32) -> Vec<u8> {
    blocks::fold_block(state, entries, count(n), query, usize::try_from(k).unwrap_or(0))
        .unwrap_or_else(|e| corrupted(e))
}

/// The candidates of engram._nearest as rows, nearest first.
#[pg_extern(immutable, strict, parallel_safe)]
fn _candidates(candidates: &[u8]) -> TableIterator<'static, (name!(memory_id, pgrx::datum::Uuid), name!(d8, f32))> {
    TableIterator::new(
        blocks::decode(candidates)
            .into_iter()
            .map(|(d, id)| (pgrx::datum::Uuid::from_bytes(id), d)),
    )
}

/// Block `entries` (`n` of them) without memory `id`'s entry.
#[pg_extern(immutable, strict, parallel_safe)]
fn _block_without(entries: &[u8], n: i32, id: pgrx::datum::Uuid) -> Vec<u8> {
    match blocks::without(entries, count(n), id.as_bytes()) {
        Ok(Some(rest)) => rest,
        Ok(None) => corrupted(format!("memory {id} is missing from its scope-list block")),
        Err(e) => corrupted(e),
    }
}
