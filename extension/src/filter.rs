//! SQL bindings of engram-core's metadata/value filters (`filter`): the
//! check `list` and `search` run on a caller's filter, the test each
//! candidate row passes, and the equality part an index serves.

use crate::errors::OrRaise;
use engram_core::filter;
use pgrx::prelude::*;
use pgrx::JsonB;

/// Refuses a malformed filter (22023, 54000) before any row is read.
#[pg_extern(immutable, parallel_safe, strict)]
fn _check_filter(filter: JsonB) -> bool {
    filter::check(&filter.0).or_raise();
    true
}

/// Whether a memory's document (its value, else its metadata) passes the filter.
#[pg_extern(immutable, parallel_safe, strict)]
fn _filter_matches(document: JsonB, filter: JsonB) -> bool {
    filter::matches(&document.0, &filter.0)
}

/// The fields the filter wants equal to a scalar, as an object every
/// matching document contains (NULL: none; `'{}'` would match everything).
#[pg_extern(immutable, parallel_safe, strict)]
fn _filter_equalities(filter: JsonB) -> Option<JsonB> {
    filter::equalities(&filter.0).map(JsonB)
}
