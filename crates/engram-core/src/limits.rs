//! Every limit on what a caller may send, in one place: the extension
//! checks them (its SQL reads them through `engram._limit(name)`, folded
//! into each plan as a constant) and the adapter checks them again before
//! it embeds anything, so both refuse the same values. docs/SQL.md lists
//! them.

/// Largest memory content accepted, in bytes (256 KiB). Memories are facts,
/// events and procedures, not documents; the limit also keeps the full-text
/// vector far below Postgres' 1 MiB tsvector limit.
pub const MAX_CONTENT_BYTES: usize = 256 * 1024;
/// Longest search query text, in bytes.
pub const MAX_QUERY_BYTES: usize = 64 * 1024;
/// Most tags on one memory.
pub const MAX_TAGS: usize = 64;
/// Longest tag, in bytes.
pub const MAX_TAG_BYTES: usize = 256;
/// Largest metadata document, in bytes of its JSON text.
pub const MAX_METADATA_BYTES: usize = 64 * 1024;
/// Largest embedding dimension (pgvector's HNSW limit for `vector`).
pub const MAX_DIMS: i32 = 2000;
/// Most ids in one consolidate/crystallize call.
pub const MAX_MERGE_IDS: usize = 100;
/// Longest time to live, in days (100 years of 365 days): `now() + ttl`
/// stays a timestamp. An interval of '100 years' is within it (Postgres
/// compares a month as 30 days).
pub const MAX_TTL_DAYS: u32 = 36_500;
/// Default and largest number of search results.
pub const DEFAULT_K: i32 = 10;
pub const MAX_K: i32 = 100;

/// The limits SQL reads by name (`engram._limit`).
pub fn by_name(name: &str) -> Option<i64> {
    Some(match name {
        "content_bytes" => MAX_CONTENT_BYTES as i64,
        "query_bytes" => MAX_QUERY_BYTES as i64,
        "tags" => MAX_TAGS as i64,
        "tag_bytes" => MAX_TAG_BYTES as i64,
        "metadata_bytes" => MAX_METADATA_BYTES as i64,
        "dims" => i64::from(MAX_DIMS),
        "merge_ids" => MAX_MERGE_IDS as i64,
        "ttl_days" => i64::from(MAX_TTL_DAYS),
        "k" => i64::from(MAX_K),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_its_constant() {
        assert_eq!(by_name("query_bytes"), Some(65_536));
        assert_eq!(by_name("ttl_days"), Some(36_500));
        assert_eq!(by_name("k"), Some(100));
        assert_eq!(by_name("content_bytes"), Some(262_144));
        assert_eq!(by_name("nope"), None);
    }
}
