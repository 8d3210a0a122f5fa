//! Context for a prompt, entities, the server's embeddings, user tokens and
//! a user's erasure of their own memories.

use super::{acting, ok, one, read, typed, V1};
use crate::caller::Caller;
use crate::tools::{Shared, MAX_QUERY_BYTES};
use crate::v1::problem::Problem;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use axum_extra::extract::Query;
use engram_embed::Embedder;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ContextBody {
    /// What the prompt is about; the most relevant memories for it are included.
    pub query: Option<String>,
    /// The conversation's id (default: the X-Session-Id header).
    pub session_id: Option<String>,
    /// The workspace to resume (default: the session's latest).
    pub workspace: Option<String>,
    /// dual (default, 12 memories), agent (6) or emulation (3).
    pub mode: Option<String>,
    /// Longest `text`, in characters (200 to 100000, default 4000).
    pub budget_chars: Option<i32>,
    pub user_id: Option<String>,
}

/// Prompt-ready context: the workspace's latest state, pinned slots, the
/// latest session summary, recent tool calls and the memories most relevant
/// to `query`, with `text` rendered within `budget_chars`.
#[utoipa::path(post, path = "/v1/context", tag = "context", request_body(content = Option<ContextBody>),
    responses((status = 200, description = "The context; `text` is ready for a prompt", body = Object)))]
pub async fn context(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    b: Option<Json<ContextBody>>,
) -> V1<Json<Value>> {
    let b = b.map(|Json(b)| b).unwrap_or_default();
    let c = acting(&c, b.user_id.as_deref())?;
    let query = b.query.filter(|q| !q.trim().is_empty());
    let embedding = match &query {
        Some(q) => Some(super::embed(&s, &c, "query", q, MAX_QUERY_BYTES).await?),
        None => None,
    };
    let session = b.session_id.or_else(|| c.session_id.clone());
    let v = one(
        &s,
        &c,
        "SELECT engram.context(query_embedding => $1::vector, query_text => $2::text, session_id => $3::text,
             workspace => $4::text, mode => coalesce($5::text, 'dual'), budget_chars => coalesce($6::integer, 4000))",
        &[&embedding, &query, &session, &b.workspace, &b.mode, &b.budget_chars],
    )
    .await?;
    Ok(Json(v))
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EntitiesQuery {
    /// Only names starting with this (case and accents ignored).
    pub prefix: Option<String>,
    /// At most this many (default 50).
    pub limit: Option<i32>,
    pub user_id: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Entity {
    pub name: String,
    /// person, project, place, ...
    pub kind: Option<String>,
    /// How many memories mention it.
    pub memories: i64,
    pub first_seen: Option<String>,
    pub last_seen: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Entities {
    /// Most mentioned first.
    pub entities: Vec<Entity>,
}

/// The named things the user's memories are about.
#[utoipa::path(get, path = "/v1/entities", tag = "context", params(EntitiesQuery),
    responses((status = 200, description = "The entities", body = Entities)))]
pub async fn entities(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<EntitiesQuery>,
) -> V1<Json<Entities>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT jsonb_build_object('entities', coalesce(jsonb_agg(to_jsonb(e) - 'ordinality' ORDER BY e.ordinality), '[]'))
         FROM engram.entities(prefix => $1::text, \"limit\" => coalesce($2::integer, 50)) WITH ORDINALITY e",
        &[&q.prefix, &q.limit],
    )
    .await?;
    Ok(Json(typed(v)?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AboutQuery {
    /// Memories to include (default 20).
    pub limit: Option<i32>,
    pub user_id: Option<String>,
}

/// An entity's page: what holds now, what replaced what and when, and the
/// related entities.
#[utoipa::path(get, path = "/v1/entities/{name}", tag = "context",
    params(("name" = String, Path, description = "The entity's name"), AboutQuery),
    responses((status = 200, description = "The entity", body = Object)))]
pub async fn about(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(name): Path<String>,
    Query(q): Query<AboutQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT engram.about(entity => $1::text, \"limit\" => coalesce($2::integer, 20))",
        &[&name, &q.limit],
    )
    .await?;
    Ok(Json(v))
}

/// The most texts one embed call takes, and their total size: a request
/// costs the server at most what one large memory does.
const MAX_EMBED_TEXTS: usize = 64;
const MAX_EMBED_BYTES: usize = 256 * 1024;
static EMBED_TURN: std::sync::LazyLock<Arc<tokio::sync::Semaphore>> =
    std::sync::LazyLock::new(|| Arc::new(tokio::sync::Semaphore::new(1)));
const EMBED_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmbedBody {
    /// 1 to 64 texts, at most 64 KiB each and 256 KiB in all.
    #[schema(min_items = 1, max_items = 64)]
    pub texts: Vec<String>,
    pub user_id: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct Embedded {
    /// The model the vectors come from (what engram.embedding_model() records).
    pub model: String,
    pub dims: usize,
    /// One vector per text, in order.
    pub embeddings: Vec<Vec<f32>>,
}

/// The server model's vectors for `texts`: SQL clients embed with the model
/// the stored memories come from.
#[utoipa::path(post, path = "/v1/embed", tag = "context", request_body = EmbedBody,
    responses((status = 200, description = "The vectors", body = Embedded)))]
pub async fn embed(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Json(b): Json<EmbedBody>,
) -> V1<Json<Embedded>> {
    let c = acting(&c, b.user_id.as_deref())?;
    // The token is bound in the database like every other call's (during an
    // outage authentication may have passed on the database's last answer).
    one(&s, &c, "SELECT to_jsonb(true)", &[]).await?;
    if b.texts.is_empty() || b.texts.len() > MAX_EMBED_TEXTS {
        return Err(Problem::bad_request(format!(
            "texts has {} entries; send 1 to {MAX_EMBED_TEXTS} per call",
            b.texts.len()
        )));
    }
    let total: usize = b.texts.iter().map(String::len).sum();
    if total > MAX_EMBED_BYTES {
        return Err(Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("texts are {total} bytes in all; the limit is {MAX_EMBED_BYTES}: send fewer per call"),
        ));
    }
    for t in &b.texts {
        crate::tools::check_size("each text", t, MAX_QUERY_BYTES)
            .map_err(|e| Problem::new(StatusCode::PAYLOAD_TOO_LARGE, e))?;
    }
    // One embed call at a time: the embedder also serves every write and
    // search, which must not queue behind batches of someone's texts. The
    // turn is held by the work itself, which runs on even when the client
    // hangs up: a caller that gives up early cannot start the next batch.
    let turn = match tokio::time::timeout(EMBED_WAIT, EMBED_TURN.clone().acquire_owned()).await {
        Ok(Ok(permit)) => permit,
        _ => {
            return Err(Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is embedding other texts; retry shortly, or send fewer texts per call",
            ))
        }
    };
    let work = {
        let (s, owner, texts) = (s.clone(), c.owner.clone(), b.texts);
        tokio::spawn(async move {
            let r = s.embed_texts(&owner, &texts).await;
            drop(turn);
            r
        })
    };
    let r = work.await.map_err(super::internal)?;
    let embeddings = r.map_err(|e| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("could not embed the texts: {e}; retry shortly, or check /health"),
        )
    })?;
    Ok(Json(Embedded {
        model: s.embedder.model(),
        dims: s.embedder.dims(),
        embeddings,
    }))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBody {
    /// The user the token acts for (a platform token names any of its users; leave it out for the
    /// token's own owner).
    pub user_id: Option<String>,
    /// What the token is for, e.g. "web session" (at most 200 bytes).
    #[schema(min_length = 1)]
    pub label: String,
    /// The token stops working after this many seconds; leave it out for a token that does not expire.
    #[schema(exclusive_minimum = 0.0)]
    pub expires_in: Option<f64>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Minted {
    pub id: Uuid,
    /// The token: shown once, stored hashed.
    pub token: String,
    pub owner: String,
    pub label: String,
    pub expires_at: Option<String>,
}

/// A platform token mints a user token for one of its users: the user's
/// own clients then act only for that user.
#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body = TokenBody,
    responses((status = 201, description = "The new token", body = Minted)))]
pub async fn mint_token(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Json(b): Json<TokenBody>,
) -> V1<Response> {
    let c = acting(&c, b.user_id.as_deref())?;
    if let Some(e) = b
        .expires_in
        .filter(|e| !(e.is_finite() && *e > 0.0 && *e <= 100.0 * 365.0 * 86_400.0))
    {
        return Err(Problem::bad_request(format!(
            "expires_in {e} is not a number of seconds above 0 and at most a hundred years; leave it out for a \
             token that does not expire"
        )));
    }
    let v = one(
        &s,
        &c,
        "SELECT engram.mint_token(label => $1, expires => $2::float8 * interval '1 second')",
        &[&b.label, &b.expires_in],
    )
    .await?;
    ok(StatusCode::CREATED, typed::<Minted>(v)?)
}

/// Revoke a token: a platform token revokes the tokens it minted, any token
/// revokes itself (signing out).
#[utoipa::path(delete, path = "/v1/tokens/{id}", tag = "tokens",
    params(("id" = Uuid, Path, description = "The token's id"), super::UserQuery),
    responses((status = 204, description = "Revoked")))]
pub async fn revoke_token(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<super::UserQuery>,
) -> V1<Response> {
    let c = acting(&c, q.user_id.as_deref())?;
    let id = super::uuid_of("token id (a UUID)", &id)?;
    one(&s, &c, "SELECT to_jsonb(engram.revoke_minted_token($1))", &[&id]).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Erased {
    /// How many memories were erased (with their revisions).
    pub memories: i64,
    /// How many recorded search misses were erased.
    pub misses: i64,
}

/// A user erases all of their own memories (a platform token for its
/// users): every memory in every context, with revisions, access
/// statistics and entities. Tokens, slots, workspaces and the audit log
/// stay.
#[utoipa::path(delete, path = "/v1/users/{user_id}/memories", tag = "tokens",
    params(("user_id" = String, Path, description = "The user: the token's own owner, or any user for a platform token"),
           super::UserQuery),
    responses((status = 200, description = "Erased", body = Erased)))]
pub async fn erase_user(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(user_id): Path<String>,
    Query(_query): Query<super::UserQuery>,
) -> V1<Json<Erased>> {
    let c = acting(&c, Some(&user_id))?;
    let v = one(&s, &c, "SELECT engram.erase_memories()", &[]).await?;
    Ok(Json(typed(v)?))
}
