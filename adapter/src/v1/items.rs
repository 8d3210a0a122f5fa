//! Keyed memories: one memory per (user, namespace, key), revised in place
//! by a put (never refused as a duplicate or a conflict), read and deleted
//! by key; the namespaces in use.

use super::{acting, dotted, embed, ok, one, read, typed, Deleted, V1};
use crate::caller::Caller;
use crate::tools::{Shared, MAX_CONTENT_BYTES};
use crate::v1::problem::Problem;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Json};
use axum_extra::extract::Query;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutBody {
    /// The namespace: a path of 1 to 16 labels, e.g. ["users", "alice", "prefs"].
    #[schema(min_items = 1, max_items = 16)]
    pub namespace: Vec<String>,
    /// The key, unique within the user's namespace.
    #[schema(min_length = 1)]
    pub key: String,
    /// The text search reads (default: the value's JSON text).
    pub content: Option<String>,
    /// The item's data: a JSON object, matched by filters.
    #[schema(value_type = Option<Object>)]
    pub value: Option<Value>,
    /// Forget it after this many seconds without a read that refreshes it.
    #[schema(exclusive_minimum = 0.0)]
    pub ttl: Option<f64>,
    /// Embed the content so that search finds it by meaning (default true); false: found by words and
    /// filters only.
    pub index: Option<bool>,
    pub kind: Option<String>,
    pub tags: Option<Vec<String>>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Why it changed (kept in the revision history).
    pub reason: Option<String>,
    /// The user to act for (platform tokens).
    pub user_id: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Put {
    /// created (a new memory), revised (a new revision) or unchanged (the same state again).
    pub status: String,
    pub id: Uuid,
    pub revision: i32,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct KeyQuery {
    /// The namespace, labels joined by dots: `users.alice.prefs`.
    pub namespace: String,
    pub key: String,
    /// (GET) Start the item's lifetime again, when it has a ttl.
    pub refresh_ttl: Option<bool>,
    /// (DELETE) Erase it with its history instead of archiving it.
    pub hard: Option<bool>,
    /// The user to act for (platform tokens).
    pub user_id: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Item {
    pub id: Uuid,
    pub namespace: Vec<String>,
    pub key: String,
    pub content: String,
    #[schema(value_type = Option<Object>)]
    pub value: Option<Value>,
    pub kind: String,
    pub tags: Vec<String>,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub revision: i32,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: Option<String>,
    pub trust_score: Option<f32>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct NamespacesQuery {
    /// Only namespaces under this one (labels joined by dots).
    pub prefix: Option<String>,
    /// Only namespaces ending with these labels (joined by dots).
    pub suffix: Option<String>,
    /// Cut longer namespaces to this many labels.
    pub max_depth: Option<i32>,
    /// At most this many (default 100).
    pub limit: Option<i32>,
    pub offset: Option<i32>,
    /// The user to act for (platform tokens).
    pub user_id: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Namespaces {
    pub namespaces: Vec<Vec<String>>,
}

/// Store or revise the item at (namespace, key): a new revision when it
/// exists. Everything given replaces the item's previous state.
#[utoipa::path(put, path = "/v1/items", tag = "items", request_body = PutBody,
    responses((status = 201, description = "A new item", body = Put),
              (status = 200, description = "Revised, or unchanged", body = Put)))]
pub async fn put(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Json(b): Json<PutBody>,
) -> V1<Response> {
    let c = acting(&c, b.user_id.as_deref())?;
    super::check_ttl(b.ttl)?;
    super::check_reason(b.reason.as_deref())?;
    let text = b.content.clone().or_else(|| b.value.as_ref().map(Value::to_string));
    let embedding = match (&text, b.index.unwrap_or(true)) {
        (Some(text), true) => Some(embed(&s, &c, "content", text, MAX_CONTENT_BYTES).await?),
        _ => None,
    };
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(p) FROM engram.put(namespace => $1, key => $2, content => $3, embedding => $4, value => $5,
             ttl => $6::float8 * interval '1 second', kind => coalesce($7, 'semantic'), tags => coalesce($8::text[], '{}'),
             metadata => coalesce($9::jsonb, '{}'), reason => $10) p",
        &[
            &b.namespace,
            &b.key,
            &b.content,
            &embedding,
            &b.value,
            &b.ttl,
            &b.kind,
            &b.tags,
            &b.metadata,
            &b.reason,
        ],
    )
    .await?;
    let put: Put = typed(v)?;
    let status = if put.status == "created" {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    ok(status, put)
}

/// The item at (namespace, key).
#[utoipa::path(get, path = "/v1/items", tag = "items", params(KeyQuery),
    responses((status = 200, description = "The item", body = Item)))]
pub async fn get(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<KeyQuery>,
) -> V1<Json<Item>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let namespace = dotted(Some(&q.namespace));
    let sql = "SELECT to_jsonb(k) FROM engram.get_key(namespace => $1, key => $2, refresh_ttl => coalesce($3::boolean, false)) k";
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&namespace, &q.key, &q.refresh_ttl];
    let v = super::read_refreshing(&s, &c, q.refresh_ttl, sql, &params).await?;
    if v.is_null() {
        return Err(Problem::not_found(format!(
            "nothing is stored at namespace '{}', key '{}'",
            crate::limits::clip(&q.namespace),
            crate::limits::clip(&q.key)
        )));
    }
    Ok(Json(typed(v)?))
}

/// Delete the item at (namespace, key): archived, or erased with its
/// history when `hard`.
#[utoipa::path(delete, path = "/v1/items", tag = "items", params(KeyQuery),
    responses((status = 200, description = "Deleted, or nothing was there", body = Deleted)))]
pub async fn delete(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<KeyQuery>,
) -> V1<Json<Deleted>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let namespace = dotted(Some(&q.namespace));
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(engram.delete_key(namespace => $1, key => $2, hard => coalesce($3::boolean, false)))",
        &[&namespace, &q.key, &q.hard],
    )
    .await?;
    Ok(Json(Deleted { deleted: typed(v)? }))
}

/// The namespaces in use, in order.
#[utoipa::path(get, path = "/v1/namespaces", tag = "items", params(NamespacesQuery),
    responses((status = 200, description = "The namespaces", body = Namespaces)))]
pub async fn namespaces(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<NamespacesQuery>,
) -> V1<Json<Namespaces>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let (prefix, suffix) = (dotted(q.prefix.as_deref()), dotted(q.suffix.as_deref()));
    let v = read(
        &s,
        &c,
        "SELECT jsonb_build_object('namespaces', coalesce(jsonb_agg(to_jsonb(n.ns) ORDER BY n.ordinality), '[]'))
         FROM engram.namespaces(prefix => $1, suffix => $2, max_depth => $3, \"limit\" => coalesce($4::integer, 100),
             \"offset\" => coalesce($5::integer, 0)) WITH ORDINALITY n(ns, ordinality)",
        &[&prefix, &suffix, &q.max_depth, &q.limit, &q.offset],
    )
    .await?;
    Ok(Json(typed(v)?))
}
