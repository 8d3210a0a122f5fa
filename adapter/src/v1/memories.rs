//! Memories: remember, list, recall, update, forget, reopen, flag,
//! revisions, audit and search.

use super::{acting, check_reason, dotted, embed, moment, ok, one, read, read_refreshing, typed, UserQuery, V1};
use crate::caller::Caller;
use crate::tools::memories::{check_cursor, check_metadata, check_query, shorten_conflicts};
use crate::tools::{Shared, MAX_CONTENT_BYTES, MAX_QUERY_BYTES};
use crate::v1::problem::Problem;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Json};
use axum_extra::extract::Query;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

// ---- what comes in -------------------------------------------------------

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberBody {
    /// The fact, event or procedure, in plain language (at most 256 KiB).
    #[schema(min_length = 1)]
    pub content: String,
    /// semantic (a fact; default), episodic (an event) or procedural (how to do something).
    pub kind: Option<String>,
    pub tags: Option<Vec<String>>,
    /// Structured data (a JSON object), matched by `filter`.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Forget it after this many seconds.
    #[schema(exclusive_minimum = 0.0)]
    pub ttl: Option<f64>,
    /// 0..1, default 0.5.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub importance: Option<f32>,
    /// When what it tells happened (RFC 3339 or a date); default now.
    pub occurred_at: Option<String>,
    /// Since when the fact holds; default occurred_at.
    pub valid_from: Option<String>,
    /// Until when the fact held, when it no longer holds.
    pub valid_to: Option<String>,
    /// Ids of the memories this one replaces: exactly these stop being valid (reopen undoes it).
    pub supersedes: Option<Vec<Uuid>>,
    /// Store it alongside the memories it conflicts with; closes nothing.
    pub force: Option<bool>,
    /// The user to act for (platform tokens).
    pub user_id: Option<String>,
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only these kinds (repeat the parameter for several).
    pub kinds: Option<Vec<String>>,
    /// Only memories carrying every one of these tags.
    pub tags: Option<Vec<String>>,
    /// active (default), archived or expired.
    pub status: Option<String>,
    /// created_at (default), updated_at, trust_score, importance or access_count.
    pub order_by: Option<String>,
    /// Newest/highest first (default true).
    pub descending: Option<bool>,
    /// Page size (default 50; more than 1000 are capped at 1000).
    #[param(minimum = 1)]
    pub limit: Option<i32>,
    /// next_cursor of the previous page.
    pub cursor: Option<String>,
    /// List what was valid at this moment instead of now.
    pub valid_at: Option<String>,
    /// Only keyed memories under this namespace (labels joined by dots: `users.alice`); given empty
    /// (`namespace_prefix=`): every keyed memory.
    #[serde(default, deserialize_with = "super::given")]
    pub namespace_prefix: Option<String>,
    /// A JSON object over each memory's value (else metadata): `{"team": "core", "n": {"$gte": 2}}`;
    /// operators $eq $ne $gt $gte $lt $lte $in.
    pub filter: Option<String>,
    /// Start the lifetime of the listed memories that have a ttl again.
    pub refresh_ttl: Option<bool>,
    /// The user to act for (platform tokens).
    pub user_id: Option<String>,
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ForgetQuery {
    /// Erase it with its history instead of archiving it (right to erasure).
    pub hard: Option<bool>,
    /// Why it is forgotten.
    pub reason: Option<String>,
    /// The user to act for (platform tokens).
    pub user_id: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateBody {
    /// New content (re-embedded; the old version is kept as a revision).
    pub content: Option<String>,
    /// Replaces the tags.
    pub tags: Option<Vec<String>>,
    /// Replaces the metadata (a JSON object).
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Why it changed (kept in the revision history).
    pub reason: Option<String>,
    /// When the fact stopped holding.
    pub valid_to: Option<String>,
    pub user_id: Option<String>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// Why.
    pub reason: Option<String>,
    pub user_id: Option<String>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct SearchBody {
    /// What to look for, in natural language; exact tokens (error codes, ids) are matched too.
    #[schema(min_length = 1)]
    pub query: String,
    /// Results (default 10; more than 100 are capped at 100).
    #[schema(minimum = 1)]
    pub limit: Option<i32>,
    /// Only these kinds.
    pub kinds: Option<Vec<String>>,
    /// Only memories carrying every one of these tags.
    pub tags: Option<Vec<String>>,
    /// A JSON object over each memory's value (else metadata), as in GET /v1/memories.
    #[schema(value_type = Option<Object>)]
    pub filter: Option<Value>,
    /// Only keyed memories under this namespace.
    pub namespace_prefix: Option<Vec<String>>,
    /// Leave out hits less similar than this (cosine, -1..1). Default: none for a search by meaning alone;
    /// for a search by meaning and words, the server's relevance floor (engram.similarity_floor, 0.15) for
    /// hits that share no word with the query.
    pub min_similarity: Option<f32>,
    /// `session`: the best conversations instead of the best memories: `limit` sessions, each with up to 3
    /// of its best turns, best session first (a memory without a session is a group of its own).
    pub group_by: Option<String>,
    /// Answer for a past moment: what was valid then.
    pub valid_at: Option<String>,
    /// Answer as the store stood at this moment.
    pub known_at: Option<String>,
    /// The moment relative times in the query ("last week") are read from; default now.
    pub reference_time: Option<String>,
    /// Only memories about this person, project, place or thing.
    pub entity: Option<String>,
    /// Start the lifetime of the hits that have a ttl again.
    pub refresh_ttl: Option<bool>,
    pub user_id: Option<String>,
}

// ---- what goes out -------------------------------------------------------

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Remembered {
    /// created (a new memory) or duplicate (an identical memory exists: its id).
    pub status: String,
    pub id: Uuid,
}

/// A memory, as listed and recalled.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct Memory {
    pub id: Uuid,
    pub content: String,
    pub kind: String,
    /// memory, resource, summary, ...
    pub source: Option<String>,
    pub tags: Vec<String>,
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// active, archived or expired.
    pub status: String,
    pub importance: Option<f32>,
    pub trust_score: Option<f32>,
    pub staleness_score: Option<f32>,
    pub access_count: Option<i64>,
    pub revision: Option<i32>,
    pub revision_count: Option<i64>,
    pub created_at: String,
    pub updated_at: Option<String>,
    pub expires_at: Option<String>,
    /// When what it tells happened.
    pub occurred_at: Option<String>,
    /// The period its fact holds: from valid_from until valid_to (null while it still holds).
    pub valid_from: Option<String>,
    pub valid_to: Option<String>,
    /// Keyed memories: the namespace and key (null otherwise), and the value.
    pub namespace: Option<Vec<String>>,
    pub key: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub value: Option<Value>,
    /// (recall) agent, human or system.
    pub author_type: Option<String>,
    /// (recall) How often it was flagged as wrong, and when last.
    pub flag_count: Option<i32>,
    pub flagged_at: Option<String>,
    pub correction_count: Option<i32>,
    /// (recall) Why it was archived, and the memory it was merged into.
    pub archive_reason: Option<String>,
    pub merged_into: Option<Uuid>,
    pub session_id: Option<String>,
    pub last_accessed_at: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct MemoryPage {
    pub memories: Vec<Memory>,
    /// Pass as cursor for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Updated {
    pub id: Uuid,
    /// The memory's revision after the update.
    pub revision: i32,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Forgotten {
    pub id: Uuid,
    pub forgotten: bool,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Reopened {
    pub id: Uuid,
    /// true: valid again; false: it was neither closed nor superseded.
    pub reopened: bool,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Flagged {
    pub id: Uuid,
    /// The memory's trust after the flag.
    pub trust_score: f32,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Revision {
    pub revision: i32,
    pub content: String,
    pub tags: Option<Vec<String>>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub value: Option<Value>,
    pub written_at: Option<String>,
    pub replaced_at: Option<String>,
    pub reason: Option<String>,
    pub is_correction: Option<bool>,
    pub changed_by: Option<String>,
    pub is_current: bool,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Revisions {
    /// Oldest first; the last is the current content.
    pub revisions: Vec<Revision>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct AuditEntry {
    pub at: String,
    pub actor: Option<String>,
    pub action: String,
    #[schema(value_type = Option<Object>)]
    pub details: Option<Value>,
    pub token_label: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Audit {
    pub audit: Vec<AuditEntry>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Hit {
    pub id: Uuid,
    pub content: String,
    pub kind: String,
    pub tags: Vec<String>,
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// Cosine similarity to the query (null for a hit found by words only).
    pub similarity: Option<f32>,
    /// relevance x trust x freshness: the order of the results.
    pub score: f32,
    pub trust_score: Option<f32>,
    pub source: Option<String>,
    pub created_at: Option<String>,
    pub occurred_at: Option<String>,
    pub valid_from: Option<String>,
    pub valid_to: Option<String>,
    pub namespace: Option<Vec<String>>,
    pub key: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub value: Option<Value>,
    /// The conversation it belongs to (null for none).
    pub session_id: Option<String>,
}

/// A period [start, end); an open side is null.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct TimeWindow {
    pub start: Option<String>,
    pub end: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Found {
    /// Best first (with group_by: grouped by session, best session first).
    pub results: Vec<Hit>,
    /// The time the query names ("last week"), read against reference_time; null when it names none.
    pub time_window: Option<TimeWindow>,
    /// Said when nothing was found: nothing matches the query's words or comes close to it in meaning.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
}

// ---- handlers ------------------------------------------------------------

/// Remember a memory. A conflict with memories it paraphrases or contradicts
/// writes nothing and answers 409 with the conflicts: send it again with
/// `supersedes` (the ids it replaces) or `force`.
#[utoipa::path(post, path = "/v1/memories", tag = "memories", request_body = RememberBody,
    responses((status = 201, description = "Stored", body = Remembered),
              (status = 200, description = "An identical memory exists: its id", body = Remembered)))]
pub async fn remember(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Json(b): Json<RememberBody>,
) -> V1<Response> {
    let c = acting(&c, b.user_id.as_deref())?;
    check_metadata(b.metadata.as_ref()).map_err(Problem::bad_request)?;
    super::check_ttl(b.ttl)?;
    let occurred_at = moment("occurred_at", b.occurred_at.as_deref())?;
    let valid_from = moment("valid_from", b.valid_from.as_deref())?;
    let valid_to = moment("valid_to", b.valid_to.as_deref())?;
    crate::tools::check_size("content", &b.content, MAX_CONTENT_BYTES)
        .map_err(|e| Problem::new(StatusCode::PAYLOAD_TOO_LARGE, e))?;
    let embedding = s
        .embed_memory(&c, b.kind.as_deref(), &b.content, occurred_at.as_deref())
        .await
        .map_err(|e| Problem::new(StatusCode::SERVICE_UNAVAILABLE, e))?;
    let supersedes = b.supersedes.unwrap_or_default();
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(r) FROM engram.remember(content => $1, embedding => $2, kind => coalesce($3, 'semantic'),
             tags => coalesce($4::text[], '{}'), metadata => coalesce($5::jsonb, '{}'), ttl => $6::float8 * interval '1 second',
             importance => coalesce($7::real, 0.5), session_id => $8, force => coalesce($9::boolean, false),
             conflict_threshold => $10, occurred_at => $11::text::timestamptz,
             valid_from => $12::text::timestamptz, valid_to => $13::text::timestamptz, supersedes => $14) r",
        &[
            &b.content,
            &embedding,
            &b.kind,
            &b.tags,
            &b.metadata,
            &b.ttl,
            &b.importance,
            &c.session_id,
            &b.force,
            &s.conflict_threshold,
            &occurred_at,
            &valid_from,
            &valid_to,
            &supersedes,
        ],
    )
    .await?;
    match v["status"].as_str() {
        Some("conflict") => {
            let mut p = Problem::new(
                StatusCode::CONFLICT,
                "the memory conflicts with memories already stored (see conflicts); nothing was written",
            );
            p.hint = Some(
                "send it again with supersedes: [the ids it replaces] (exactly those stop being valid), or with \
                 force: true to store it alongside them (closes nothing)"
                    .into(),
            );
            p.conflicts = Some(Box::new(shorten_conflicts(v["conflicts"].clone())));
            Err(p)
        }
        Some("created") => ok(StatusCode::CREATED, typed::<Remembered>(v)?),
        _ => ok(StatusCode::OK, typed::<Remembered>(v)?),
    }
}

/// List memories, newest first by default, one page at a time.
#[utoipa::path(get, path = "/v1/memories", tag = "memories", params(ListQuery),
    responses((status = 200, description = "A page of memories", body = MemoryPage)))]
pub async fn list(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<ListQuery>,
) -> V1<Json<MemoryPage>> {
    let c = acting(&c, q.user_id.as_deref())?;
    check_cursor(q.cursor.as_deref(), q.order_by.as_deref()).map_err(Problem::bad_request)?;
    let valid_at = moment("valid_at", q.valid_at.as_deref())?;
    let filter = match q.filter.as_deref() {
        Some(f) => Some(serde_json::from_str::<Value>(f).map_err(|e| {
            Problem::bad_request(format!(
                "filter is not JSON ({e}); pass a JSON object such as {{\"team\": \"core\"}}"
            ))
        })?),
        None => None,
    };
    let namespace_prefix = dotted(q.namespace_prefix.as_deref());
    let sql = "SELECT jsonb_build_object(
                   'memories', coalesce(jsonb_agg(to_jsonb(l) - 'next_cursor' - 'ordinality' ORDER BY l.ordinality), '[]'),
                   'next_cursor', (array_agg(l.next_cursor ORDER BY l.ordinality DESC))[1])
               FROM engram.list(kinds => $1, tags_all => $2, status => coalesce($3, 'active'),
                   order_by => coalesce($4, 'created_at'), descending => coalesce($5::boolean, true), \"limit\" => coalesce($6::integer, 50),
                   after => $7, valid_at => $8::text::timestamptz, namespace_prefix => $9, filter => $10,
                   refresh_ttl => coalesce($11::boolean, false)) WITH ORDINALITY l";
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 11] = [
        &q.kinds,
        &q.tags,
        &q.status,
        &q.order_by,
        &q.descending,
        &q.limit,
        &q.cursor,
        &valid_at,
        &namespace_prefix,
        &filter,
        &q.refresh_ttl,
    ];
    // Refreshing TTLs writes; a plain listing may be served by a replica.
    let v = read_refreshing(&s, &c, q.refresh_ttl, sql, &params).await?;
    Ok(Json(typed(v)?))
}

/// One memory.
#[utoipa::path(get, path = "/v1/memories/{id}", tag = "memories",
    params(("id" = Uuid, Path, description = "The memory id"), UserQuery),
    responses((status = 200, description = "The memory", body = Memory)))]
pub async fn recall(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<UserQuery>,
) -> V1<Json<Memory>> {
    let id = super::memory_id(&id)?;
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT to_jsonb(r) - 'embedding' - 'owner' FROM engram.recall(id => $1) r",
        &[&id],
    )
    .await?;
    if v.is_null() {
        return Err(not_found(id));
    }
    Ok(Json(typed(v)?))
}

fn not_found(id: Uuid) -> Problem {
    Problem::not_found(format!("memory {id} not found; list or search memories to find ids"))
}

/// Change a memory's content, tags, metadata or validity; the previous
/// state is kept as a revision.
#[utoipa::path(patch, path = "/v1/memories/{id}", tag = "memories", request_body = UpdateBody,
    params(("id" = Uuid, Path, description = "The memory id")),
    responses((status = 200, description = "Updated", body = Updated)))]
pub async fn update(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Json(b): Json<UpdateBody>,
) -> V1<Json<Updated>> {
    let id = super::memory_id(&id)?;
    let c = acting(&c, b.user_id.as_deref())?;
    check_metadata(b.metadata.as_ref()).map_err(Problem::bad_request)?;
    check_reason(b.reason.as_deref())?;
    let valid_to = moment("valid_to", b.valid_to.as_deref())?;
    let embedding = match &b.content {
        Some(text) => Some(embed(&s, &c, "content", text, MAX_CONTENT_BYTES).await?),
        None => None,
    };
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(engram.update(id => $1, content => $2, embedding => $3, tags => $4, metadata => $5,
             reason => $6, valid_to => $7::text::timestamptz))",
        &[&id, &b.content, &embedding, &b.tags, &b.metadata, &b.reason, &valid_to],
    )
    .await?;
    Ok(Json(Updated {
        id,
        revision: typed(v)?,
    }))
}

/// Forget a memory: archived (found again with status=archived), or erased
/// with its history when `hard`.
#[utoipa::path(delete, path = "/v1/memories/{id}", tag = "memories",
    params(("id" = Uuid, Path, description = "The memory id"), ForgetQuery),
    responses((status = 200, description = "Forgotten", body = Forgotten)))]
pub async fn forget(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<ForgetQuery>,
) -> V1<Json<Forgotten>> {
    let id = super::memory_id(&id)?;
    let c = acting(&c, q.user_id.as_deref())?;
    check_reason(q.reason.as_deref())?;
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(engram.forget(id => $1, reason => $2, hard => coalesce($3::boolean, false)))",
        &[&id, &q.reason, &q.hard],
    )
    .await?;
    Ok(Json(Forgotten {
        id,
        forgotten: typed(v)?,
    }))
}

/// Make a memory that was superseded or closed valid again.
#[utoipa::path(post, path = "/v1/memories/{id}/reopen", tag = "memories", request_body(content = Option<ReasonBody>),
    params(("id" = Uuid, Path, description = "The memory id")),
    responses((status = 200, description = "Reopened", body = Reopened)))]
pub async fn reopen(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    b: Option<Json<ReasonBody>>,
) -> V1<Json<Reopened>> {
    let id = super::memory_id(&id)?;
    let b = b.map(|Json(b)| b).unwrap_or_default();
    let c = acting(&c, b.user_id.as_deref())?;
    check_reason(b.reason.as_deref())?;
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(engram.reopen(id => $1, reason => $2))",
        &[&id, &b.reason],
    )
    .await?;
    Ok(Json(Reopened {
        id,
        reopened: typed(v)?,
    }))
}

/// Flag a memory as wrong or doubtful: its trust drops.
#[utoipa::path(post, path = "/v1/memories/{id}/flag", tag = "memories", request_body = ReasonBody,
    params(("id" = Uuid, Path, description = "The memory id")),
    responses((status = 200, description = "Flagged", body = Flagged)))]
pub async fn flag(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Json(b): Json<ReasonBody>,
) -> V1<Json<Flagged>> {
    let id = super::memory_id(&id)?;
    let c = acting(&c, b.user_id.as_deref())?;
    let reason = b.reason.unwrap_or_else(|| "flagged".into());
    check_reason(Some(&reason))?;
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(engram.flag(id => $1, reason => $2))",
        &[&id, &reason],
    )
    .await?;
    Ok(Json(Flagged {
        id,
        trust_score: typed(v)?,
    }))
}

/// A memory's revisions, oldest first.
#[utoipa::path(get, path = "/v1/memories/{id}/revisions", tag = "memories",
    params(("id" = Uuid, Path, description = "The memory id"), UserQuery),
    responses((status = 200, description = "The revisions", body = Revisions)))]
pub async fn revisions(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<UserQuery>,
) -> V1<Json<Revisions>> {
    let id = super::memory_id(&id)?;
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT jsonb_build_object('revisions', coalesce(jsonb_agg(to_jsonb(v) ORDER BY v.revision), '[]'))
         FROM engram.revisions(id => $1) v",
        &[&id],
    )
    .await?;
    Ok(Json(typed(v)?))
}

/// Who did what to a memory, and when.
#[utoipa::path(get, path = "/v1/memories/{id}/audit", tag = "memories",
    params(("id" = Uuid, Path, description = "The memory id"), UserQuery),
    responses((status = 200, description = "The audit trail, oldest first", body = Audit)))]
pub async fn audit(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<UserQuery>,
) -> V1<Json<Audit>> {
    let id = super::memory_id(&id)?;
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT jsonb_build_object('audit', coalesce(jsonb_agg(to_jsonb(a) - 'ordinality' ORDER BY a.ordinality), '[]'))
         FROM engram.audit_trail(id => $1) WITH ORDINALITY a",
        &[&id],
    )
    .await?;
    Ok(Json(typed(v)?))
}

/// Search memories by meaning and exact words; best first.
#[utoipa::path(post, path = "/v1/search", tag = "memories", request_body = SearchBody,
    responses((status = 200, description = "The hits, best first", body = Found)))]
pub async fn search(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Json(b): Json<SearchBody>,
) -> V1<Json<Found>> {
    let c = acting(&c, b.user_id.as_deref())?;
    check_query(&b.query).map_err(Problem::bad_request)?;
    let valid_at = moment("valid_at", b.valid_at.as_deref())?;
    let known_at = moment("known_at", b.known_at.as_deref())?;
    let reference_time = moment("reference_time", b.reference_time.as_deref())?;
    crate::limits::check_opt("entity", b.entity.as_deref(), 200).map_err(Problem::bad_request)?;
    let embedding = embed(&s, &c, "query", &b.query, MAX_QUERY_BYTES).await?;
    let sql = "WITH h AS (
                   SELECT * FROM engram.search(query_embedding => $1, query_text => $2, k => coalesce($3::integer, 10),
                       kinds => $4, tags_all => $5, filter => $6, namespace_prefix => $7,
                       min_similarity => $8::real, valid_at => $9::text::timestamptz,
                       known_at => $10::text::timestamptz, reference_time => $11::text::timestamptz,
                       entity => $12::text, refresh_ttl => coalesce($13::boolean, false),
                       group_by => $14::text) WITH ORDINALITY)
               SELECT jsonb_build_object(
                   'results', coalesce((SELECT jsonb_agg(to_jsonb(h) - 'time_window' - 'ordinality' - 'staleness_score' - 'session'
                                                 || jsonb_build_object('session_id', h.session)
                                                 ORDER BY h.ordinality) FROM h), '[]'),
                   'time_window', (SELECT jsonb_build_object('start', lower(w), 'end', upper(w))
                                   FROM (SELECT coalesce((SELECT h.time_window FROM h LIMIT 1),
                                             engram.time_window($2, coalesce($11::text::timestamptz,
                                                 least($10::text::timestamptz, now()), now()))) AS w) x
                                   WHERE w IS NOT NULL))";
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 14] = [
        &embedding,
        &b.query,
        &b.limit,
        &b.kinds,
        &b.tags,
        &b.filter,
        &b.namespace_prefix,
        &b.min_similarity,
        &valid_at,
        &known_at,
        &reference_time,
        &b.entity,
        &b.refresh_ttl,
        &b.group_by,
    ];
    let v = read_refreshing(&s, &c, b.refresh_ttl, sql, &params).await?;
    let mut found: Found = typed(v)?;
    if found.results.is_empty() {
        found.note = Some(crate::tools::nothing_relevant(b.min_similarity.is_none()));
    }
    Ok(Json(found))
}
