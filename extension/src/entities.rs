//! SQL bindings of engram-core's entity rules (`entities`): what the
//! memories' entity triggers index, and the key a name is matched by.

use pgrx::prelude::*;

/// The entities of a memory: those its `entity:NAME` tags name, then those
/// its content holds (engram-core's rules), with their matching keys.
#[pg_extern(immutable, parallel_safe)]
fn _entities(
    content: Option<&str>,
    tags: Option<Vec<Option<String>>>,
) -> TableIterator<'static, (name!(key, String), name!(name, String), name!(kind, String))> {
    let tags: Vec<String> = tags.unwrap_or_default().into_iter().flatten().collect();
    let found = engram_core::entities::of_memory(content.unwrap_or_default(), &tags);
    TableIterator::new(found.into_iter().map(|e| (e.key, e.name, e.kind.name().to_string())))
}

/// The key a name is matched by: case and accents folded ("José" -> "jose").
#[pg_extern(immutable, parallel_safe, strict)]
fn _entity_key(name: &str) -> String {
    engram_core::entities::key(name)
}

/// The entities of a memory as the index holds them since 0.19.0: each
/// with whether a tag named it (`pinned`: an `entity:NAME` tag keeps the
/// name as written; no alias merge moves it).
#[pg_extern(immutable, parallel_safe)]
fn _memory_entities(
    content: Option<&str>,
    tags: Option<Vec<Option<String>>>,
) -> TableIterator<
    'static,
    (
        name!(key, String),
        name!(name, String),
        name!(kind, String),
        name!(pinned, bool),
    ),
> {
    let tags: Vec<String> = tags.unwrap_or_default().into_iter().flatten().collect();
    let tagged: Vec<String> = engram_core::entities::from_tags(&tags)
        .into_iter()
        .map(|e| e.key)
        .collect();
    let found = engram_core::entities::of_memory(content.unwrap_or_default(), &tags);
    TableIterator::new(found.into_iter().map(move |e| {
        let pinned = tagged.contains(&e.key);
        (e.key, e.name, e.kind.name().to_string(), pinned)
    }))
}
