//! Continuity for application code: slots (small labelled texts an agent
//! keeps in view), workspaces and their saved states, captured events and
//! sessions. The same SQL functions as the MCP tools of the `slots`,
//! `workspace` and `events` groups.

use super::{acting, ok, one, read, Deleted, UserQuery, V1};
use crate::caller::Caller;
use crate::tools::{Shared, MAX_CONTENT_BYTES};
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

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SlotQuery {
    /// The workspace the slot belongs to (none: the user's own slots).
    pub workspace: Option<String>,
    pub user_id: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SlotBody {
    pub content: String,
    /// Add to the slot's content instead of replacing it.
    pub append: Option<bool>,
    pub workspace: Option<String>,
    /// Most characters the slot keeps (default 2000).
    pub size_limit: Option<i32>,
    /// Always included in the context.
    pub pinned: Option<bool>,
    pub user_id: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Slot {
    pub label: String,
    pub workspace: Option<String>,
    pub content: String,
    pub chars: Option<i32>,
    pub size_limit: Option<i32>,
    pub pinned: Option<bool>,
    pub updated_at: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Slots {
    pub slots: Vec<Slot>,
}

/// The user's slots.
#[utoipa::path(get, path = "/v1/slots", tag = "continuity", params(SlotQuery),
    responses((status = 200, description = "The slots", body = Slots)))]
pub async fn slots(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<SlotQuery>,
) -> V1<Json<Slots>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT jsonb_build_object('slots', coalesce(jsonb_agg(to_jsonb(x) - 'ordinality' ORDER BY x.ordinality), '[]'))
         FROM engram.slot_list(workspace => $1::text) WITH ORDINALITY x",
        &[&q.workspace],
    )
    .await?;
    Ok(Json(super::typed(v)?))
}

/// One slot's content.
#[utoipa::path(get, path = "/v1/slots/{label}", tag = "continuity",
    params(("label" = String, Path, description = "The slot's label"), SlotQuery),
    responses((status = 200, description = "The slot", body = Slot)))]
pub async fn slot(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(label): Path<String>,
    Query(q): Query<SlotQuery>,
) -> V1<Json<Slot>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT to_jsonb(x) FROM engram.slot_list(workspace => $2::text) x WHERE x.label = $1",
        &[&label, &q.workspace],
    )
    .await?;
    if v.is_null() {
        return Err(Problem::not_found(format!(
            "no slot '{}'; GET /v1/slots lists them",
            crate::limits::clip(&label)
        )));
    }
    Ok(Json(super::typed(v)?))
}

/// Set (or append to) a slot; created when missing.
#[utoipa::path(put, path = "/v1/slots/{label}", tag = "continuity", request_body = SlotBody,
    params(("label" = String, Path, description = "The slot's label")),
    responses((status = 200, description = "The slot", body = Slot)))]
pub async fn set_slot(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(label): Path<String>,
    Json(b): Json<SlotBody>,
) -> V1<Json<Slot>> {
    let c = acting(&c, b.user_id.as_deref())?;
    crate::tools::check_size("content", &b.content, MAX_CONTENT_BYTES)
        .map_err(|e| Problem::new(StatusCode::PAYLOAD_TOO_LARGE, e))?;
    let v = if b.append == Some(true) {
        one(
            &s,
            &c,
            "SELECT to_jsonb(engram.slot_append(label => $1, content => $2, workspace => $3::text))",
            &[&label, &b.content, &b.workspace],
        )
        .await?
    } else {
        one(
            &s,
            &c,
            "SELECT to_jsonb(engram.slot_set(label => $1, content => $2, workspace => $3::text,
                 size_limit => coalesce($4::integer, 2000), pinned => coalesce($5::boolean, false)))",
            &[&label, &b.content, &b.workspace, &b.size_limit, &b.pinned],
        )
        .await?
    };
    Ok(Json(super::typed(v)?))
}

/// Delete a slot.
#[utoipa::path(delete, path = "/v1/slots/{label}", tag = "continuity",
    params(("label" = String, Path, description = "The slot's label"), SlotQuery),
    responses((status = 200, description = "Deleted, or there was none", body = Deleted)))]
pub async fn delete_slot(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(label): Path<String>,
    Query(q): Query<SlotQuery>,
) -> V1<Json<Deleted>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(engram.slot_delete(label => $1, workspace => $2::text))",
        &[&label, &q.workspace],
    )
    .await?;
    Ok(Json(Deleted {
        deleted: super::typed(v)?,
    }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ArchivedQuery {
    /// Include archived ones.
    pub include_archived: Option<bool>,
    pub user_id: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ArchiveQuery {
    /// Restore an archived one instead.
    pub restore: Option<bool>,
    pub user_id: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceBody {
    /// (create) The workspace's name, unique per user.
    pub name: Option<String>,
    /// (update) A new name.
    pub new_name: Option<String>,
    pub description: Option<String>,
    pub root_folder: Option<String>,
    pub purpose: Option<String>,
    pub workflows: Option<Vec<String>>,
    pub key_files: Option<Vec<String>>,
    /// A JSON object.
    #[schema(value_type = Option<Object>)]
    pub preferences: Option<Value>,
    pub user_id: Option<String>,
}

/// The user's workspaces: names, first lines, state counts.
#[utoipa::path(get, path = "/v1/workspaces", tag = "continuity", params(ArchivedQuery),
    responses((status = 200, description = "The workspaces", body = Object)))]
pub async fn workspaces(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<ArchivedQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT jsonb_build_object('workspaces', coalesce(jsonb_agg(to_jsonb(w) - 'ordinality' ORDER BY w.ordinality), '[]'))
         FROM engram.workspace_list(include_archived => coalesce($1::boolean, false)) WITH ORDINALITY w",
        &[&q.include_archived],
    )
    .await?;
    Ok(Json(v))
}

/// Create a workspace.
#[utoipa::path(post, path = "/v1/workspaces", tag = "continuity", request_body = WorkspaceBody,
    responses((status = 201, description = "The workspace", body = Object)))]
pub async fn create_workspace(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Json(b): Json<WorkspaceBody>,
) -> V1<Response> {
    let c = acting(&c, b.user_id.as_deref())?;
    let v = one(
        &s,
        &c,
        "SELECT engram.workspace_create(name => $1::text, description => coalesce($2::text, ''), root_folder => $3::text,
             purpose => $4::text, workflows => coalesce($5::text[], '{}'), key_files => coalesce($6::text[], '{}'),
             preferences => coalesce($7::jsonb, '{}'))",
        &[&b.name, &b.description, &b.root_folder, &b.purpose, &b.workflows, &b.key_files, &b.preferences],
    )
    .await?;
    ok(StatusCode::CREATED, v)
}

/// A workspace in full, with its latest states and sessions.
#[utoipa::path(get, path = "/v1/workspaces/{name}", tag = "continuity",
    params(("name" = String, Path, description = "The workspace"), UserQuery),
    responses((status = 200, description = "The workspace", body = Object)))]
pub async fn workspace(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(name): Path<String>,
    Query(q): Query<UserQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    Ok(Json(
        one(&s, &c, "SELECT engram.workspace_load(name => $1::text)", &[&name]).await?,
    ))
}

/// Change a workspace (what is given replaces what was).
#[utoipa::path(patch, path = "/v1/workspaces/{name}", tag = "continuity", request_body = WorkspaceBody,
    params(("name" = String, Path, description = "The workspace")),
    responses((status = 200, description = "The workspace", body = Object)))]
pub async fn update_workspace(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(name): Path<String>,
    Json(b): Json<WorkspaceBody>,
) -> V1<Json<Value>> {
    let c = acting(&c, b.user_id.as_deref())?;
    if b.name.is_some() {
        return Err(Problem::bad_request(
            "the workspace is named in the path; rename it with new_name",
        ));
    }
    let v = one(
        &s,
        &c,
        "SELECT engram.workspace_update(name => $1::text, description => $2::text, root_folder => $3::text,
             purpose => $4::text, workflows => $5::text[], key_files => $6::text[], preferences => $7::jsonb,
             new_name => $8::text)",
        &[
            &name,
            &b.description,
            &b.root_folder,
            &b.purpose,
            &b.workflows,
            &b.key_files,
            &b.preferences,
            &b.new_name,
        ],
    )
    .await?;
    Ok(Json(v))
}

/// Archive a workspace (or restore it with `restore=true`).
#[utoipa::path(delete, path = "/v1/workspaces/{name}", tag = "continuity",
    params(("name" = String, Path, description = "The workspace"), ArchiveQuery),
    responses((status = 200, description = "Archived or restored", body = Object)))]
pub async fn archive_workspace(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(name): Path<String>,
    Query(q): Query<ArchiveQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = one(
        &s,
        &c,
        "SELECT engram.workspace_archive(name => $1::text, restore => coalesce($2::boolean, false))",
        &[&name, &q.restore],
    )
    .await?;
    Ok(Json(v))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StateBody {
    /// The state's name, unique in its workspace (a state never changes).
    pub name: String,
    pub description: Option<String>,
    pub conversation_context: Option<String>,
    pub active_task: Option<String>,
    pub active_files: Option<Vec<String>>,
    pub next_steps: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    pub user_id: Option<String>,
}

/// A workspace's states, newest first.
#[utoipa::path(get, path = "/v1/workspaces/{name}/states", tag = "continuity",
    params(("name" = String, Path, description = "The workspace"), ArchivedQuery),
    responses((status = 200, description = "The states", body = Object)))]
pub async fn states(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(name): Path<String>,
    Query(q): Query<ArchivedQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT jsonb_build_object('states', coalesce(jsonb_agg(to_jsonb(x) - 'ordinality' ORDER BY x.ordinality), '[]'))
         FROM engram.state_list(workspace => $1::text, include_archived => coalesce($2::boolean, false)) WITH ORDINALITY x",
        &[&name, &q.include_archived],
    )
    .await?;
    Ok(Json(v))
}

/// Save a state of the work (immutable; its name stays taken).
#[utoipa::path(post, path = "/v1/workspaces/{name}/states", tag = "continuity", request_body = StateBody,
    params(("name" = String, Path, description = "The workspace")),
    responses((status = 201, description = "Saved", body = Object)))]
pub async fn save_state(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path(name): Path<String>,
    Json(b): Json<StateBody>,
) -> V1<Response> {
    let c = acting(&c, b.user_id.as_deref())?;
    let v = one(
        &s,
        &c,
        "SELECT engram.state_save(workspace => $1::text, name => $2::text, description => coalesce($3::text, ''),
             conversation_context => coalesce($4::text, ''), active_task => coalesce($5::text, ''),
             active_files => coalesce($6::text[], '{}'), next_steps => coalesce($7::text[], '{}'),
             tags => coalesce($8::text[], '{}'))",
        &[
            &name,
            &b.name,
            &b.description,
            &b.conversation_context,
            &b.active_task,
            &b.active_files,
            &b.next_steps,
            &b.tags,
        ],
    )
    .await?;
    ok(StatusCode::CREATED, v)
}

/// A state in full.
#[utoipa::path(get, path = "/v1/workspaces/{name}/states/{state}", tag = "continuity",
    params(("name" = String, Path, description = "The workspace"), ("state" = String, Path, description = "The state"),
           UserQuery),
    responses((status = 200, description = "The state", body = Object)))]
pub async fn state(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path((name, state)): Path<(String, String)>,
    Query(q): Query<UserQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    Ok(Json(
        one(
            &s,
            &c,
            "SELECT engram.state_load(workspace => $1::text, name => $2::text)",
            &[&name, &state],
        )
        .await?,
    ))
}

/// Archive a state (or restore it with `restore=true`).
#[utoipa::path(delete, path = "/v1/workspaces/{name}/states/{state}", tag = "continuity",
    params(("name" = String, Path, description = "The workspace"), ("state" = String, Path, description = "The state"),
           ArchiveQuery),
    responses((status = 200, description = "Archived or restored", body = Object)))]
pub async fn archive_state(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Path((name, state)): Path<(String, String)>,
    Query(q): Query<ArchiveQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = one(
        &s,
        &c,
        "SELECT engram.state_archive(workspace => $1::text, name => $2::text, restore => coalesce($3::boolean, false))",
        &[&name, &state, &q.restore],
    )
    .await?;
    Ok(Json(v))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventBody {
    /// conversation, tool_invocation, file_read, file_write, code_approval, code_rejection, observation or summary.
    pub event_type: String,
    /// What happened; tool and file events may leave it out.
    pub content: Option<String>,
    /// The conversation (default: the X-Session-Id header).
    pub session_id: Option<String>,
    /// dual (default), agent or emulation.
    pub mode: Option<String>,
    /// owner (default) or guest.
    pub role: Option<String>,
    pub workspace: Option<String>,
    pub tool_name: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub tool_input: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub tool_output: Option<Value>,
    pub success: Option<bool>,
    pub error: Option<String>,
    pub duration_ms: Option<i32>,
    pub file_path: Option<String>,
    pub parent_event_id: Option<Uuid>,
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub importance: Option<f32>,
    /// When it happened (RFC 3339); default now.
    pub occurred_at: Option<String>,
    pub user_id: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Captured {
    /// captured, or skipped (the mode keeps no such event; nothing was written).
    pub status: String,
    pub id: Option<Uuid>,
    pub reason: Option<String>,
    /// The session has enough events since its last summary.
    pub summary_due: bool,
}

/// Capture an event of a conversation (embedded off the write path).
#[utoipa::path(post, path = "/v1/events", tag = "continuity", request_body = EventBody,
    responses((status = 201, description = "Captured or skipped", body = Captured)))]
pub async fn capture(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Json(b): Json<EventBody>,
) -> V1<Response> {
    let c = acting(&c, b.user_id.as_deref())?;
    if let Some(text) = &b.content {
        crate::tools::check_size("content", text, MAX_CONTENT_BYTES)
            .map_err(|e| Problem::new(StatusCode::PAYLOAD_TOO_LARGE, e))?;
    }
    let occurred_at = super::moment("occurred_at", b.occurred_at.as_deref())?;
    let session = b.session_id.clone().or_else(|| c.session_id.clone());
    let v = one(
        &s,
        &c,
        "SELECT to_jsonb(x) FROM engram.capture(event_type => $1::text, content => $2::text, session_id => $3::text,
             mode => coalesce($4::text, 'dual'), role => coalesce($5::text, 'owner'), workspace => $6::text,
             tool_name => $7::text, tool_input => $8::jsonb, tool_output => $9::jsonb, success => $10::boolean,
             error => $11::text, duration_ms => $12::integer, file_path => $13::text, parent_event_id => $14::uuid,
             importance => coalesce($15::real, 0.5), occurred_at => $16::text::timestamptz) x",
        &[
            &b.event_type,
            &b.content,
            &session,
            &b.mode,
            &b.role,
            &b.workspace,
            &b.tool_name,
            &b.tool_input,
            &b.tool_output,
            &b.success,
            &b.error,
            &b.duration_ms,
            &b.file_path,
            &b.parent_event_id,
            &b.importance,
            &occurred_at,
        ],
    )
    .await?;
    let captured: Captured = super::typed(v)?;
    if captured.status == "captured" {
        s.background.embed(&c);
        if let (true, Some(session)) = (captured.summary_due, &session) {
            s.background.summarize(&c, session);
        }
    }
    ok(StatusCode::CREATED, captured)
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SessionsQuery {
    /// Only the sessions of this workspace.
    pub workspace: Option<String>,
    /// At most this many (default 20).
    pub limit: Option<i32>,
    pub user_id: Option<String>,
}

/// The user's sessions, latest first.
#[utoipa::path(get, path = "/v1/sessions", tag = "continuity", params(SessionsQuery),
    responses((status = 200, description = "The sessions", body = Object)))]
pub async fn sessions(
    State(s): State<Arc<Shared>>,
    Extension(c): Extension<Caller>,
    Query(q): Query<SessionsQuery>,
) -> V1<Json<Value>> {
    let c = acting(&c, q.user_id.as_deref())?;
    let v = read(
        &s,
        &c,
        "SELECT jsonb_build_object('sessions', coalesce(jsonb_agg(to_jsonb(x) - 'ordinality' ORDER BY x.ordinality), '[]'))
         FROM engram.sessions(workspace => $1::text, lim => coalesce($2::integer, 20)) WITH ORDINALITY x",
        &[&q.workspace, &q.limit],
    )
    .await?;
    Ok(Json(v))
}
