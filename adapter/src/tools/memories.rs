//! Group `core`: the nine core memory tools, and the embedding, ghost
//! routing and listing they share with the internal tools.

use super::*;
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// ---- arguments ---------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
pub struct RememberArgs {
    /// The fact, event or procedure to remember, in plain language (at most 256 KiB).
    pub content: String,
    /// semantic (a fact; default), episodic (an event, never a conflict) or procedural (how to do something).
    pub kind: Option<String>,
    /// Tags to file the memory under, e.g. ["project:apollo", "preference"].
    pub tags: Option<Vec<String>>,
    /// Extra structured data (a JSON object).
    pub metadata: Option<Value>,
    /// Forget automatically after this many days.
    pub ttl_days: Option<f64>,
    /// 0..1, default 0.5.
    pub importance: Option<f32>,
    /// Store it beside the memories it conflicts with; closes nothing.
    pub force: Option<bool>,
    /// Ids of the memories this one replaces: exactly these stop being valid (memory_reopen undoes it).
    pub supersedes: Option<Vec<String>>,
    /// Who may see it through your ghost: 1 (anyone) to 5 (only those you trust fully; default).
    pub access_level: Option<i32>,
    /// When it happened (ISO 8601, e.g. "2025-03-14T09:30:00Z"); default now.
    pub occurred_at: Option<String>,
    /// Since when the fact holds (ISO 8601); default occurred_at.
    pub valid_from: Option<String>,
    /// Until when the fact held (ISO 8601), when it no longer holds; leave it out while it still does.
    pub valid_to: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// What to look for, in natural language; exact tokens (error codes, ids) are matched too.
    pub query: String,
    /// Results to return (1-100, default 10).
    pub limit: Option<i32>,
    /// Only these kinds: semantic, episodic, procedural.
    pub kinds: Option<Vec<String>>,
    /// Only memories carrying every one of these tags.
    pub tags: Option<Vec<String>>,
    /// Answer for a past moment (ISO 8601): the memories valid then, including facts since superseded. Default:
    /// what is valid now.
    pub valid_at: Option<String>,
    /// Answer as the store stood at this moment (ISO 8601): memories written later are absent, updated ones show
    /// the content they had then.
    pub known_at: Option<String>,
    /// The moment relative times in the query ("last week", "yesterday") are read from (ISO 8601); default now.
    pub reference_time: Option<String>,
    /// Only memories about this person, project, place or thing (memory_entities lists them; case and accents
    /// ignored).
    pub entity: Option<String>,
    /// Leave out hits less similar than this (cosine, -1..1; e.g. 0.3 drops unrelated ones); exact word matches
    /// are kept. Default: the server's relevance floor (0.15) for hits that share no word with the query.
    pub min_similarity: Option<f32>,
    /// "session": find conversations, not single memories: `limit` sessions, each with up to 3 of its best
    /// turns ("when did we talk about X?").
    pub group_by: Option<String>,
    /// Conditions on each memory's metadata (or a keyed memory's value): {"team": "core", "n": {"$gte": 2}};
    /// operators $eq $ne $gt $gte $lt $lte $in.
    pub filter: Option<Value>,
    /// Only keyed memories under this namespace, e.g. ["users", "alice"].
    pub namespace_prefix: Option<Vec<String>>,
}

/// What a search keeps and when it answers for (memory_search's kinds,
/// tags, valid_at, known_at and reference_time, as given).
#[derive(Default)]
pub(super) struct Filters {
    pub kinds: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    pub valid_at: Option<String>,
    pub known_at: Option<String>,
    pub reference_time: Option<String>,
    pub entity: Option<String>,
    pub min_similarity: Option<f32>,
    pub group_by: Option<String>,
    pub filter: Option<Value>,
    pub namespace_prefix: Option<Vec<String>>,
}

impl From<SearchArgs> for Filters {
    fn from(a: SearchArgs) -> Filters {
        Filters {
            kinds: a.kinds,
            tags: a.tags,
            valid_at: a.valid_at,
            known_at: a.known_at,
            reference_time: a.reference_time,
            entity: a.entity,
            min_similarity: a.min_similarity,
            group_by: a.group_by,
            filter: a.filter,
            namespace_prefix: a.namespace_prefix,
        }
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct QueryArgs {
    /// What the prompt needs to know, in natural language.
    pub query: String,
    /// Memories to include (1-100, default 5).
    pub limit: Option<i32>,
    /// Most characters of the prompt-ready context (default 2000).
    pub max_chars: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
pub struct IdArgs {
    /// The memory id (a UUID from memory_search or memory_list).
    pub id: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct UpdateArgs {
    /// The memory id (a UUID from memory_search or memory_list).
    pub id: String,
    /// New content (it is re-embedded; the old version is kept as a revision).
    pub content: Option<String>,
    /// Replaces the tags.
    pub tags: Option<Vec<String>>,
    /// Replaces the metadata (a JSON object).
    pub metadata: Option<Value>,
    /// Why it changed (kept in the revision history).
    pub reason: Option<String>,
    /// New access level (1-5) for your ghost's conversations.
    pub access_level: Option<i32>,
    /// When the fact stopped holding (ISO 8601): it is no longer returned by default, and still found with
    /// valid_at before that moment.
    pub valid_to: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ForgetArgs {
    /// The memory id (a UUID from memory_search or memory_list).
    pub id: String,
    /// Why it is forgotten.
    pub reason: Option<String>,
    /// Erase it with its history instead of archiving it (right to erasure).
    pub hard: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ReopenArgs {
    /// The memory id (a UUID from memory_search with valid_at, or memory_list).
    pub id: String,
    /// Why it holds again.
    pub reason: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct ReopenResult {
    pub id: String,
    /// true: valid again (and its supersession flag lifted); false: it was neither closed nor superseded.
    pub reopened: bool,
}

#[derive(Deserialize, JsonSchema)]
pub struct FlagArgs {
    /// The memory id (a UUID from memory_search or memory_list).
    pub id: String,
    /// Why the memory looks wrong or doubtful.
    pub reason: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct ListArgs {
    /// Only these kinds: semantic, episodic, procedural.
    pub kinds: Option<Vec<String>>,
    /// Only memories carrying every one of these tags.
    pub tags: Option<Vec<String>>,
    /// active (default), archived or expired.
    pub status: Option<String>,
    /// created_at (default), updated_at, trust_score, importance or access_count.
    pub order_by: Option<String>,
    /// Newest/highest first (default true).
    pub descending: Option<bool>,
    /// Page size (1-1000, default 50).
    pub limit: Option<i32>,
    /// next_cursor of the previous page.
    pub cursor: Option<String>,
    /// List what was valid at this moment (ISO 8601) instead of now, including facts since superseded.
    pub valid_at: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ConsolidateArgs {
    /// Ids of the memories to merge; they are archived and point to the new one.
    pub ids: Vec<String>,
    /// The merged memory's content.
    pub content: String,
    /// Tags of the merged memory (default: the union of the originals').
    pub tags: Option<Vec<String>>,
    /// Kind of the merged memory (default: the originals' kind).
    pub kind: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct CrystallizeArgs {
    /// Ids of the memories (episodes, notes) the skill is learned from.
    pub ids: Vec<String>,
    /// A short name for the skill, e.g. "deploy-to-staging".
    pub name: String,
    /// The procedure, step by step.
    pub content: String,
}

#[derive(Serialize, JsonSchema)]
pub struct RememberResult {
    /// created, duplicate (an identical memory exists: id) or conflict (similar memories: see conflicts; nothing written).
    pub status: String,
    pub id: Option<String>,
    /// [{id, content, similarity, reasons}]: the memories this one conflicts with, and why (similar,
    /// correction, changed_value, negation).
    pub conflicts: Option<Value>,
    /// With a conflict: what to do next.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// What a conflict answer tells the caller to do: the rules' reasons are
/// hints, so nothing is closed unless the caller names it.
pub const CONFLICT_HINT: &str = "Nothing was written. If the new memory replaces some of these, call again with \
     supersedes=[their ids] (exactly those stop being valid; memory_reopen undoes it). If both hold, call again \
     with force=true (stored alongside; nothing is closed). Or update or forget one of them.";

#[derive(Serialize, JsonSchema)]
pub struct Hit {
    pub id: String,
    pub content: String,
    pub kind: String,
    pub tags: Vec<String>,
    /// Its structured data (left out when empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    #[serde(serialize_with = "score::serialize")]
    pub score: f32,
    #[serde(serialize_with = "score::opt::serialize")]
    pub similarity: Option<f32>,
    /// When what it tells happened.
    pub occurred_at: Option<String>,
    /// The period its fact holds: from valid_from until valid_to (null while it still holds).
    pub valid_from: Option<String>,
    pub valid_to: Option<String>,
    /// The conversation it belongs to (left out when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The time a query names, as a half-open period [start, end); an open side is null.
#[derive(Serialize, JsonSchema, Debug, PartialEq)]
pub struct TimeWindow {
    pub start: Option<String>,
    pub end: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct SearchResult {
    /// Best first; with group_by "session", grouped by session, best session first.
    pub results: Vec<Hit>,
    /// The time the query names ("last week", "in May 2023"), read against reference_time: memories that
    /// happened in it rank higher. Null when the query names no time.
    pub time_window: Option<TimeWindow>,
    /// Said when nothing was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a search found, and the time window it read from the query.
pub(super) struct Found {
    pub hits: Vec<Hit>,
    pub time_window: Option<TimeWindow>,
}

#[derive(Serialize, JsonSchema)]
pub struct QueryResult {
    pub results: Vec<Hit>,
    /// The hits formatted for a prompt, within max_chars.
    pub context: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Memory {
    pub id: String,
    pub content: String,
    pub kind: String,
    pub source: String,
    pub tags: Vec<String>,
    /// The memory's structured data (a JSON object).
    pub metadata: Value,
    pub status: String,
    #[serde(serialize_with = "score::serialize")]
    pub importance: f32,
    #[serde(serialize_with = "score::serialize")]
    pub trust_score: f32,
    #[serde(serialize_with = "score::serialize")]
    pub staleness_score: f32,
    pub revision_count: i64,
    pub access_count: i64,
    pub created_at: String,
    pub updated_at: String,
    /// When what it tells happened.
    pub occurred_at: String,
    /// The period its fact holds: from valid_from until valid_to (null while it still holds).
    pub valid_from: String,
    pub valid_to: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct RecallResult {
    pub memory: Memory,
}

#[derive(Serialize, JsonSchema)]
pub struct UpdateResult {
    pub id: String,
    pub revision: i32,
}

#[derive(Serialize, JsonSchema)]
pub struct ForgetResult {
    pub id: String,
    pub forgotten: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct FlagResult {
    pub id: String,
    #[serde(serialize_with = "score::serialize")]
    pub trust_score: f32,
}

#[derive(Serialize, JsonSchema)]
pub struct Listed {
    pub id: String,
    pub content: String,
    pub kind: String,
    pub tags: Vec<String>,
    pub status: String,
    #[serde(serialize_with = "score::serialize")]
    pub importance: f32,
    #[serde(serialize_with = "score::serialize")]
    pub trust_score: f32,
    pub created_at: String,
    pub occurred_at: String,
    pub valid_from: String,
    pub valid_to: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct ListResult {
    pub memories: Vec<Listed>,
    /// Pass as cursor for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct IdResult {
    pub id: String,
}

/// A query to search with: not empty (an empty query would rank memories
/// arbitrarily; memory_list lists them), within the size limit.
pub(crate) fn check_query(query: &str) -> Result<(), String> {
    if query.trim().is_empty() {
        return Err(
            "query is empty; say what to look for in a few words (memory_list lists memories without a query)".into(),
        );
    }
    check_size("query", query, MAX_QUERY_BYTES)
}

/// A moment a caller gives (occurred_at, valid_at, ...): ISO 8601, a date
/// ("2025-03-14", midnight UTC) or a date and time with an offset or Z
/// ("2025-03-14T09:30:00Z"; a time without an offset is UTC), as RFC 3339
/// for the database.
pub(crate) fn moment(name: &str, value: Option<&str>) -> Result<Option<String>, String> {
    use chrono::{DateTime, NaiveDate, NaiveDateTime};
    let Some(v) = value.map(str::trim) else { return Ok(None) };
    let parsed = DateTime::parse_from_rfc3339(v)
        .map(|t| t.to_utc())
        .or_else(|_| NaiveDateTime::parse_from_str(v, "%Y-%m-%dT%H:%M:%S%.f").map(|t| t.and_utc()))
        .or_else(|_| NaiveDateTime::parse_from_str(v, "%Y-%m-%d %H:%M:%S%.f").map(|t| t.and_utc()))
        .or_else(|_| NaiveDateTime::parse_from_str(v, "%Y-%m-%dT%H:%M").map(|t| t.and_utc()))
        .or_else(|_| {
            NaiveDate::parse_from_str(v, "%Y-%m-%d").map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
        });
    match parsed {
        Ok(t) => Ok(Some(t.to_rfc3339())),
        Err(_) => Err(format!(
            "{name} '{}' is not a moment; pass an ISO 8601 date or time such as \"2025-03-14\" or \
             \"2025-03-14T09:30:00Z\", or leave it out",
            clip(v)
        )),
    }
}

/// metadata, when given, is a JSON object (the database says so too, in SQL's words).
pub(crate) fn check_metadata(metadata: Option<&Value>) -> Result<(), String> {
    match metadata {
        Some(m) if !m.is_object() => {
            Err("metadata must be a JSON object, e.g. {\"source\": \"meeting notes\"}; leave it out for none".into())
        }
        _ => Ok(()),
    }
}

/// Characters of each conflicting memory's content in a conflict answer
/// (memory_recall reads the whole memory).
const CONFLICT_CONTENT_CHARS: usize = 1000;

/// A conflict answer names up to five memories of up to 256 KiB each: the
/// answer carries the start of each one's content, enough to decide.
pub(crate) fn shorten_conflicts(mut conflicts: Value) -> Value {
    for c in conflicts.as_array_mut().into_iter().flatten() {
        if let Some(Value::String(text)) = c.get_mut("content") {
            if text.chars().count() > CONFLICT_CONTENT_CHARS {
                *text = text.chars().take(CONFLICT_CONTENT_CHARS).collect::<String>() + "…";
            }
        }
    }
    conflicts
}

/// ttl_days above 0 and within the database's limit (engram-core's).
pub(super) fn check_ttl(ttl_days: Option<f64>) -> Result<(), String> {
    const MAX_TTL_DAYS: f64 = engram_core::limits::MAX_TTL_DAYS as f64;
    match ttl_days {
        Some(d) if !(d.is_finite() && d > 0.0 && d <= MAX_TTL_DAYS) => Err(format!(
            "ttl_days must be a number of days above 0 and at most {MAX_TTL_DAYS}; leave it out to keep the memory \
             until it is forgotten"
        )),
        _ => Ok(()),
    }
}

/// A cursor for memory_list: what an earlier page's next_cursor was, for
/// the same order_by. Checked here so that a forged one answers "invalid
/// cursor" rather than the database's failure to read the value in it.
pub(crate) fn check_cursor(cursor: Option<&str>, order_by: Option<&str>) -> Result<(), String> {
    let Some(cursor) = cursor else { return Ok(()) };
    let order_by = order_by.unwrap_or("created_at");
    let invalid = |why: &str| {
        format!(
            "invalid cursor: {why}. Pass the next_cursor of the previous memory_list page unchanged (with the same \
             order_by), or leave cursor out to start from the first page."
        )
    };
    let (value, id) = engram_core::cursor::decode(cursor, order_by).map_err(|e| invalid(&e.message))?;
    Uuid::parse_str(&id).map_err(|_| invalid("it does not end in a memory id"))?;
    let ok = match order_by {
        "created_at" | "updated_at" => is_timestamp(&value),
        _ => value.parse::<f64>().is_ok_and(f64::is_finite),
    };
    if !ok {
        return Err(invalid("it does not hold a value of a memory_list page"));
    }
    Ok(())
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, a real date and time (what engram.list
/// writes into its cursors).
fn is_timestamp(v: &str) -> bool {
    if !v.is_ascii() {
        return false;
    }
    let b = v.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r.clone()).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let num = |r: std::ops::Range<usize>| v[r].parse::<u32>().unwrap_or(0);
    if b.len() != 27
        || !(digits(0..4) && digits(5..7) && digits(8..10) && digits(11..13) && digits(14..16) && digits(17..19))
        || !digits(20..26)
        || &v[4..5] != "-"
        || &v[7..8] != "-"
        || &v[10..11] != "T"
        || &v[13..14] != ":"
        || &v[16..17] != ":"
        || &v[19..20] != "."
        || &v[26..27] != "Z"
    {
        return false;
    }
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    year >= 1 && (1..=days).contains(&day) && num(11..13) < 24 && num(14..16) < 60 && num(17..19) < 60
}

impl EngramServer {
    pub(super) async fn remember_in(
        &self,
        c: &Caller,
        i: Option<&Internal>,
        a: RememberArgs,
    ) -> Result<RememberResult, String> {
        check_size("content", &a.content, MAX_CONTENT_BYTES)?;
        check_metadata(a.metadata.as_ref())?;
        check_ttl(a.ttl_days)?;
        let occurred_at = moment("occurred_at", a.occurred_at.as_deref())?;
        let valid_from = moment("valid_from", a.valid_from.as_deref())?;
        let valid_to = moment("valid_to", a.valid_to.as_deref())?;
        let kind = a.kind.unwrap_or_else(|| "semantic".into());
        let embedding = match i {
            None => {
                self.shared
                    .embed_memory(c, Some(&kind), &a.content, occurred_at.as_deref())
                    .await?
            }
            Some(_) => self.embed(c, &a.content).await?,
        };
        let tags = stamped(a.tags, i).unwrap_or_default();
        let metadata = a.metadata.unwrap_or_else(|| Value::Object(Default::default()));
        let internal_type = i.map(|i| i.internal_type.clone());
        let supersedes = a
            .supersedes
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|id| parse_id(id))
            .collect::<Result<Vec<_>, _>>()?;
        let rows = self
            .shared
            .db
            .call(
                c,
                "SELECT status, id::text, conflicts FROM engram.remember(content => $1, embedding => $2, kind => $3,
                     tags => $4, metadata => $5, ttl => $6::float8 * interval '1 day', importance => $7,
                     internal_type => $8, session_id => $9, force => $10, conflict_threshold => $11,
                     access_level => coalesce($12, 5), occurred_at => $13::text::timestamptz,
                     valid_from => $14::text::timestamptz, valid_to => $15::text::timestamptz,
                     supersedes => $16)",
                &[
                    &a.content,
                    &embedding,
                    &kind,
                    &tags,
                    &metadata,
                    &a.ttl_days,
                    &a.importance.unwrap_or(0.5),
                    &internal_type,
                    &c.session_id,
                    &a.force.unwrap_or(false),
                    &self.shared.conflict_threshold,
                    &a.access_level,
                    &occurred_at,
                    &valid_from,
                    &valid_to,
                    &supersedes,
                ],
            )
            .await
            .map_err(|e| db_error(e, None))?;
        let r = first(&rows)?;
        let status: String = r.col(0)?;
        Ok(RememberResult {
            hint: (status == "conflict").then(|| CONFLICT_HINT.to_string()),
            status,
            id: r.col(1)?,
            conflicts: r.col::<Option<Value>>(2)?.map(shorten_conflicts),
        })
    }

    pub(super) async fn search_in(
        &self,
        c: &Caller,
        i: Option<&Internal>,
        query: &str,
        limit: Option<i32>,
        f: Filters,
    ) -> Result<Found, String> {
        check_query(query)?;
        let valid_at = moment("valid_at", f.valid_at.as_deref())?;
        let known_at = moment("known_at", f.known_at.as_deref())?;
        let reference_time = moment("reference_time", f.reference_time.as_deref())?;
        let (kinds, tags, entity) = (f.kinds, f.tags, f.entity);
        let (min_similarity, filter, namespace_prefix) = (f.min_similarity, f.filter, f.namespace_prefix);
        let group_by = f.group_by;
        check_opt("entity", entity.as_deref(), 200)?;
        let embedding = self.embed(c, query).await?;
        // One statement: the hits, each with the window the search read from the query (with
        // the session's time zone); when there are none, one row without an id carrying the
        // window alone (engram.time_window, evaluated only then), so that an empty answer
        // still says which time it read.
        const COLUMNS: &str = "id::text, content, kind, tags, score, similarity, to_jsonb(occurred_at) #>> '{}', to_jsonb(valid_from) #>> '{}',
                               to_jsonb(valid_to) #>> '{}', metadata, session";
        const WINDOW: &str =
            "to_jsonb(lower(time_window)) #>> '{}', to_jsonb(upper(time_window)) #>> '{}', time_window IS NOT NULL";
        let with_window = |hits: &str, window: &str| {
            format!(
                "WITH h AS MATERIALIZED ({hits})
                 SELECT * FROM h
                 UNION ALL
                 SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, {WINDOW}
                 FROM (SELECT {window} AS time_window) w
                 WHERE NOT EXISTS (SELECT 1 FROM h) AND w.time_window IS NOT NULL"
            )
        };
        let rows = match (i, ghost(c)) {
            // Core reads in a ghost conversation: what the ghost may show, as it is now.
            (None, Some((ghost_type, ghost_id))) => {
                if valid_at.is_some() || known_at.is_some() || entity.is_some() {
                    return Err("A ghost shows what holds now; leave valid_at, known_at and entity out.".into());
                }
                if min_similarity.is_some() || filter.is_some() || namespace_prefix.is_some() || group_by.is_some() {
                    return Err(
                        "A ghost search takes query, limit, kinds and tags; leave min_similarity, filter, \
                                namespace_prefix and group_by out."
                            .into(),
                    );
                }
                let sql = with_window(
                    &format!(
                        "SELECT {COLUMNS}, {WINDOW}
                         FROM (SELECT g.*, NULL::text AS session FROM engram.ghost_search(ghost_type => $1, ghost_id => $2,
                             query_embedding => $3, query_text => $4, k => $5, kinds => $6, tags_all => $7) g) g,
                         engram.time_window($4, now()) time_window"
                    ),
                    "engram.time_window($4, now())",
                );
                self.shared
                    .db
                    .call(
                        c,
                        &sql,
                        &[&ghost_type, &ghost_id, &embedding, &query, &limit, &kinds, &tags],
                    )
                    .await
            }
            _ => {
                let internal_type = i.map(|i| i.internal_type.clone());
                let scope = i.map(|i| i.scope.clone());
                // the reference engram.search reads the window against: reference_time, else
                // known_at when past, else now
                let sql = with_window(
                    &format!(
                        "SELECT {COLUMNS}, {WINDOW}
                         FROM engram.search(query_embedding => $1, query_text => $2, k => $3, kinds => $4,
                             tags_all => $5, internal_type => $6, scope_tags => $7,
                             valid_at => $8::text::timestamptz, known_at => $9::text::timestamptz,
                             reference_time => $10::text::timestamptz, entity => $11::text,
                             min_similarity => $12::real, filter => $13::jsonb,
                             namespace_prefix => $14::text[], group_by => $15::text)"
                    ),
                    "engram.time_window($2, coalesce($10::text::timestamptz, least($9::text::timestamptz, now()), now()))",
                );
                self.shared
                    .db
                    .call(
                        c,
                        &sql,
                        &[
                            &embedding,
                            &query,
                            &limit,
                            &kinds,
                            &tags,
                            &internal_type,
                            &scope,
                            &valid_at,
                            &known_at,
                            &reference_time,
                            &entity,
                            &min_similarity,
                            &filter,
                            &namespace_prefix,
                            &group_by,
                        ],
                    )
                    .await
            }
        };
        let mut rows = rows.map_err(|e| db_error(e, None))?;
        let time_window = match rows.first() {
            Some(r) if r.col::<bool>(13)? => Some(TimeWindow {
                start: r.col(11)?,
                end: r.col(12)?,
            }),
            _ => None,
        };
        // the window's own row is no hit
        rows.retain(|r| r.col::<Option<String>>(0).is_ok_and(|id| id.is_some()));
        let hits = rows
            .iter()
            .map(|r| {
                let metadata: Option<Value> = r.col(9)?;
                Ok(Hit {
                    id: r.col(0)?,
                    content: r.col(1)?,
                    kind: r.col(2)?,
                    tags: r.col(3)?,
                    metadata: metadata.filter(|m| m.as_object().is_none_or(|o| !o.is_empty())),
                    score: r.col(4)?,
                    similarity: r.col(5)?,
                    occurred_at: r.col(6)?,
                    valid_from: r.col(7)?,
                    valid_to: r.col(8)?,
                    session_id: r.col(10)?,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Found { hits, time_window })
    }

    pub(super) async fn recall_in(&self, c: &Caller, id: &str) -> Result<Memory, String> {
        let uuid = parse_id(id)?;
        const COLUMNS: &str = "id::text, content, kind, source, tags, metadata, status, importance, trust_score,
                               staleness_score, revision_count, access_count, to_jsonb(created_at) #>> '{}', to_jsonb(updated_at) #>> '{}',
                               to_jsonb(occurred_at) #>> '{}', to_jsonb(valid_from) #>> '{}', to_jsonb(valid_to) #>> '{}'";
        let rows = match ghost(c) {
            Some((ghost_type, ghost_id)) => {
                self.shared
                    .db
                    .call(
                        c,
                        &format!(
                            "SELECT {COLUMNS} FROM engram.ghost_recall(ghost_type => $1, ghost_id => $2, id => $3)"
                        ),
                        &[&ghost_type, &ghost_id, &uuid],
                    )
                    .await
            }
            None => {
                self.shared
                    .db
                    .call(c, &format!("SELECT {COLUMNS} FROM engram.recall(id => $1)"), &[&uuid])
                    .await
            }
        }
        .map_err(|e| db_error(e, Some(id)))?;
        // ghost_recall answers "not found" with no row
        let r = rows
            .first()
            .ok_or_else(|| format!("Memory {id} not found. Use memory_search or memory_list to find it."))?;
        Ok(Memory {
            id: r.col(0)?,
            content: r.col(1)?,
            kind: r.col(2)?,
            source: r.col(3)?,
            tags: r.col(4)?,
            metadata: r.col(5)?,
            status: r.col(6)?,
            importance: r.col(7)?,
            trust_score: r.col(8)?,
            staleness_score: r.col(9)?,
            revision_count: r.col(10)?,
            access_count: r.col(11)?,
            created_at: r.col(12)?,
            updated_at: r.col(13)?,
            occurred_at: r.col(14)?,
            valid_from: r.col(15)?,
            valid_to: r.col(16)?,
        })
    }

    pub(super) async fn update_in(
        &self,
        c: &Caller,
        i: Option<&Internal>,
        a: UpdateArgs,
    ) -> Result<UpdateResult, String> {
        let uuid = parse_id(&a.id)?;
        check_metadata(a.metadata.as_ref())?;
        check_opt("reason", a.reason.as_deref(), MAX_REASON_CHARS)?;
        let valid_to = moment("valid_to", a.valid_to.as_deref())?;
        let embedding = match &a.content {
            Some(text) => {
                check_size("content", text, MAX_CONTENT_BYTES)?;
                Some(self.embed(c, text).await?)
            }
            None => None,
        };
        let tags = if a.tags.is_some() { stamped(a.tags, i) } else { None };
        let internal_type = i.map(|i| i.internal_type.clone());
        let scope = i.map(|i| i.scope.clone());
        let rows = self
            .shared
            .db
            .call(
                c,
                "SELECT engram.update(id => $1, content => $2, embedding => $3, tags => $4, metadata => $5,
                     reason => $6, internal_type => $7, scope_tags => $8, access_level => $9,
                     valid_to => $10::text::timestamptz)",
                &[
                    &uuid,
                    &a.content,
                    &embedding,
                    &tags,
                    &a.metadata,
                    &a.reason,
                    &internal_type,
                    &scope,
                    &a.access_level,
                    &valid_to,
                ],
            )
            .await
            .map_err(|e| db_error(e, Some(&a.id)))?;
        Ok(UpdateResult {
            id: uuid.to_string(),
            revision: first(&rows)?.col(0)?,
        })
    }

    pub(super) async fn list_in(&self, c: &Caller, i: Option<&Internal>, a: ListArgs) -> Result<ListResult, String> {
        const COLUMNS: &str =
            "id::text, content, kind, tags, status, importance, trust_score, to_jsonb(created_at) #>> '{}', next_cursor,
             to_jsonb(occurred_at) #>> '{}', to_jsonb(valid_from) #>> '{}', to_jsonb(valid_to) #>> '{}'";
        check_cursor(a.cursor.as_deref(), a.order_by.as_deref())?;
        let valid_at = moment("valid_at", a.valid_at.as_deref())?;
        let rows = match (i, ghost(c)) {
            (None, Some((ghost_type, ghost_id))) => {
                if a.status.as_deref().is_some_and(|s| s != "active") {
                    return Err("A ghost shows only active memories; leave status out.".into());
                }
                if valid_at.is_some() {
                    return Err("A ghost shows what holds now; leave valid_at out.".into());
                }
                self.shared
                    .db
                    .call(
                        c,
                        &format!(
                            "SELECT {COLUMNS} FROM engram.ghost_list(ghost_type => $1, ghost_id => $2, kinds => $3,
                                 tags_all => $4, order_by => $5, descending => $6, \"limit\" => $7, after => $8)"
                        ),
                        &[
                            &ghost_type,
                            &ghost_id,
                            &a.kinds,
                            &a.tags,
                            &a.order_by,
                            &a.descending,
                            &a.limit,
                            &a.cursor,
                        ],
                    )
                    .await
            }
            _ => {
                let internal_type = i.map(|i| i.internal_type.clone());
                let scope = i.map(|i| i.scope.clone());
                self.shared
                    .db
                    .call(
                        c,
                        &format!(
                            "SELECT {COLUMNS} FROM engram.list(kinds => $1, tags_all => $2, internal_type => $3,
                                 scope_tags => $4, status => $5, order_by => $6, descending => $7,
                                 \"limit\" => $8, after => $9, valid_at => $10::text::timestamptz)"
                        ),
                        &[
                            &a.kinds,
                            &a.tags,
                            &internal_type,
                            &scope,
                            &a.status,
                            &a.order_by,
                            &a.descending,
                            &a.limit,
                            &a.cursor,
                            &valid_at,
                        ],
                    )
                    .await
            }
        }
        .map_err(|e| db_error(e, None))?;
        let next_cursor = match rows.last() {
            Some(r) => r.col::<Option<String>>(8)?,
            None => None,
        };
        Ok(ListResult {
            memories: rows
                .iter()
                .map(|r| {
                    Ok(Listed {
                        id: r.col(0)?,
                        content: r.col(1)?,
                        kind: r.col(2)?,
                        tags: r.col(3)?,
                        status: r.col(4)?,
                        importance: r.col(5)?,
                        trust_score: r.col(6)?,
                        created_at: r.col(7)?,
                        occurred_at: r.col(9)?,
                        valid_from: r.col(10)?,
                        valid_to: r.col(11)?,
                    })
                })
                .collect::<Result<_, String>>()?,
            next_cursor,
        })
    }
}

// Return types are spelled out (not ToolResult<T>): the #[tool] macro reads
// them to publish each tool's outputSchema.
#[tool_router(router = memories_router, vis = "pub(super)")]
impl EngramServer {
    #[tool(
        description = "Remember a fact, event or procedure. Answers created, duplicate (its id) or conflict (the \
                       memories it contradicts; nothing written): then call again with supersedes=[the ids it \
                       replaces], or force=true to keep both.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_remember(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<RememberArgs>,
    ) -> Result<Json<RememberResult>, String> {
        self.run("memory_remember", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            self.remember_in(&c, None, a).await
        })
        .await
    }

    #[tool(
        description = "Search memories by meaning and exact words; best first (score = relevance x trust x freshness).",
        annotations(read_only_hint = true)
    )]
    async fn memory_search(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResult>, String> {
        self.run("memory_search", async {
            let (query, limit) = (a.query.clone(), a.limit);
            let c = caller(&parts)?;
            let floor = a.min_similarity.is_none() && super::ghost(&c).is_none();
            let found = self.search_in(&c, None, &query, limit, a.into()).await?;
            Ok(SearchResult {
                note: found.hits.is_empty().then(|| super::nothing_relevant(floor)),
                results: found.hits,
                time_window: found.time_window,
            })
        })
        .await
    }

    #[tool(description = "Read one memory in full by id.", annotations(read_only_hint = true))]
    async fn memory_recall(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<IdArgs>,
    ) -> Result<Json<RecallResult>, String> {
        self.run("memory_recall", async {
            Ok(RecallResult {
                memory: self.recall_in(&caller(&parts)?, &a.id).await?,
            })
        })
        .await
    }

    #[tool(
        description = "Correct or extend a memory. The previous version is kept as a revision.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_update(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<UpdateArgs>,
    ) -> Result<Json<UpdateResult>, String> {
        self.run("memory_update", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            self.update_in(&c, None, a).await
        })
        .await
    }

    #[tool(
        description = "Forget a memory: archive it (default) or, with hard=true, erase it and its history.",
        annotations(destructive_hint = true)
    )]
    async fn memory_forget(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ForgetArgs>,
    ) -> Result<Json<ForgetResult>, String> {
        self.run("memory_forget", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            let uuid = parse_id(&a.id)?;
            check_opt("reason", a.reason.as_deref(), MAX_REASON_CHARS)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.forget(id => $1, reason => $2, hard => $3)",
                    &[&uuid, &a.reason, &a.hard.unwrap_or(false)],
                )
                .await
                .map_err(|e| db_error(e, Some(&a.id)))?;
            Ok(ForgetResult {
                id: uuid.to_string(),
                forgotten: first(&rows)?.col(0)?,
            })
        })
        .await
    }

    #[tool(
        description = "Reopen a memory that was superseded or whose validity was closed: it is valid again from its \
                       old valid_from and its supersession flag is lifted (undoes a wrong supersedes).",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_reopen(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ReopenArgs>,
    ) -> Result<Json<ReopenResult>, String> {
        self.run("memory_reopen", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            let uuid = parse_id(&a.id)?;
            check_opt("reason", a.reason.as_deref(), MAX_REASON_CHARS)?;
            let rows = self
                .shared
                .db
                .call(&c, "SELECT engram.reopen(id => $1, reason => $2)", &[&uuid, &a.reason])
                .await
                .map_err(|e| db_error(e, Some(&a.id)))?;
            Ok(ReopenResult {
                id: uuid.to_string(),
                reopened: first(&rows)?.col(0)?,
            })
        })
        .await
    }

    #[tool(
        description = "Flag a memory as wrong or doubtful; its trust drops and it ranks lower. Returns the new trust score.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_flag(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<FlagArgs>,
    ) -> Result<Json<FlagResult>, String> {
        self.run("memory_flag", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            let uuid = parse_id(&a.id)?;
            check_len("reason", &a.reason, MAX_REASON_CHARS)?;
            let rows = self
                .shared
                .db
                .call(&c, "SELECT engram.flag(id => $1, reason => $2)", &[&uuid, &a.reason])
                .await
                .map_err(|e| db_error(e, Some(&a.id)))?;
            Ok(FlagResult {
                id: uuid.to_string(),
                trust_score: first(&rows)?.col(0)?,
            })
        })
        .await
    }

    #[tool(
        description = "List memories with filters and ordering, a page at a time (pass next_cursor back as cursor).",
        annotations(read_only_hint = true)
    )]
    async fn memory_list(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ListArgs>,
    ) -> Result<Json<ListResult>, String> {
        self.run("memory_list", async { self.list_in(&caller(&parts)?, None, a).await })
            .await
    }

    #[tool(
        description = "Merge several memories into one; the originals are archived and point to it. All or nothing.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_consolidate(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ConsolidateArgs>,
    ) -> Result<Json<IdResult>, String> {
        self.run("memory_consolidate", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            let ids = parse_ids(&a.ids)?;
            check_size("content", &a.content, MAX_CONTENT_BYTES)?;
            let embedding = self.embed(&c, &a.content).await?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.consolidate(ids => $1, content => $2, embedding => $3, tags => $4, kind => $5)::text",
                    &[&ids, &a.content, &embedding, &a.tags, &a.kind],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(IdResult { id: first(&rows)?.col(0)? })
        })
        .await
    }

    #[tool(
        description = "Turn memories (e.g. the episodes of a task done well) into a reusable, read-only skill.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_crystallize(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<CrystallizeArgs>,
    ) -> Result<Json<IdResult>, String> {
        self.run("memory_crystallize", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            let ids = parse_ids(&a.ids)?;
            check_size("content", &a.content, MAX_CONTENT_BYTES)?;
            let embedding = self.embed(&c, &a.content).await?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.crystallize(ids => $1, name => $2, content => $3, embedding => $4)::text",
                    &[&ids, &a.name, &a.content, &embedding],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(IdResult {
                id: first(&rows)?.col(0)?,
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forged_cursors_are_refused_before_the_database_sees_them() {
        let id = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
        let good = engram_core::cursor::encode("created_at", "2026-11-22T10:00:00.123456Z", id);
        assert!(check_cursor(Some(&good), None).is_ok());
        assert!(check_cursor(None, None).is_ok());
        for value in [
            "not a time",
            "2026-02-30T10:00:00.000000Z",
            "2026-11-22T25:00:00.000000Z",
            "",
        ] {
            let forged = engram_core::cursor::encode("created_at", value, id);
            let e = check_cursor(Some(&forged), None).unwrap_err();
            assert!(e.starts_with("invalid cursor"), "{value}: {e}");
        }
        let e = check_cursor(Some(&good), Some("importance")).unwrap_err();
        assert!(e.starts_with("invalid cursor") && e.contains("order_by"), "{e}");
        assert!(check_cursor(Some("garbage"), None)
            .unwrap_err()
            .starts_with("invalid cursor"));
        let n = engram_core::cursor::encode("importance", "0.5", id);
        assert!(check_cursor(Some(&n), Some("importance")).is_ok());
        let nan = engram_core::cursor::encode("importance", "NaN", id);
        assert!(check_cursor(Some(&nan), Some("importance")).is_err());
        assert!(is_timestamp("2024-02-29T23:59:59.999999Z") && !is_timestamp("2023-02-29T00:00:00.000000Z"));
    }

    #[test]
    fn conflict_answers_carry_the_start_of_each_memory() {
        let long = "x".repeat(300_000);
        let v = shorten_conflicts(serde_json::json!([{"id": "a", "content": long}, {"id": "b", "content": "short"}]));
        assert_eq!(
            v[0]["content"].as_str().unwrap().chars().count(),
            CONFLICT_CONTENT_CHARS + 1
        );
        assert_eq!(v[1]["content"], "short");
        assert_eq!(shorten_conflicts(Value::Null), Value::Null);
    }

    #[test]
    fn moments_are_iso_8601() {
        let ok = |v: &str| moment("valid_at", Some(v)).unwrap().unwrap();
        assert_eq!(ok("2025-03-14"), "2025-03-14T00:00:00+00:00");
        assert_eq!(ok(" 2025-03-14T09:30:00Z "), "2025-03-14T09:30:00+00:00");
        assert_eq!(ok("2025-03-14T09:30:00+02:00"), "2025-03-14T07:30:00+00:00");
        assert_eq!(ok("2025-03-14 09:30:00"), "2025-03-14T09:30:00+00:00");
        assert_eq!(ok("2025-03-14T09:30"), "2025-03-14T09:30:00+00:00");
        assert_eq!(moment("valid_at", None).unwrap(), None);
        for bad in ["next tuesday", "2025-02-30", "14/03/2025", "", "infinity"] {
            let e = moment("known_at", Some(bad)).unwrap_err();
            assert!(e.starts_with("known_at '") && e.contains("ISO 8601"), "{bad}: {e}");
        }
    }

    #[test]
    fn arguments_are_checked_in_the_tools_words() {
        assert!(check_query(" \t").unwrap_err().contains("query is empty"));
        assert!(check_query("tea").is_ok());
        assert!(check_metadata(Some(&serde_json::json!([1])))
            .unwrap_err()
            .contains("JSON object"));
        assert!(check_metadata(Some(&serde_json::json!({}))).is_ok());
        // the database's limit, not a larger one of the adapter's own
        for bad in [1e308, f64::NAN, -1.0, 0.0, 36_501.0] {
            assert!(check_ttl(Some(bad)).unwrap_err().contains("ttl_days"), "{bad}");
        }
        assert!(check_ttl(Some(2.0)).is_ok() && check_ttl(Some(36_500.0)).is_ok() && check_ttl(None).is_ok());
    }
}
