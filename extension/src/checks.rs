//! Validation entry points called by the plpgsql API before it touches any
//! row, so that bad input changes nothing.

use crate::errors::OrRaise;
use engram_core::{cursor, tags, validate, Error};
use pgrx::prelude::*;

/// Runs one of engram's argument checks (a statement that raises its own
/// error), for the Rust API functions. A read: a search or a context
/// package must run on a hot standby, where a transaction cannot get an id.
pub(crate) fn run_check(sql: &str, args: Vec<pgrx::datum::DatumWithOid<'_>>) {
    Spi::connect(|client| {
        client
            .select(sql, None, &args)
            .map(drop)
            .unwrap_or_else(|e| error!("engram: checking the call's arguments failed: {e}"));
    });
}

fn strs(v: &Option<Vec<Option<String>>>) -> Vec<Option<&str>> {
    v.as_ref()
        .map(|v| v.iter().map(Option::as_deref).collect())
        .unwrap_or_default()
}

/// Everything about a new or changed memory except its embedding.
#[pg_extern(immutable, parallel_safe)]
#[allow(clippy::too_many_arguments)]
fn _check_memory(
    content: Option<&str>,
    kind: Option<&str>,
    tags: Option<Vec<Option<String>>>,
    metadata_type: Option<&str>,
    metadata_bytes: Option<i32>,
    importance: Option<f32>,
    author_type: Option<&str>,
    internal_type: Option<&str>,
) -> bool {
    validate::check_content(content).or_raise();
    validate::check_kind(kind.unwrap_or("NULL")).or_raise();
    let tag_list = strs(&tags);
    validate::check_tags(&tag_list).or_raise();
    validate::check_metadata(metadata_type.unwrap_or("null"), metadata_bytes.unwrap_or(0) as usize).or_raise();
    validate::check_unit_interval("importance", importance.map(f64::from)).or_raise();
    validate::check_author_type(author_type.unwrap_or("NULL")).or_raise();
    let tag_list: Vec<&str> = tag_list.into_iter().flatten().collect();
    tags::check_memory_scope(internal_type, &tag_list).or_raise();
    true
}

/// Tags given to update(): bounded, and the memory's scope may not change.
#[pg_extern(immutable, parallel_safe)]
fn _check_tags(
    tags: Option<Vec<Option<String>>>,
    internal_type: Option<&str>,
    old_tags: Option<Vec<Option<String>>>,
) -> bool {
    let list = strs(&tags);
    validate::check_tags(&list).or_raise();
    let list: Vec<&str> = list.into_iter().flatten().collect();
    tags::check_memory_scope(internal_type, &list).or_raise();
    let old: Vec<&str> = strs(&old_tags).into_iter().flatten().collect();
    if tags::scope_of(&list) != tags::scope_of(&old) {
        crate::errors::raise(Error::invalid(
            "tags would move the memory to another ghost scope",
            "keep the ghost_type:/ghost_owner: tags of the memory unchanged",
        ));
    }
    true
}

/// Metadata given to update().
#[pg_extern(immutable, parallel_safe, strict)]
fn _check_metadata(metadata_type: &str, metadata_bytes: i32) -> bool {
    validate::check_metadata(metadata_type, metadata_bytes as usize).or_raise();
    true
}

/// The shape of a JSON argument (`what`, e.g. metadata), given as its text:
/// nesting depth and number range bounded, so that every reader can decode
/// what is stored (engram_core::validate::check_json).
#[pg_extern(immutable, parallel_safe, strict)]
fn _check_json(what: &str, json: &str) -> bool {
    validate::check_json(what, json).or_raise();
    true
}

/// Content given to update().
#[pg_extern(immutable, parallel_safe)]
fn _check_content(content: Option<&str>) -> bool {
    validate::check_content(content).or_raise();
    true
}

/// An embedding (cast to real[]) against the configured dimension.
#[pg_extern(immutable, parallel_safe)]
fn _check_embedding(embedding: Vec<Option<f32>>, dims: i32, argument: &str) -> bool {
    let values: Vec<f32> = embedding.into_iter().map(|v| v.unwrap_or(f32::NAN)).collect();
    validate::check_embedding(&values, dims, argument).or_raise();
    true
}

#[pg_extern(immutable, parallel_safe, strict)]
fn _check_dims(dims: i32) -> bool {
    validate::check_dims(dims).or_raise();
    true
}

/// Filters of search() and list().
#[pg_extern(immutable, parallel_safe)]
fn _check_filters(
    kinds: Option<Vec<Option<String>>>,
    tags_all: Option<Vec<Option<String>>>,
    tags_any: Option<Vec<Option<String>>>,
    internal_type: Option<&str>,
    scope_tags: Option<Vec<Option<String>>>,
) -> bool {
    for kind in strs(&kinds) {
        validate::check_kind(kind.unwrap_or("NULL")).or_raise();
    }
    validate::check_tags(&strs(&tags_all)).or_raise();
    validate::check_tags(&strs(&tags_any)).or_raise();
    validate::check_tags(&strs(&scope_tags)).or_raise();
    if let Some(it) = internal_type {
        let it = tags::InternalType::parse(it).or_raise();
        if it == tags::InternalType::Ghost && strs(&scope_tags).is_empty() {
            crate::errors::raise(Error::new(
                engram_core::Sqlstate::NullValueNotAllowed,
                "a ghost search needs scope_tags",
                "pass scope_tags => engram.scope_tags('ghost', ghost_type => ..., ...)",
            ));
        }
    } else if !strs(&scope_tags).is_empty() {
        crate::errors::raise(Error::invalid(
            "scope_tags were given without internal_type",
            "pass internal_type => 'ghost' or 'agent' with scope_tags",
        ));
    }
    true
}

#[pg_extern(immutable, parallel_safe, strict)]
fn _check_list(status: &str, order_by: &str) -> bool {
    validate::check_status(status).or_raise();
    validate::check_order_by(order_by).or_raise();
    true
}

#[pg_extern(immutable, parallel_safe)]
fn _check_merge(ids: Option<Vec<Option<pgrx::Uuid>>>) -> bool {
    let ids = ids.unwrap_or_default();
    let mut distinct: Vec<[u8; 16]> = ids.iter().flatten().map(|u| **u).collect();
    distinct.sort();
    distinct.dedup();
    validate::check_merge_ids(ids.len(), distinct.len()).or_raise();
    true
}

#[pg_extern(immutable, parallel_safe, strict)]
fn _cursor_encode(order_by: &str, value: &str, id: pgrx::Uuid) -> String {
    cursor::encode(order_by, value, &id.to_string())
}

/// Returns {value, id} of the row after which the next page starts.
#[pg_extern(immutable, parallel_safe, strict)]
fn _cursor_decode(cursor: &str, order_by: &str) -> Vec<String> {
    let (value, id) = cursor::decode(cursor, order_by).or_raise();
    vec![value, id]
}

/// The namespace of a keyed memory, or a prefix or suffix of one
/// (engram-core's `items`).
#[pg_extern(immutable, parallel_safe)]
fn _check_namespace(what: &str, labels: Option<Vec<Option<String>>>, allow_empty: bool) -> bool {
    match &labels {
        None if allow_empty => {}
        None => crate::errors::raise(Error::new(
            engram_core::Sqlstate::NullValueNotAllowed,
            format!("{what} is missing"),
            "pass a namespace such as ARRAY['users', 'u42']",
        )),
        Some(_) => engram_core::items::check_namespace(what, &strs(&labels), allow_empty).or_raise(),
    }
    true
}

/// The key of a keyed memory.
#[pg_extern(immutable, parallel_safe)]
fn _check_key(key: Option<&str>) -> bool {
    engram_core::items::check_key(key).or_raise();
    true
}
