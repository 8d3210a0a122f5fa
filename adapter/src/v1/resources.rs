//! Resources: documents a platform publishes to its users' agents (MCP
//! `resources/list` and `resources/read`). Managed with platform tokens
//! only; changes notify the owner's MCP sessions.

use super::{acting, ok, one, UserQuery, V1};
use crate::caller::Caller;
use crate::tools::{Shared, MAX_CONTENT_BYTES};
use crate::v1::problem::Problem;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use axum_extra::extract::Query;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use utoipa::ToSchema;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourceBody {
    pub name: Option<String>,
    pub content: Option<String>,
    pub tags: Option<Vec<String>>,
    /// The user whose agents read it (platform tokens).
    pub user_id: Option<String>,
}

fn platform_only(c: &Caller) -> V1<()> {
    if c.platform {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::FORBIDDEN,
        "resources are managed with platform tokens (engram.create_token(..., platform => true)); agents read them \
         over MCP (resources/list, resources/read)",
    ))
}

/// The user's resources.
#[utoipa::path(get, path = "/v1/resources", tag = "resources", params(UserQuery),
    responses((status = 200, description = "The resources", body = [Object])))]
pub async fn list(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<UserQuery>,
) -> V1<Json<Value>> {
    platform_only(&c)?;
    let c = acting(&c, q.user_id.as_deref())?;
    let v = one(
        &s,
        &c,
        "SELECT coalesce(jsonb_agg(r), '[]') FROM engram.resources() r",
        &[],
    )
    .await?;
    Ok(Json(v))
}

/// Publish a resource.
#[utoipa::path(post, path = "/v1/resources", tag = "resources", request_body = ResourceBody,
    responses((status = 201, description = "The resource", body = Object)))]
pub async fn create(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Json(b): Json<ResourceBody>,
) -> V1<Response> {
    platform_only(&c)?;
    let c = acting(&c, b.user_id.as_deref())?;
    let content = b
        .content
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| Problem::bad_request("a resource needs content"))?;
    let embedding = super::embed(&s, &c, "content", &content, MAX_CONTENT_BYTES).await?;
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

/// One resource.
#[utoipa::path(get, path = "/v1/resources/{id}", tag = "resources",
    params(("id" = uuid::Uuid, Path, description = "The resource id"), UserQuery),
    responses((status = 200, description = "The resource", body = Object)))]
pub async fn get(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<UserQuery>,
) -> V1<Json<Value>> {
    let id = super::memory_id(&id)?;
    platform_only(&c)?;
    let c = acting(&c, q.user_id.as_deref())?;
    Ok(Json(one(&s, &c, "SELECT engram.resource_get(id => $1)", &[&id]).await?))
}

/// Change a resource's name, content or tags.
#[utoipa::path(put, path = "/v1/resources/{id}", tag = "resources", request_body = ResourceBody,
    params(("id" = uuid::Uuid, Path, description = "The resource id")),
    responses((status = 200, description = "The resource", body = Object)))]
pub async fn update(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Json(b): Json<ResourceBody>,
) -> V1<Json<Value>> {
    let id = super::memory_id(&id)?;
    platform_only(&c)?;
    let c = acting(&c, b.user_id.as_deref())?;
    let embedding = match &b.content {
        Some(t) => Some(super::embed(&s, &c, "content", t, MAX_CONTENT_BYTES).await?),
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
    Ok(Json(v))
}

/// Withdraw a resource.
#[utoipa::path(delete, path = "/v1/resources/{id}", tag = "resources",
    params(("id" = uuid::Uuid, Path, description = "The resource id"), UserQuery),
    responses((status = 204, description = "Deleted")))]
pub async fn delete(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<UserQuery>,
) -> V1<Response> {
    let id = super::memory_id(&id)?;
    platform_only(&c)?;
    let c = acting(&c, q.user_id.as_deref())?;
    one(&s, &c, "SELECT to_jsonb(engram.resource_delete(id => $1))", &[&id]).await?;
    s.subscribers.changed(&c.owner).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}
