//! Vision memories (docs/VISION.md): the checks engram.image_put and the image
//! reference triggers run before they touch a row. The rules themselves are
//! engram-core's `images` module.

use crate::errors::OrRaise;
use engram_core::images;
use pgrx::prelude::*;

/// An image before it is stored: its declared type (returned in canonical
/// form), its first bytes (`head`, at least 12) and its size against
/// `engram.image_max_bytes`.
#[pg_extern(stable, parallel_safe)]
fn _check_image(mime: Option<&str>, head: Option<&[u8]>, bytes: Option<i32>) -> String {
    let max = crate::gucs::image_max_bytes();
    images::check_image(mime, head.unwrap_or_default(), bytes.unwrap_or(0).max(0) as usize, max).or_raise()
}

/// An image id as engram.image_put returns it: 64 hex digits, lower case.
#[pg_extern(immutable, parallel_safe)]
fn _image_id(sha256: Option<&str>) -> String {
    images::parse_sha256(sha256).or_raise()
}

/// The images a memory's metadata names (`{"images": [...]}`), distinct.
/// `strict`: refuse malformed entries (a write); otherwise skip them (a
/// release, which must never block a delete).
#[pg_extern(immutable, parallel_safe)]
fn _image_refs(metadata: Option<pgrx::JsonB>, strict: bool) -> Vec<String> {
    match metadata {
        Some(m) if strict => images::referenced(&m.0).or_raise(),
        Some(m) => images::referenced_leniently(&m.0),
        None => Vec::new(),
    }
}

/// vision_search's k, clamped to 1..50.
#[pg_extern(immutable, parallel_safe)]
fn _vision_k(k: Option<i32>) -> i32 {
    images::clamp_k(k)
}
