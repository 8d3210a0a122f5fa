//! Group `workspace`: workspaces and immutable states (docs/CONTINUITY.md).
//! Each tool is one engram.workspace_* or engram.state_* call; results are
//! the JSON those functions return.

use super::*;
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
pub struct WorkspaceCreateArgs {
    /// Unique among your workspaces, e.g. "billing-api".
    pub name: String,
    /// What the project is; the first line shows in memory_workspace_list.
    pub description: Option<String>,
    /// The project's root folder, e.g. "/home/me/src/billing-api".
    pub root_folder: Option<String>,
    /// What you are trying to achieve in it.
    pub purpose: Option<String>,
    /// How work is done here, one step or command per entry.
    pub workflows: Option<Vec<String>>,
    /// Files that matter most.
    pub key_files: Option<Vec<String>>,
    /// Preferences as a JSON object, e.g. {"style": "terse"}.
    pub preferences: Option<Value>,
}

#[derive(Deserialize, JsonSchema)]
pub struct WorkspaceUpdateArgs {
    /// The workspace to change.
    pub name: String,
    pub description: Option<String>,
    pub root_folder: Option<String>,
    pub purpose: Option<String>,
    pub workflows: Option<Vec<String>>,
    pub key_files: Option<Vec<String>>,
    /// Preferences as a JSON object; replaces the stored ones.
    pub preferences: Option<Value>,
    /// Renames the workspace.
    pub new_name: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct WorkspaceListArgs {
    /// Include archived workspaces (default false).
    pub include_archived: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
pub struct WorkspaceNameArgs {
    pub name: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct WorkspaceArchiveArgs {
    pub name: String,
    /// true restores an archived workspace.
    pub restore: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
pub struct StateSaveArgs {
    /// The workspace to save in.
    pub workspace: String,
    /// Unique in the workspace forever, e.g. "2026-11-23-before-deploy".
    pub name: String,
    pub description: Option<String>,
    /// What the conversation was about, for whoever resumes it.
    pub conversation_context: Option<String>,
    /// The task in progress.
    pub active_task: Option<String>,
    /// Files being worked on.
    pub active_files: Option<Vec<String>>,
    /// What to do next, in order.
    pub next_steps: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
}

#[derive(Deserialize, JsonSchema)]
pub struct StateListArgs {
    pub workspace: String,
    /// Include archived states (default false).
    pub include_archived: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
pub struct StateLoadArgs {
    pub workspace: String,
    /// The state to load; without it, the workspace's latest.
    pub name: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct StateArchiveArgs {
    pub workspace: String,
    pub name: String,
    /// true restores an archived state.
    pub restore: Option<bool>,
}

#[derive(Serialize, JsonSchema)]
pub struct WorkspaceResult {
    /// name, description, root_folder, purpose, workflows, key_files, preferences, status, timestamps.
    pub workspace: Value,
}

#[derive(Serialize, JsonSchema)]
pub struct WorkspaceItem {
    pub name: String,
    /// The first line of the description.
    pub description: String,
    pub status: String,
    /// States saved (not archived).
    pub states: i64,
    pub last_state_at: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct WorkspaceListResult {
    pub workspaces: Vec<WorkspaceItem>,
}

#[derive(Serialize, JsonSchema)]
pub struct WorkspaceLoadResult {
    /// name, description, root_folder, purpose, workflows, key_files, preferences, status, timestamps.
    pub workspace: Value,
    /// The latest states (name, description, active_task, next_steps), newest first.
    pub states: Value,
    /// Recent sessions in this workspace (session_id, events, summaries, last_event_at).
    pub sessions: Value,
    /// Pinned slots visible in the workspace.
    pub slots: Value,
}

#[derive(Serialize, JsonSchema)]
pub struct StateResult {
    /// The state: id, workspace, name, and (when loaded) its content.
    pub state: Value,
}

#[derive(Serialize, JsonSchema)]
pub struct StateItem {
    pub name: String,
    pub description: String,
    pub active_task: String,
    /// The next steps, as memory_state_load returns them.
    pub next_steps: Vec<String>,
    pub tags: Vec<String>,
    pub created_at: String,
    pub archived: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct StateListResult {
    pub states: Vec<StateItem>,
}

fn workspace(rows: Vec<Row>) -> Result<WorkspaceResult, String> {
    json_of(rows).map(|workspace| WorkspaceResult { workspace })
}

fn state(rows: Vec<Row>) -> Result<StateResult, String> {
    json_of(rows).map(|state| StateResult { state })
}

#[tool_router(router = workspace_router, vis = "pub(super)")]
impl EngramServer {
    #[tool(
        description = "Start a workspace: a project you will come back to, with its description, root folder, \
                       purpose, workflows, key files and preferences. Names are unique; workspaces are archived, \
                       never deleted.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_workspace_create(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<WorkspaceCreateArgs>,
    ) -> Result<Json<WorkspaceResult>, String> {
        let sql = "SELECT engram.workspace_create(name => $1::text, description => coalesce($2::text, ''),
                       root_folder => $3::text, purpose => $4::text, workflows => coalesce($5::text[], '{}'),
                       key_files => coalesce($6::text[], '{}'), preferences => coalesce($7::jsonb, '{}'))";
        let params: [&(dyn ToSql + Sync); 7] = [
            &a.name,
            &a.description,
            &a.root_folder,
            &a.purpose,
            &a.workflows,
            &a.key_files,
            &a.preferences,
        ];
        self.run("memory_workspace_create", self.sql(&parts, sql, &params, workspace))
            .await
    }

    #[tool(
        description = "List your workspaces (names, first line of the description, number of states).",
        annotations(read_only_hint = true)
    )]
    async fn memory_workspace_list(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<WorkspaceListArgs>,
    ) -> Result<Json<WorkspaceListResult>, String> {
        let sql = "SELECT name, description, status, states, to_jsonb(last_state_at) #>> '{}'
                   FROM engram.workspace_list(include_archived => coalesce($1::boolean, false))";
        self.run(
            "memory_workspace_list",
            self.sql(&parts, sql, &[&a.include_archived], |rows| {
                Ok(WorkspaceListResult {
                    workspaces: rows
                        .iter()
                        .map(|r| {
                            Ok(WorkspaceItem {
                                name: r.col(0)?,
                                description: r.col(1)?,
                                status: r.col(2)?,
                                states: r.col(3)?,
                                last_state_at: r.col(4)?,
                            })
                        })
                        .collect::<Result<_, String>>()?,
                })
            }),
        )
        .await
    }

    #[tool(
        description = "Open a workspace to resume work: the workspace with its latest states, recent sessions and \
                       pinned slots, in one call. Follow with memory_context for what happened last.",
        annotations(read_only_hint = true)
    )]
    async fn memory_workspace_load(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<WorkspaceNameArgs>,
    ) -> Result<Json<WorkspaceLoadResult>, String> {
        self.run(
            "memory_workspace_load",
            self.sql(
                &parts,
                "SELECT engram.workspace_load(name => $1::text)",
                &[&a.name],
                |rows| {
                    let mut v = json_of(rows)?;
                    Ok(WorkspaceLoadResult {
                        workspace: v["workspace"].take(),
                        states: v["states"].take(),
                        sessions: v["sessions"].take(),
                        slots: v["slots"].take(),
                    })
                },
            ),
        )
        .await
    }

    #[tool(
        description = "Change a workspace's fields (only those given) or rename it with new_name.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true)
    )]
    async fn memory_workspace_update(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<WorkspaceUpdateArgs>,
    ) -> Result<Json<WorkspaceResult>, String> {
        let sql = "SELECT engram.workspace_update(name => $1::text, description => $2::text, root_folder => $3::text,
                       purpose => $4::text, workflows => $5::text[], key_files => $6::text[], preferences => $7::jsonb,
                       new_name => $8::text)";
        let params: [&(dyn ToSql + Sync); 8] = [
            &a.name,
            &a.description,
            &a.root_folder,
            &a.purpose,
            &a.workflows,
            &a.key_files,
            &a.preferences,
            &a.new_name,
        ];
        self.run("memory_workspace_update", self.sql(&parts, sql, &params, workspace))
            .await
    }

    #[tool(
        description = "Archive a workspace (it leaves the list; nothing is deleted), or restore it with restore=true.",
        annotations(destructive_hint = false, idempotent_hint = true)
    )]
    async fn memory_workspace_archive(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<WorkspaceArchiveArgs>,
    ) -> Result<Json<WorkspaceResult>, String> {
        let sql = "SELECT engram.workspace_archive(name => $1::text, restore => coalesce($2::boolean, false))";
        self.run(
            "memory_workspace_archive",
            self.sql(&parts, sql, &[&a.name, &a.restore], workspace),
        )
        .await
    }

    #[tool(
        description = "Save a state: an immutable, named save point of a workspace (active task, next steps, active \
                       files, conversation context) that a later session resumes from. A name is never reused.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_state_save(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<StateSaveArgs>,
    ) -> Result<Json<StateResult>, String> {
        let sql =
            "SELECT engram.state_save(workspace => $1::text, name => $2::text, description => coalesce($3::text, ''),
                       conversation_context => coalesce($4::text, ''), active_task => coalesce($5::text, ''),
                       active_files => coalesce($6::text[], '{}'), next_steps => coalesce($7::text[], '{}'),
                       tags => coalesce($8::text[], '{}'))";
        let params: [&(dyn ToSql + Sync); 8] = [
            &a.workspace,
            &a.name,
            &a.description,
            &a.conversation_context,
            &a.active_task,
            &a.active_files,
            &a.next_steps,
            &a.tags,
        ];
        self.run("memory_state_save", self.sql(&parts, sql, &params, state))
            .await
    }

    #[tool(
        description = "List a workspace's states, newest first.",
        annotations(read_only_hint = true)
    )]
    async fn memory_state_list(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<StateListArgs>,
    ) -> Result<Json<StateListResult>, String> {
        let sql = "SELECT name, description, active_task, next_steps, tags, to_jsonb(created_at) #>> '{}', archived
                   FROM engram.state_list(workspace => $1::text, include_archived => coalesce($2::boolean, false))";
        self.run(
            "memory_state_list",
            self.sql(&parts, sql, &[&a.workspace, &a.include_archived], |rows| {
                Ok(StateListResult {
                    states: rows
                        .iter()
                        .map(|r| {
                            Ok(StateItem {
                                name: r.col(0)?,
                                description: r.col(1)?,
                                active_task: r.col(2)?,
                                next_steps: r.col(3)?,
                                tags: r.col(4)?,
                                created_at: r.col(5)?,
                                archived: r.col(6)?,
                            })
                        })
                        .collect::<Result<_, String>>()?,
                })
            }),
        )
        .await
    }

    #[tool(
        description = "Load a state in full (the workspace's latest when no name is given).",
        annotations(read_only_hint = true)
    )]
    async fn memory_state_load(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<StateLoadArgs>,
    ) -> Result<Json<StateResult>, String> {
        let sql = "SELECT engram.state_load(workspace => $1::text, name => $2::text)";
        self.run(
            "memory_state_load",
            self.sql(&parts, sql, &[&a.workspace, &a.name], state),
        )
        .await
    }

    #[tool(
        description = "Archive a state (its name stays taken; its content never changes), or restore it.",
        annotations(destructive_hint = false, idempotent_hint = true)
    )]
    async fn memory_state_archive(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<StateArchiveArgs>,
    ) -> Result<Json<StateResult>, String> {
        let sql = "SELECT engram.state_archive(workspace => $1::text, name => $2::text, restore => coalesce($3::boolean, false))";
        self.run(
            "memory_state_archive",
            self.sql(&parts, sql, &[&a.workspace, &a.name, &a.restore], state),
        )
        .await
    }
}
