//! SQL bindings of the scope lists' int8 quantization (engram-core `quant`).
//! The lists themselves (engram.scope_entries, engram.scope_sizes) are
//! tables kept by triggers in sql/api.sql; these two functions are what the
//! triggers and engram._knn call per entry.

use engram_core::quant;
use pgrx::prelude::*;

/// The quantized form of an embedding (given as real[]: pgvector's cast).
#[pg_extern(immutable, strict, parallel_safe)]
fn _quantize(embedding: Vec<Option<f32>>) -> Vec<u8> {
    let values: Vec<f32> = embedding.into_iter().map(|v| v.unwrap_or(f32::NAN)).collect();
    quant::quantize(&values)
}

/// Approximate cosine distance of two quantized embeddings.
#[pg_extern(immutable, strict, parallel_safe)]
fn _qdist(a: &[u8], b: &[u8]) -> f32 {
    quant::distance(a, b)
}
