//! Group `slots`: named, size-limited text blocks (docs/CONTINUITY.md).

use super::*;
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
pub struct SlotSetArgs {
    /// The slot's name, e.g. "persona" or "todo".
    pub label: String,
    /// Its whole new content.
    pub content: String,
    /// A workspace name for a workspace slot (it shadows the global slot of the same label); omit for a global slot.
    pub workspace: Option<String>,
    /// Most characters the slot may hold (default 2000).
    pub size_limit: Option<i32>,
    /// Pinned slots go into every context package.
    pub pinned: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
pub struct SlotAppendArgs {
    /// The slot's name.
    pub label: String,
    /// A line to add at the end.
    pub content: String,
    /// The workspace of a workspace slot; omit for a global slot.
    pub workspace: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct SlotArgs {
    /// The slot's name.
    pub label: String,
    /// A workspace: its slot if it has one, else the global slot.
    pub workspace: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct SlotListArgs {
    /// A workspace: its slots and the global ones it does not shadow; omit for the global slots.
    pub workspace: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct Slot {
    pub label: String,
    /// null for a global slot
    pub workspace: Option<String>,
    pub content: String,
    pub chars: i32,
    pub size_limit: i32,
    pub pinned: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct SlotResult {
    pub slot: Slot,
}

#[derive(Serialize, JsonSchema)]
pub struct SlotListResult {
    pub slots: Vec<Slot>,
}

#[derive(Serialize, JsonSchema)]
pub struct SlotDeleteResult {
    pub label: String,
    /// false when there was no such slot
    pub deleted: bool,
}

fn one_slot(rows: Vec<Row>) -> Result<SlotResult, String> {
    Ok(SlotResult {
        slot: slot_of(first(&rows)?)?,
    })
}

/// Columns of an `engram.slot` row, in the order `slot_of` reads them.
const SLOT_COLUMNS: &str = "label, workspace, content, chars, size_limit, pinned";

fn slot_of(r: &Row) -> Result<Slot, String> {
    Ok(Slot {
        label: r.col(0)?,
        workspace: r.col(1)?,
        content: r.col(2)?,
        chars: r.col(3)?,
        size_limit: r.col(4)?,
        pinned: r.col(5)?,
    })
}

#[tool_router(router = slots_router, vis = "pub(super)")]
impl EngramServer {
    #[tool(
        description = "Set a slot: a named, size-limited text block you keep at hand (a persona, a todo list). Global, \
                       or per workspace, where it shadows the global slot of the same label. Replaces the content. \
                       Pinned slots are part of every memory_context.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true)
    )]
    async fn memory_slot_set(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SlotSetArgs>,
    ) -> Result<Json<SlotResult>, String> {
        let sql = format!(
            "SELECT {SLOT_COLUMNS} FROM engram.slot_set(label => $1, content => $2, workspace => $3,
                 size_limit => coalesce($4, 2000), pinned => coalesce($5, false))"
        );
        let params: [&(dyn ToSql + Sync); 5] = [&a.label, &a.content, &a.workspace, &a.size_limit, &a.pinned];
        self.run("memory_slot_set", self.sql(&parts, &sql, &params, one_slot))
            .await
    }

    #[tool(
        description = "Append a line to a slot (created if missing); refused when it would pass the slot's size limit.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_slot_append(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SlotAppendArgs>,
    ) -> Result<Json<SlotResult>, String> {
        let sql = format!("SELECT {SLOT_COLUMNS} FROM engram.slot_append(label => $1, content => $2, workspace => $3)");
        let params: [&(dyn ToSql + Sync); 3] = [&a.label, &a.content, &a.workspace];
        self.run("memory_slot_append", self.sql(&parts, &sql, &params, one_slot))
            .await
    }

    #[tool(
        description = "Read a slot: the workspace's slot if it has one, else the global slot of that label.",
        annotations(read_only_hint = true)
    )]
    async fn memory_slot_get(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SlotArgs>,
    ) -> Result<Json<SlotResult>, String> {
        // slot_list applies slot_get's shadowing rule and returns the whole row
        let sql = format!("SELECT {SLOT_COLUMNS} FROM engram.slot_list(workspace => $2) WHERE label = $1");
        let params: [&(dyn ToSql + Sync); 2] = [&a.label, &a.workspace];
        let label = a.label.clone();
        self.run(
            "memory_slot_get",
            self.sql(&parts, &sql, &params, |rows| match rows.first() {
                Some(r) => Ok(SlotResult { slot: slot_of(r)? }),
                None => Err(format!(
                    "Slot {label} not found. Use memory_slot_list to see your slots, or memory_slot_set to create it."
                )),
            }),
        )
        .await
    }

    #[tool(
        description = "List slots: a workspace's (with the global ones it does not shadow), or the global ones.",
        annotations(read_only_hint = true)
    )]
    async fn memory_slot_list(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SlotListArgs>,
    ) -> Result<Json<SlotListResult>, String> {
        let sql = format!("SELECT {SLOT_COLUMNS} FROM engram.slot_list(workspace => $1)");
        self.run(
            "memory_slot_list",
            self.sql(&parts, &sql, &[&a.workspace], |rows| {
                Ok(SlotListResult {
                    slots: rows.iter().map(slot_of).collect::<Result<_, String>>()?,
                })
            }),
        )
        .await
    }

    #[tool(
        description = "Delete a slot (the workspace's only; a global slot it shadowed shows again).",
        annotations(destructive_hint = true)
    )]
    async fn memory_slot_delete(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SlotArgs>,
    ) -> Result<Json<SlotDeleteResult>, String> {
        let params: [&(dyn ToSql + Sync); 2] = [&a.label, &a.workspace];
        let label = a.label.clone();
        self.run(
            "memory_slot_delete",
            self.sql(
                &parts,
                "SELECT engram.slot_delete(label => $1, workspace => $2)",
                &params,
                |rows| {
                    Ok(SlotDeleteResult {
                        label,
                        deleted: first(&rows)?.col(0)?,
                    })
                },
            ),
        )
        .await
    }
}
