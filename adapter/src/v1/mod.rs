//! `/v1`: the JSON API for application code, beside MCP. Same tokens,
//! headers and binding as MCP; each call is one engram SQL function in one
//! transaction bound to the caller. The OpenAPI 3.1 document
//! (`/v1/openapi.json`) is generated from the handlers below: each route is
//! registered with `utoipa_axum::routes!`, which reads the same
//! `#[utoipa::path]` attribute that documents it (a route added with
//! `OpenApiRouter::route` would go undocumented: clippy refuses that call).
//! Errors are RFC 9457 problem details (`problem`). The `/api` routes of
//! earlier releases are aliases of these handlers (`aliases`).

pub mod aliases;
mod continuity;
mod items;
mod memories;
mod misc;
pub mod problem;
mod resources;

use crate::caller::Caller;
use crate::tools::Shared;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use problem::Problem;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use tokio_postgres::types::ToSql;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

type V1<T> = Result<T, Problem>;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "engram",
        description = "Long-term memory for AI agents, in PostgreSQL: the JSON API for application code. \
                       Authenticate with `Authorization: Bearer <token>`; a platform token names the user per \
                       request (`user_id` in the body or query, or the `X-User-Id` header). Errors are RFC 9457 \
                       problem details with the SQLSTATE and hint of the database. Timestamps are RFC 3339."
    ),
    components(schemas(Problem)),
    tags(
        (name = "memories", description = "Remember, search, list, correct and forget memories"),
        (name = "items", description = "Keyed memories: put, get and delete by namespace and key"),
        (name = "context", description = "Prompt-ready context, entities, embeddings"),
        (name = "tokens", description = "User tokens that a platform token mints, and erasure"),
        (name = "continuity", description = "Slots, workspaces and their states, captured events and sessions"),
        (name = "resources", description = "Resources that a platform publishes to its users' agents"),
    )
)]
struct ApiDoc;

/// What every operation shares: bearer authentication, and problem
/// details for every error status.
struct Conventions;

impl Modify for Conventions {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        let problem = ResponseBuilder::new()
            .description("An error, as RFC 9457 problem details (503 carries Retry-After)")
            .content(
                problem::CONTENT_TYPE,
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("Problem")))
                    .build(),
            )
            .build();
        let bearer = utoipa::openapi::security::SecurityRequirement::new("bearer", Vec::<String>::new());
        for item in doc.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                op.responses.responses.insert("default".into(), problem.clone().into());
                op.security.get_or_insert_with(Vec::new).push(bearer.clone());
                // Handlers of different modules share names (get, list,
                // update): the tag makes each operationId unique, as
                // OpenAPI requires and code generators need.
                if let (Some(tag), Some(id)) = (op.tags.as_ref().and_then(|t| t.first()), op.operation_id.as_mut()) {
                    *id = format!("{tag}_{id}");
                }
            }
        }
    }
}

/// The `/v1` routes and their OpenAPI document.
pub fn router(shared: Arc<Shared>) -> (Router, Document) {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").into();
    let (router, doc) = OpenApiRouter::with_openapi(doc)
        .routes(routes!(memories::remember, memories::list))
        .routes(routes!(memories::recall, memories::update, memories::forget))
        .routes(routes!(memories::reopen))
        .routes(routes!(memories::flag))
        .routes(routes!(memories::revisions))
        .routes(routes!(memories::audit))
        .routes(routes!(memories::search))
        .routes(routes!(items::put, items::get, items::delete))
        .routes(routes!(items::namespaces))
        .routes(routes!(misc::context))
        .routes(routes!(misc::entities))
        .routes(routes!(misc::about))
        .routes(routes!(misc::embed))
        .routes(routes!(misc::mint_token))
        .routes(routes!(misc::revoke_token))
        .routes(routes!(misc::erase_user))
        .routes(routes!(continuity::slots))
        .routes(routes!(continuity::slot, continuity::set_slot, continuity::delete_slot))
        .routes(routes!(continuity::workspaces, continuity::create_workspace))
        .routes(routes!(
            continuity::workspace,
            continuity::update_workspace,
            continuity::archive_workspace
        ))
        .routes(routes!(continuity::states, continuity::save_state))
        .routes(routes!(continuity::state, continuity::archive_state))
        .routes(routes!(continuity::capture))
        .routes(routes!(continuity::sessions))
        .routes(routes!(resources::list, resources::create))
        .routes(routes!(resources::get, resources::update, resources::delete))
        .with_state(shared)
        .split_for_parts();
    let router = router
        .layer(axum::middleware::from_fn(user_in_query))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked));
    let mut doc = doc;
    // after the routes: it completes each of their operations
    Conventions.modify(&mut doc);
    (router, doc)
}

/// The caller a request acts as: the authenticated one, for `user_id` when
/// the request names one. Only a platform token names another user; a
/// `user_id` that differs from `X-User-Id` is ambiguous. `/v1` acts for
/// users: the internal contexts (ghost and agent conversations) are MCP's.
fn acting(c: &Caller, user_id: Option<&str>) -> V1<Caller> {
    match c.context() {
        Err(e) => return Err(Problem::bad_request(e)),
        Ok(Some(_)) => {
            return Err(Problem::bad_request(
                "/v1 acts for users: X-Internal-Type and X-Ghost-* (ghost and agent conversations) are for MCP; \
                 leave them out",
            ))
        }
        Ok(None) => {}
    }
    let Some(user) = user_id else { return Ok(c.clone()) };
    let user = user.trim();
    if user.is_empty() {
        return Err(Problem::bad_request(
            "user_id is empty; name the user, or leave it out to act for the token's own owner",
        ));
    }
    crate::limits::check_len("user_id", user, crate::limits::MAX_ID_CHARS).map_err(Problem::bad_request)?;
    if let Some(header) = c.act_as.as_deref().filter(|h| *h != user) {
        return Err(Problem::bad_request(format!(
            "user_id '{}' differs from the user named in X-User-Id or the query ('{}'); name the user once",
            crate::limits::clip(user),
            crate::limits::clip(header)
        )));
    }
    if !c.platform {
        if user == c.owner {
            return Ok(c.clone());
        }
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "user_id needs a platform token; a user token acts only for its own owner (leave user_id out)",
        ));
    }
    Ok(Caller {
        act_as: Some(user.to_string()),
        owner: user.to_string(),
        // acting for a user: no conversation implied by the connection
        conversation: None,
        ..c.clone()
    })
}

/// A `user_id` in the query string names the user of every `/v1` call,
/// those with a JSON body too: the request's caller acts for it from here
/// on (`acting`: platform tokens only), and a `user_id` in the body must
/// agree. Sent twice, or empty, it is an error.
pub(crate) async fn user_in_query(mut req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let pairs = match query_pairs(req.uri().query().unwrap_or_default()) {
        Ok(p) => p,
        Err(e) => return Problem::bad_request(e).into_response(),
    };
    // A call with a JSON body takes its arguments there: a query parameter
    // other than user_id (a misspelt one, say) would be ignored.
    let with_body = matches!(req.method().as_str(), "POST" | "PUT" | "PATCH");
    if let Some((other, _)) = pairs.iter().find(|(k, _)| with_body && k != "user_id") {
        return Problem::bad_request(format!(
            "this call takes its arguments in the JSON body; the query string may name only user_id, not '{}'",
            crate::limits::clip(other)
        ))
        .into_response();
    }
    let mut named = pairs.into_iter().filter(|(k, _)| k == "user_id").map(|(_, v)| v);
    let Some(user) = named.next() else {
        return next.run(req).await;
    };
    if named.next().is_some() {
        return Problem::bad_request("user_id was sent more than once; name the user once").into_response();
    }
    let Some(caller) = req.extensions().get::<Caller>().cloned() else {
        return next.run(req).await;
    };
    match acting(&caller, Some(&user)) {
        Ok(c) => {
            req.extensions_mut().insert(c);
            next.run(req).await
        }
        Err(p) => p.into_response(),
    }
}

/// The query string's parameters, percent-decoded (`+` is a space); a
/// parameter that does not decode to UTF-8 is an error rather than a
/// lossy guess (two different user ids must never become one).
fn query_pairs(query: &str) -> Result<Vec<(String, String)>, String> {
    fn decode(part: &str) -> Result<String, String> {
        let bytes = part.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' => {
                    let hex = bytes
                        .get(i + 1..i + 3)
                        .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                        .and_then(|h| std::str::from_utf8(h).ok())
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .ok_or_else(|| {
                            format!("the query string has a bad escape near '{}'", crate::limits::clip(part))
                        })?;
                    out.push(hex);
                    i += 2;
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8(out).map_err(|_| "the query string is not UTF-8 once decoded; encode text as UTF-8".into())
    }
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Ok((decode(k)?, decode(v)?))
        })
        .collect()
}

pub(crate) fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!(panic = %crate::tools::panic_message(&*panic), "a /v1 handler panicked");
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "engram-mcp failed on this request (an internal error, logged by the server); nothing more was done",
    )
    .into_response()
}

/// One bound call: the first column of the first row (JSON null when none).
async fn one(s: &Shared, c: &Caller, sql: &str, params: &[&(dyn ToSql + Sync)]) -> V1<Value> {
    let rows = s.db.call(c, sql, params).await?;
    match rows.first() {
        Some(r) => Ok(r
            .try_get::<_, Option<Value>>(0)
            .map_err(internal)?
            .unwrap_or(Value::Null)),
        None => Ok(Value::Null),
    }
}

/// As `one`, for a call that only reads (served by the read replica when there is one).
async fn read(s: &Shared, c: &Caller, sql: &str, params: &[&(dyn ToSql + Sync)]) -> V1<Value> {
    crate::db::reading(one(s, c, sql, params)).await
}

/// `one` for a read that refreshes TTLs (a write, on the primary), else `read`.
async fn read_refreshing(
    s: &Shared,
    c: &Caller,
    refresh_ttl: Option<bool>,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> V1<Value> {
    if refresh_ttl == Some(true) {
        one(s, c, sql, params).await
    } else {
        read(s, c, sql, params).await
    }
}

/// The query string of a call that takes nothing but the user.
#[derive(serde::Deserialize, utoipa::IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UserQuery {
    /// The user to act for (platform tokens).
    pub user_id: Option<String>,
}

/// What a delete by name answers.
#[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Deleted {
    /// false: nothing was there.
    pub deleted: bool,
}

/// A `reason` within engram's limit.
fn check_reason(reason: Option<&str>) -> V1<()> {
    crate::limits::check_opt("reason", reason, crate::limits::MAX_REASON_CHARS).map_err(Problem::bad_request)
}

/// The database's JSON as the documented answer type: a mismatch is a bug
/// of engram-mcp (500), never an answer that breaks its own schema.
fn typed<T: DeserializeOwned>(v: Value) -> V1<T> {
    serde_json::from_value(v).map_err(internal)
}

fn internal(e: impl std::fmt::Display) -> Problem {
    tracing::error!(error = %e, "a /v1 answer did not have the documented shape");
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "engram-mcp could not read the database's answer (an internal error, logged by the server)",
    )
}

/// Embeds `text` within the size limit the MCP tools use (checked before
/// the embedder works; the database checks them again).
async fn embed(s: &Shared, c: &Caller, what: &str, text: &str, limit: usize) -> V1<pgvector::Vector> {
    crate::tools::check_size(what, text, limit).map_err(|e| Problem::new(StatusCode::PAYLOAD_TOO_LARGE, e))?;
    s.embed(c, text)
        .await
        .map_err(|e| Problem::new(StatusCode::SERVICE_UNAVAILABLE, e))
}

/// A moment argument (RFC 3339 or a date), for the database as RFC 3339.
fn moment(name: &str, value: Option<&str>) -> V1<Option<String>> {
    crate::tools::memories::moment(name, value).map_err(Problem::bad_request)
}

/// A memory id from the path.
fn memory_id(id: &str) -> V1<uuid::Uuid> {
    uuid_of("memory id (a UUID); list or search memories to find ids", id)
}

/// An id from the path, `what` naming it in the error.
fn uuid_of(what: &str, id: &str) -> V1<uuid::Uuid> {
    uuid::Uuid::parse_str(id.trim())
        .map_err(|_| Problem::bad_request(format!("'{}' is not a {what}", crate::limits::clip(id))))
}

/// A query parameter given empty (`namespace_prefix=`) is there and means
/// "all of them"; serde_html_form would read an empty optional value as
/// absent.
fn given<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    <String as serde::Deserialize>::deserialize(d).map(Some)
}

/// A namespace in a query string: labels joined by dots (`a.b` is
/// `["a", "b"]`; the empty string is the root, `[]`).
fn dotted(namespace: Option<&str>) -> Option<Vec<String>> {
    namespace.map(|n| match n {
        "" => Vec::new(),
        n => n.split('.').map(str::to_string).collect(),
    })
}

/// A TTL in seconds (above 0, within the database's limit: engram-core's).
fn check_ttl(ttl: Option<f64>) -> V1<()> {
    const MAX: f64 = engram_core::limits::MAX_TTL_DAYS as f64 * 86_400.0;
    match ttl {
        Some(t) if !(t.is_finite() && t > 0.0 && t <= MAX) => Err(Problem::bad_request(format!(
            "ttl must be a number of seconds above 0 and at most {MAX}; leave it out for a memory that does not expire"
        ))),
        _ => Ok(()),
    }
}

fn ok<T: serde::Serialize>(status: StatusCode, body: T) -> V1<Response> {
    Ok((status, Json(body)).into_response())
}

/// Every error answer under `/v1` (axum's rejections, a wrong method or
/// path, the Host guard's and authentication's refusals) as problem details.
pub async fn problems_under_v1(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let path = req.uri().path();
    let v1 = path == "/v1" || path.starts_with("/v1/");
    let response = next.run(req).await;
    if v1 {
        problem::as_problem(response).await
    } else {
        response
    }
}

/// The OpenAPI document, served at `/v1/openapi.json`.
pub fn document_route(doc: Document) -> Router {
    let doc = Arc::new(doc);
    Router::new().route(
        "/v1/openapi.json",
        axum::routing::get(move || {
            let doc = doc.clone();
            async move { Json(doc.as_ref().clone()) }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(platform: bool, act_as: Option<&str>) -> Caller {
        Caller {
            token: Some("eg_x".into()),
            act_as: act_as.map(str::to_string),
            owner: act_as.unwrap_or("app").into(),
            internal: Ok(None),
            session_id: None,
            conversation: None,
            platform,
        }
    }

    #[test]
    fn only_platform_tokens_name_other_users() {
        let c = acting(&caller(true, None), Some("alice")).unwrap();
        assert_eq!((c.owner.as_str(), c.act_as.as_deref()), ("alice", Some("alice")));
        assert_eq!(acting(&caller(false, None), Some("alice")).unwrap_err().status, 403);
        // a user token naming its own owner is not an error
        assert_eq!(acting(&caller(false, None), Some("app")).unwrap().act_as, None);
        assert_eq!(
            acting(&caller(true, Some("bob")), Some("alice")).unwrap_err().status,
            400
        );
        assert_eq!(acting(&caller(true, Some("bob")), Some("bob")).unwrap().owner, "bob");
        assert_eq!(acting(&caller(true, None), Some(" ")).unwrap_err().status, 400);
        assert_eq!(
            acting(&caller(true, None), Some(&"u".repeat(300))).unwrap_err().status,
            400
        );
        let mut ghost = caller(true, None);
        ghost.internal = Err("X-Ghost-Owner was sent twice".into());
        assert_eq!(acting(&ghost, None).unwrap_err().status, 400);
    }

    #[test]
    fn every_operation_is_documented_with_problems_and_bearer_auth() {
        let mut doc = ApiDoc::openapi();
        doc.paths.paths.insert("/v1/x".into(), Default::default());
        doc.paths.paths.get_mut("/v1/x").unwrap().get = Some(Default::default());
        Conventions.modify(&mut doc);
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["openapi"], "3.1.0");
        assert!(json["components"]["securitySchemes"]["bearer"].is_object());
        let op = &json["paths"]["/v1/x"]["get"];
        assert_eq!(op["security"][0]["bearer"], serde_json::json!([]));
        assert!(op["responses"]["default"]["content"][problem::CONTENT_TYPE].is_object());
    }

    #[test]
    fn query_strings_decode_strictly() {
        assert_eq!(
            query_pairs("user_id=al+ice&%75ser%5Fid=b%C3%A9&x").unwrap(),
            vec![
                ("user_id".into(), "al ice".into()),
                ("user_id".into(), "bé".into()),
                ("x".into(), String::new())
            ]
        );
        assert!(query_pairs("user_id=%FF").is_err(), "not UTF-8: refused, not replaced");
        assert!(query_pairs("user_id=%F").is_err());
        assert!(query_pairs("user_id=%+5").is_err(), "two hex digits, nothing else");
        assert_eq!(query_pairs("").unwrap(), vec![]);
    }

    #[test]
    fn namespaces_in_query_strings_are_dot_joined() {
        assert_eq!(dotted(Some("users.alice")), Some(vec!["users".into(), "alice".into()]));
        assert_eq!(dotted(None), None);
        assert_eq!(dotted(Some("")), Some(vec![]));
    }
}
