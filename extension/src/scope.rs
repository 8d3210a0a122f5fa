//! SQL bindings of tag scopes (ghost/agent isolation).

use crate::errors::OrRaise;
use engram_core::tags::{self, ScopeArgs};
use pgrx::prelude::*;

fn args<'a>(
    internal_type: Option<&'a str>,
    ghost_type: Option<&'a str>,
    ghost_owner: Option<&'a str>,
    ghost_space: Option<&'a str>,
    ghost_group: Option<&'a str>,
) -> ScopeArgs<'a> {
    ScopeArgs {
        internal_type,
        ghost_type,
        ghost_owner,
        ghost_space,
        ghost_group,
    }
}

/// The tags that mark a ghost or agent memory (see engram_core::tags).
#[pg_extern(immutable, parallel_safe)]
fn internal_tags(
    internal_type: Option<&str>,
    ghost_type: default!(Option<&str>, "NULL"),
    ghost_owner: default!(Option<&str>, "NULL"),
    ghost_space: default!(Option<&str>, "NULL"),
    ghost_group: default!(Option<&str>, "NULL"),
) -> Vec<String> {
    tags::internal_tags(&args(internal_type, ghost_type, ghost_owner, ghost_space, ghost_group)).or_raise()
}

/// `internal_tags` minus `ghost`/`agent`: the tags every scoped read ANDs in.
#[pg_extern(immutable, parallel_safe)]
fn scope_tags(
    internal_type: Option<&str>,
    ghost_type: default!(Option<&str>, "NULL"),
    ghost_owner: default!(Option<&str>, "NULL"),
    ghost_space: default!(Option<&str>, "NULL"),
    ghost_group: default!(Option<&str>, "NULL"),
) -> Vec<String> {
    tags::scope_tags(&args(internal_type, ghost_type, ghost_owner, ghost_space, ghost_group)).or_raise()
}

/// The scope tags a tag set carries, sorted: a canonical scope key.
#[pg_extern(immutable, parallel_safe, strict)]
fn _scope_of(tags: Vec<Option<String>>) -> Vec<String> {
    let tags: Vec<&str> = tags.iter().flatten().map(String::as_str).collect();
    tags::scope_of(&tags)
}
