//! The REST API behind the memory browser (/ui) and ToolHive's resources.
//! Same authentication as /mcp (caller::authenticate: bearer token,
//! X-User-Id for platform tokens), one engram SQL function per call in a
//! transaction bound to the caller, like every tool call.
//!
//! * `/api/resources`, `/api/resources/{id}`: create, read, update, delete
//!   resources; platform tokens only (others 403). Changes notify the
//!   owner's MCP sessions (`notifications/resources/list_changed`).
//! * `/api/memories?q=&limit=`, `/api/memories/{id}` (memory, revisions and
//!   audit trail), `DELETE /api/memories/{id}` (soft forget),
//!   `POST /api/memories/{id}/flag`: the browser's reads and the two
//!   corrections a person makes.
//! * `/api/entities?prefix=`, `/api/entities/{name}` (engram.about): the
//!   browser's entity pages (SPEC 13).

use crate::caller::Caller;
use crate::db::{DbError, RowExt};
use crate::tools::Shared;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/api/resources", get(list_resources).post(create_resource))
        .route(
            "/api/resources/{id}",
            get(get_resource).put(update_resource).delete(delete_resource),
        )
        .route("/api/memories", get(search_memories))
        .route("/api/memories/{id}", get(get_memory).delete(forget_memory))
        .route("/api/memories/{id}/flag", post(flag_memory))
        .route("/api/memories/{id}/reopen", post(reopen_memory))
        .route("/api/entities", get(list_entities))
        .route("/api/entities/{name}", get(about_entity))
        .with_state(shared)
        .layer(axum::middleware::from_fn(parsed_headers_only))
        // A handler that panics answers 500 with a JSON error instead of
        // dropping the connection.
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
}

/// Every /api route fails closed, as MCP does: a request whose identity or
/// internal-context headers did not parse (X-Ghost-Owner missing or sent
/// twice with X-Internal-Type: ghost, ...) is refused before any handler
/// runs. (Db::call refuses such a caller too.)
async fn parsed_headers_only(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    match req.extensions().get::<Caller>().map(Caller::context) {
        Some(Ok(_)) => next.run(req).await,
        Some(Err(e)) => ApiError(StatusCode::BAD_REQUEST, e).into_response(),
        None => ApiError(StatusCode::UNAUTHORIZED, "request was not authenticated".into()).into_response(),
    }
}

fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!(panic = %crate::tools::panic_message(&*panic), "REST handler panicked");
    ApiError(
        StatusCode::INTERNAL_SERVER_ERROR,
        "engram-mcp failed on this request (an internal error, logged by the server); nothing more was done".into(),
    )
    .into_response()
}

/// An error answer: the status a client can act on and a message that says
/// what to do.
pub struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        crate::caller::deny(self.0, &self.1)
    }
}

/// The status of each SQLSTATE class is DbError::status (503 answers
/// carry Retry-After: crate::caller::deny).
impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        ApiError(e.status(), crate::limits::clip_quoted(&e.message))
    }
}

type ApiResult = Result<Response, ApiError>;

fn memory_id(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id).map_err(|_| {
        ApiError(
            StatusCode::BAD_REQUEST,
            format!("'{}' is not a memory id (a UUID)", crate::limits::clip(id)),
        )
    })
}

fn platform_only(c: &Caller) -> Result<(), ApiError> {
    if c.platform {
        Ok(())
    } else {
        Err(ApiError(
            StatusCode::FORBIDDEN,
            "resources are managed with platform tokens (engram.create_token(..., platform => true)); \
             agents read them over MCP (resources/list, resources/read)"
                .into(),
        ))
    }
}

/// One bound call; the first column of the first row.
async fn one(shared: &Shared, c: &Caller, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Value, ApiError> {
    let rows = shared.db.call(c, sql, params).await?;
    match rows.first() {
        Some(r) => Ok(r
            .col::<Option<Value>>(0)
            .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e))?
            .unwrap_or(Value::Null)),
        None => Ok(Value::Null),
    }
}

/// Embeds a text the size limits allow (checked before the embedder works,
/// as the MCP tools do; the database checks them again).
async fn embed(
    shared: &Shared,
    c: &Caller,
    text: &str,
    what: &str,
    limit: usize,
) -> Result<pgvector::Vector, ApiError> {
    crate::tools::check_size(what, text, limit).map_err(|e| ApiError(StatusCode::PAYLOAD_TOO_LARGE, e))?;
    shared
        .embed(c, text)
        .await
        .map_err(|e| ApiError(StatusCode::SERVICE_UNAVAILABLE, e))
}

fn ok(status: StatusCode, body: Value) -> ApiResult {
    Ok((status, Json(body)).into_response())
}

async fn list_resources(State(s): State<Arc<Shared>>, Extension(c): Extension<Caller>) -> ApiResult {
    platform_only(&c)?;
    let v = one(
        &s,
        &c,
        "SELECT coalesce(jsonb_agg(r), '[]') FROM engram.resources() r",
        &[],
    )
    .await?;
    ok(StatusCode::OK, v)
}

#[derive(Deserialize)]
struct ResourceBody {
    name: Option<String>,
    content: Option<String>,
    tags: Option<Vec<String>>,
}

async fn create_resource(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Json(b): Json<ResourceBody>,
) -> ApiResult {
    platform_only(&c)?;
    let content = b
        .content
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| ApiError(StatusCode::BAD_REQUEST, "a resource needs content".into()))?;
    let embedding = embed(&s, &c, &content, "content", crate::tools::MAX_CONTENT_BYTES).await?;
    let tags = b.tags.unwrap_or_default();
    let v = one(
        &s,
        &c,
        "SELECT engram.resource_create(name => $1, content => $2, tags => $3, embedding => $4)",
        &[&b.name, &content, &tags, &embedding],
    )
    .await?;
    s.subscribers.changed(&c.owner).await;
    ok(StatusCode::CREATED, v)
}

async fn get_resource(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    let id = memory_id(&id)?;
    platform_only(&c)?;
    let v = one(&s, &c, "SELECT engram.resource_get(id => $1)", &[&id]).await?;
    ok(StatusCode::OK, v)
}

async fn update_resource(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Json(b): Json<ResourceBody>,
) -> ApiResult {
    let id = memory_id(&id)?;
    platform_only(&c)?;
    let embedding = match &b.content {
        Some(t) => Some(embed(&s, &c, t, "content", crate::tools::MAX_CONTENT_BYTES).await?),
        None => None,
    };
    let v = one(
        &s,
        &c,
        "SELECT engram.resource_update(id => $1, name => $2, content => $3, tags => $4, embedding => $5)",
        &[&id, &b.name, &b.content, &b.tags, &embedding],
    )
    .await?;
    s.subscribers.changed(&c.owner).await;
    ok(StatusCode::OK, v)
}

async fn delete_resource(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    let id = memory_id(&id)?;
    platform_only(&c)?;
    one(&s, &c, "SELECT to_jsonb(engram.resource_delete(id => $1))", &[&id]).await?;
    s.subscribers.changed(&c.owner).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
struct SearchQuery {
    q: Option<String>,
    limit: Option<i32>,
}

/// The browser's search: by meaning and words when `q` is given, else the
/// most recent memories. Resources are memories too, marked by `source`.
async fn search_memories(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<SearchQuery>,
) -> ApiResult {
    let limit = q.limit.unwrap_or(20).clamp(1, 50);
    let v = match q.q.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        Some(text) => {
            let embedding = embed(&s, &c, text, "q", crate::tools::MAX_QUERY_BYTES).await?;
            crate::db::reading(one(
                &s,
                &c,
                "SELECT coalesce(jsonb_agg(jsonb_build_object('id', h.id, 'content', h.content, 'kind', h.kind,
                        'tags', h.tags, 'score', h.score, 'source', h.source, 'occurred_at', h.occurred_at)
                        ORDER BY h.score DESC), '[]')
                 FROM engram.search(query_embedding => $1, query_text => $2, k => $3) h",
                &[&embedding, &text, &limit],
            ))
            .await?
        }
        None => {
            crate::db::reading(one(
                &s,
                &c,
                "SELECT coalesce(jsonb_agg(jsonb_build_object('id', l.id, 'content', l.content, 'kind', l.kind,
                        'tags', l.tags, 'source', l.source, 'occurred_at', l.occurred_at)), '[]')
                 FROM engram.list(\"limit\" => $1) l",
                &[&limit],
            ))
            .await?
        }
    };
    ok(StatusCode::OK, v)
}

#[derive(Deserialize)]
struct EntitiesQuery {
    prefix: Option<String>,
}

/// The named things the caller's memories are about, most mentioned first.
async fn list_entities(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<EntitiesQuery>,
) -> ApiResult {
    let v = crate::db::reading(one(
        &s,
        &c,
        "SELECT coalesce(jsonb_agg(to_jsonb(e)), '[]') FROM engram.entities(prefix => $1::text, \"limit\" => 100) e",
        &[&q.prefix],
    ))
    .await?;
    ok(StatusCode::OK, v)
}

/// An entity's page: what holds now, what replaced what and when, related entities.
async fn about_entity(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult {
    let v = crate::db::reading(one(&s, &c, "SELECT engram.about(entity => $1::text)", &[&name])).await?;
    ok(StatusCode::OK, v)
}

/// One memory with its revisions and audit trail.
async fn get_memory(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    let id = memory_id(&id)?;
    let v = crate::db::reading(one(
        &s,
        &c,
        "SELECT jsonb_build_object(
             'memory', (SELECT to_jsonb(r) - 'embedding' FROM engram.recall(id => $1) r),
             'revisions', (SELECT coalesce(jsonb_agg(to_jsonb(v) ORDER BY v.revision), '[]')
                           FROM engram.revisions(id => $1) v),
             'audit', (SELECT coalesce(jsonb_agg(to_jsonb(a)), '[]') FROM engram.audit_trail(id => $1) a))",
        &[&id],
    ))
    .await?;
    ok(StatusCode::OK, v)
}

async fn forget_memory(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    let id = memory_id(&id)?;
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(engram.forget(id => $1, reason => 'forgotten in the memory browser'))",
        &[&id],
    )
    .await?;
    ok(StatusCode::OK, json!({ "forgotten": v }))
}

#[derive(Deserialize)]
struct FlagBody {
    reason: Option<String>,
}

async fn flag_memory(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Json(b): Json<FlagBody>,
) -> ApiResult {
    let id = memory_id(&id)?;
    let reason = b.reason.unwrap_or_else(|| "flagged in the memory browser".into());
    crate::limits::check_len("reason", &reason, crate::limits::MAX_REASON_CHARS)
        .map_err(|e| ApiError(StatusCode::BAD_REQUEST, e))?;
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(engram.flag(id => $1, reason => $2))",
        &[&id, &reason],
    )
    .await?;
    ok(StatusCode::OK, json!({ "trust_score": v }))
}

#[derive(Deserialize)]
struct ReopenBody {
    reason: Option<String>,
}

/// Undoes a supersession or an invalidation (the browser's "undo").
async fn reopen_memory(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Json(b): Json<ReopenBody>,
) -> ApiResult {
    let id = memory_id(&id)?;
    let reason = b.reason.unwrap_or_else(|| "reopened in the memory browser".into());
    crate::limits::check_len("reason", &reason, crate::limits::MAX_REASON_CHARS)
        .map_err(|e| ApiError(StatusCode::BAD_REQUEST, e))?;
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(engram.reopen(id => $1, reason => $2))",
        &[&id, &reason],
    )
    .await?;
    ok(StatusCode::OK, json!({ "reopened": v }))
}
