//! The `/api` routes of earlier releases (the memory browser's, and the
//! resources of platforms), kept for existing clients as aliases of the
//! `/v1` handlers: the same calls, in the answer shapes those clients
//! read, with errors as `{"error": message}`. The dashboard at `/ui` reads
//! a few more here (its filtered pages of memories, stats, continuity and
//! session events): the same SQL functions as `/v1`, bound the same way,
//! not part of the OpenAPI document.

use super::continuity;
use super::memories::{self, ForgetQuery, ListQuery, ReasonBody, SearchBody, UpdateBody};
use super::misc::{self, AboutQuery, EntitiesQuery};
use super::problem::{Problem, CONTENT_TYPE};
use super::{acting, dotted, moment, read, resources, UserQuery, V1};
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
        .route("/api/memories/{id}", get(detail).delete(forget).patch(edit))
        .route("/api/memories/{id}/flag", post(flag))
        .route("/api/memories/{id}/reopen", post(reopen))
        .route("/api/entities", get(entities))
        .route("/api/entities/{name}", get(entity))
        .route("/api/me", get(me))
        .route("/api/browse", get(browse_page))
        .route("/api/stats", get(stats))
        .route("/api/owners", get(owners))
        .route("/api/workspaces", get(continuity::workspaces))
        .route("/api/workspaces/{name}", get(continuity::workspace))
        .route("/api/workspaces/{name}/states", get(continuity::states))
        .route("/api/workspaces/{name}/states/{state}", get(continuity::state))
        .route("/api/sessions", get(continuity::sessions))
        .route("/api/sessions/{id}/events", get(session_events))
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

/// Who the token is: the owner it acts for (the one `X-User-Id` names, for
/// a platform token), and whether it is a platform token (which may act
/// for any owner and manage resources).
async fn me(Extension(c): Extension<Caller>) -> V1<Json<Value>> {
    let c = acting(&c, None)?;
    Ok(Json(json!({
        "owner": c.owner,
        "platform": c.platform,
        "acting_as": c.act_as,
    })))
}

/// What the dashboard's memory list asks for: the latest memories (or,
/// with `q` or `entity`, the best hits) of a page, filtered.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    q: Option<String>,
    /// Only these kinds (repeat for several).
    kind: Option<Vec<String>>,
    /// Only memories carrying every one of these tags (repeat for several).
    tag: Option<Vec<String>>,
    /// active (default), archived or expired (lists only; search covers active memories).
    status: Option<String>,
    /// Only memories about this person, project, place or thing.
    entity: Option<String>,
    /// Only keyed memories under this namespace (labels joined by dots).
    namespace: Option<String>,
    /// What was valid at this moment instead of now.
    valid_at: Option<String>,
    /// Only memories written from this moment on, and before that one.
    created_after: Option<String>,
    created_before: Option<String>,
    /// 1-based.
    page: Option<i32>,
    page_size: Option<i32>,
    user_id: Option<String>,
}

/// The most memories a page is deep into a list (engram.list's largest
/// page), and into a search's results (engram.search's largest k).
const LIST_DEPTH: i32 = 1000;
const SEARCH_DEPTH: i32 = 100;

fn some_text(v: Option<String>) -> Option<String> {
    v.map(|t| t.trim().to_string()).filter(|t| !t.is_empty())
}

fn some_list(v: Option<Vec<String>>) -> Option<Vec<String>> {
    let v: Vec<String> = v
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    (!v.is_empty()).then_some(v)
}

/// One page of memories, filtered: `{memories, page, page_size, has_more,
/// searched}`. With `q` or `entity` the page is of search hits, best first
/// (engram.search, active memories); else of engram.list, newest first.
/// A page is read as the first `page * page_size + 1` rows (pages by
/// number, as deep links name them), of which only the page and the row
/// after it leave the database.
async fn browse_page(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<PageQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let page = q.page.unwrap_or(1);
    let size = q.page_size.unwrap_or(20);
    if page < 1 || !(1..=100).contains(&size) {
        return Err(Problem::bad_request("page counts from 1, and page_size is 1 to 100"));
    }
    let (text, entity) = (some_text(q.q), some_text(q.entity));
    let (kinds, tags) = (some_list(q.kind), some_list(q.tag));
    let status = some_text(q.status);
    let namespace = dotted(some_text(q.namespace).as_deref());
    let valid_at = moment("valid_at", some_text(q.valid_at).as_deref())?;
    let created_after = moment("created_after", some_text(q.created_after).as_deref())?;
    let created_before = moment("created_before", some_text(q.created_before).as_deref())?;
    let searched = text.is_some() || entity.is_some();
    let depth = if searched { SEARCH_DEPTH } else { LIST_DEPTH };
    let wanted = i64::from(page) * i64::from(size) + 1;
    if wanted > i64::from(depth) + 1 {
        return Err(Problem::bad_request(format!(
            "page {page} is deeper than the {depth} memories a {} reaches; narrow the filters",
            if searched { "search" } else { "list" }
        )));
    }
    let limit = i32::try_from(wanted.min(i64::from(depth))).unwrap_or(depth);
    let skip = i64::from(page - 1) * i64::from(size);
    let rows = if searched {
        if status.as_deref().is_some_and(|s| s != "active") {
            return Err(Problem::bad_request(
                "a search covers active memories; clear the query and the entity to list archived or expired ones",
            ));
        }
        let query = text.clone().or_else(|| entity.clone()).unwrap_or_default();
        crate::tools::memories::check_query(&query).map_err(Problem::bad_request)?;
        crate::limits::check_opt("entity", entity.as_deref(), 200).map_err(Problem::bad_request)?;
        let embedding = super::embed(&s, &c, "query", &query, crate::tools::MAX_QUERY_BYTES).await?;
        read(
            &s,
            &c,
            "SELECT coalesce(jsonb_agg(to_jsonb(h) - 'time_window' - 'ordinality' - 'staleness_score'
                                       ORDER BY h.ordinality), '[]')
             FROM engram.search(query_embedding => $1, query_text => $2, k => $3, kinds => $4, tags_all => $5,
                 namespace_prefix => $6, valid_at => $7::text::timestamptz, entity => $8::text,
                 created_after => $9::text::timestamptz, created_before => $10::text::timestamptz,
                 min_similarity => CASE WHEN $12::boolean THEN -1::real END) WITH ORDINALITY h
             WHERE h.ordinality > $11",
            &[
                &embedding,
                &query,
                &limit,
                &kinds,
                &tags,
                &namespace,
                &valid_at,
                &entity,
                &created_after,
                &created_before,
                &skip,
                // browsing an entity's memories: every one of them, not only
                // those whose words or meaning match its name
                &text.is_none(),
            ],
        )
        .await?
    } else {
        read(
            &s,
            &c,
            "SELECT coalesce(jsonb_agg(to_jsonb(l) - 'next_cursor' - 'ordinality' ORDER BY l.ordinality), '[]')
             FROM engram.list(kinds => $1, tags_all => $2, status => coalesce($3, 'active'), \"limit\" => $4,
                 valid_at => $5::text::timestamptz, namespace_prefix => $6,
                 created_after => $7::text::timestamptz, created_before => $8::text::timestamptz) WITH ORDINALITY l
             WHERE l.ordinality > $9",
            &[
                &kinds,
                &tags,
                &status,
                &limit,
                &valid_at,
                &namespace,
                &created_after,
                &created_before,
                &skip,
            ],
        )
        .await?
    };
    let rows = match rows {
        Value::Array(rows) => rows,
        _ => Vec::new(),
    };
    let size_usize = usize::try_from(size).unwrap_or(1);
    let has_more = rows.len() > size_usize;
    let memories: Vec<Value> = rows.into_iter().take(size_usize).collect();
    Ok(Json(json!({
        "memories": memories,
        "page": page,
        "page_size": size,
        "has_more": has_more,
        "searched": searched,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditBody {
    content: Option<String>,
    tags: Option<Vec<String>>,
    reason: Option<String>,
}

/// A person's correction of a memory's content or tags (a new revision).
async fn edit(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Json(b): Json<EditBody>,
) -> V1<Json<Value>> {
    let body = UpdateBody {
        content: b.content,
        tags: b.tags,
        metadata: None,
        reason: b.reason.or_else(|| Some("edited in the memory browser".into())),
        valid_to: None,
        user_id: None,
    };
    let Json(r) = memories::update(State(s), Extension(c), Path(id), Json(body)).await?;
    Ok(Json(json!({ "id": r.id, "revision": r.revision })))
}

/// The owner's figures (engram.stats): totals by kind, status and source,
/// growth, writes per day, search misses, captured events and quotas.
async fn stats(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<UserQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    Ok(Json(read(&s, &c, "SELECT engram.stats()", &[]).await?))
}

/// The owners list's query: a name prefix, the last owner of the page
/// before, a page size.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnersQuery {
    prefix: Option<String>,
    after: Option<String>,
    limit: Option<i32>,
}

/// Every owner with what it holds (engram.owners): platform tokens only,
/// which may act for any owner; the database refuses a user token.
async fn owners(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<OwnersQuery>,
) -> V1<Json<Value>> {
    // The token's own call, whoever the dashboard acts for: the list is
    // nobody's memory and goes in nobody's audit trail.
    let c = Caller {
        act_as: None,
        conversation: None,
        ..c
    };
    let prefix = q.prefix.filter(|p| !p.is_empty());
    let after = q.after.filter(|a| !a.is_empty());
    Ok(Json(
        read(
            &s,
            &c,
            "SELECT coalesce(jsonb_agg(to_jsonb(o) ORDER BY o.owner COLLATE \"C\"), '[]'::jsonb)
             FROM engram.owners(prefix => $1, after => $2, \"limit\" => coalesce($3, 50)) o",
            &[&prefix, &after, &q.limit],
        )
        .await?,
    ))
}

/// An entity's page (engram.about) with the spellings its memories write
/// it in (`aliases`: one entity whatever the case and accents, each name
/// with how many of the listed memories write it so).
async fn entity(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(name): Path<String>,
    Query(q): Query<UserQuery>,
) -> V1<Json<Value>> {
    let query = AboutQuery {
        limit: Some(100),
        user_id: q.user_id,
    };
    let Json(about) = misc::about(State(s), Extension(c), Path(name.clone()), Query(query)).await?;
    // Reading up to 200 memories for names is CPU work: off the async
    // workers, so other requests do not wait behind it.
    let (about, aliases) = tokio::task::spawn_blocking(move || {
        let aliases = spellings(&about, &name);
        (about, aliases)
    })
    .await
    .map_err(|_| {
        Problem::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "reading the entity's spellings failed",
        )
    })?;
    let mut about = about;
    about["aliases"] = aliases;
    Ok(Json(about))
}

/// The names the listed memories of an entity's page write it as: each
/// with how many of them write it so, most written first.
fn spellings(about: &Value, asked: &str) -> Value {
    let usual = about["entity"]["name"].as_str().unwrap_or(asked);
    let key = engram_core::entities::key(usual);
    let mut counted: Vec<(String, u64)> = Vec::new();
    for item in ["facts", "history"]
        .iter()
        .filter_map(|k| about[*k].as_array())
        .flatten()
    {
        let content = item["content"].as_str().unwrap_or_default();
        let mut seen = Vec::new();
        for e in engram_core::entities::of_memory::<&str>(content, &[]) {
            if e.key == key && !seen.contains(&e.name) {
                seen.push(e.name);
            }
        }
        for n in seen {
            match counted.iter_mut().find(|(s, _)| *s == n) {
                Some((_, count)) => *count += 1,
                None => counted.push((n, 1)),
            }
        }
    }
    counted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    json!(counted
        .into_iter()
        .map(|(name, memories)| json!({ "name": name, "memories": memories }))
        .collect::<Vec<_>>())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    /// At most this many, the latest (default 200, at most 1000).
    limit: Option<i32>,
    user_id: Option<String>,
}

/// A session's captured events, oldest first (engram.session_events, every
/// event, not only those since its last summary).
async fn session_events(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT jsonb_build_object('session_id', $1::text,
                   'events', coalesce(jsonb_agg(to_jsonb(e) - 'ordinality' ORDER BY e.ordinality), '[]'))
         FROM engram.session_events(session_id => $1::text, since_last_summary => false,
             lim => coalesce($2::integer, 200)) WITH ORDINALITY e",
        &[&id, &q.limit],
    )
    .await?;
    Ok(Json(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entity_page_lists_the_spellings_it_merges() {
        let about = json!({
            "entity": {"name": "José Díaz", "kind": "person", "memories": 3},
            "facts": [{"content": "José Díaz leads the Lisbon office"},
                      {"content": "Jose Diaz reviews the budget; José Díaz signs it"}],
            "history": [{"content": "José Díaz's standup is at 9am"}],
        });
        assert_eq!(
            spellings(&about, "jose diaz"),
            // (a memory names an entity once, as it first writes it)
            json!([{"name": "José Díaz", "memories": 2}, {"name": "Jose Diaz", "memories": 1}])
        );
        assert_eq!(spellings(&json!({"entity": {"name": "Nobody"}}), "Nobody"), json!([]));
    }

    #[test]
    fn filters_given_empty_are_absent() {
        assert_eq!(some_text(Some("  ".into())), None);
        assert_eq!(some_text(Some(" a ".into())).as_deref(), Some("a"));
        assert_eq!(
            some_list(Some(vec![" ".into(), "x".into()])),
            Some(vec!["x".to_string()])
        );
        assert_eq!(some_list(Some(vec![String::new()])), None);
    }
}
