//! The `/api` routes of earlier releases (the memory browser's, and the
//! resources of platforms), kept for existing clients as aliases of the
//! `/v1` handlers: the same calls, in the answer shapes those clients
//! read, with errors as `{"error": message}`.

use super::memories::{self, ForgetQuery, ListQuery, ReasonBody, SearchBody};
use super::misc::{self, EntitiesQuery};
use super::problem::CONTENT_TYPE;
use super::{resources, UserQuery, V1};
use crate::caller::Caller;
use crate::tools::Shared;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use axum_extra::extract::Query;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/api/resources", get(resources::list).post(resources::create))
        .route(
            "/api/resources/{id}",
            get(resources::get).put(resources::update).delete(resources::delete),
        )
        .route("/api/memories", get(browse))
        .route("/api/memories/{id}", get(detail).delete(forget))
        .route("/api/memories/{id}/flag", post(flag))
        .route("/api/memories/{id}/reopen", post(reopen))
        .route("/api/entities", get(entities))
        .route("/api/entities/{name}", get(misc::about))
        .with_state(shared)
        .layer(axum::middleware::from_fn(super::user_in_query))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(super::panicked))
        .layer(axum::middleware::map_response(as_error))
}

/// A problem as the `{"error": message}` these routes answered with.
async fn as_error(response: Response) -> Response {
    let is_problem = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(CONTENT_TYPE.as_bytes()));
    let response = if is_problem || !(response.status().is_client_error() || response.status().is_server_error()) {
        response
    } else {
        super::problem::as_problem(response).await
    };
    if !response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(CONTENT_TYPE.as_bytes()))
    {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let detail = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v["detail"].as_str().map(str::to_string))
        .unwrap_or_default();
    let mut r = crate::caller::deny(parts.status, &detail);
    for name in ["allow", "retry-after"] {
        if let Some(v) = parts.headers.get(name) {
            r.headers_mut().insert(name, v.clone());
        }
    }
    r
}

#[derive(Deserialize)]
struct BrowseQuery {
    q: Option<String>,
    limit: Option<i32>,
}

/// The browser's list: search results for `q`, else the latest memories.
async fn browse(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<BrowseQuery>,
) -> V1<Json<Value>> {
    let limit = Some(q.limit.unwrap_or(20).clamp(1, 50));
    match q.q.filter(|t| !t.trim().is_empty()) {
        Some(query) => {
            let body = SearchBody {
                query,
                limit,
                ..Default::default()
            };
            let Json(found) = memories::search(State(s), Extension(c), Json(body)).await?;
            Ok(Json(json!(found.results)))
        }
        None => {
            let query = ListQuery {
                limit,
                ..Default::default()
            };
            let Json(page) = memories::list(State(s), Extension(c), Query(query)).await?;
            Ok(Json(json!(page.memories)))
        }
    }
}

/// One memory with its revisions and audit trail.
async fn detail(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
) -> V1<Json<Value>> {
    let Json(memory) = memories::recall(
        State(s.clone()),
        Extension(c.clone()),
        Path(id.clone()),
        Query(UserQuery::default()),
    )
    .await?;
    let Json(revisions) = memories::revisions(
        State(s.clone()),
        Extension(c.clone()),
        Path(id.clone()),
        Query(UserQuery::default()),
    )
    .await?;
    let Json(audit) = memories::audit(State(s), Extension(c), Path(id), Query(UserQuery::default())).await?;
    Ok(Json(json!({
        "memory": memory,
        "revisions": revisions.revisions,
        "audit": audit.audit,
    })))
}

async fn forget(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
) -> V1<Json<Value>> {
    let query = ForgetQuery {
        reason: Some("forgotten in the memory browser".into()),
        ..Default::default()
    };
    let Json(r) = memories::forget(State(s), Extension(c), Path(id), Query(query)).await?;
    Ok(Json(json!({ "forgotten": r.forgotten })))
}

async fn flag(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Json(mut b): Json<ReasonBody>,
) -> V1<Json<Value>> {
    b.reason = b.reason.or_else(|| Some("flagged in the memory browser".into()));
    let Json(r) = memories::flag(State(s), Extension(c), Path(id), Json(b)).await?;
    Ok(Json(json!({ "trust_score": r.trust_score })))
}

async fn reopen(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    b: Option<Json<ReasonBody>>,
) -> V1<Json<Value>> {
    let mut b = b.map(|Json(b)| b).unwrap_or_default();
    b.reason = b.reason.or_else(|| Some("reopened in the memory browser".into()));
    let Json(r) = memories::reopen(State(s), Extension(c), Path(id), Some(Json(b))).await?;
    Ok(Json(json!({ "reopened": r.reopened })))
}

async fn entities(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<EntitiesQuery>,
) -> V1<Json<Value>> {
    let query = EntitiesQuery {
        prefix: q.prefix,
        limit: Some(100),
        ..Default::default()
    };
    let Json(e) = misc::entities(State(s), Extension(c), Query(query)).await?;
    Ok(Json(json!(e.entities)))
}
