//! Group `core`, the entity tools: what the owner's memories are
//! about. The index lives in the extension (`engram.memory_entities`, kept
//! by triggers); these tools read it through `engram.entities` and
//! `engram.about`. memory_search's `entity` argument narrows a search to it.

use super::*;
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
pub struct EntitiesArgs {
    /// Only names starting with this (case and accents ignored: "jos" finds "José").
    pub prefix: Option<String>,
    /// At most this many, most mentioned first (1-1000, default 50).
    pub limit: Option<i32>,
}

#[derive(Serialize, JsonSchema)]
pub struct EntityItem {
    pub name: String,
    /// person, organization, project, product, place, id, handle, email, url or thing.
    pub kind: String,
    /// How many of your active memories name it.
    pub memories: i64,
    /// When the first and the last of those happened.
    pub first_seen: Option<String>,
    pub last_seen: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct EntitiesResult {
    pub entities: Vec<EntityItem>,
}

#[derive(Deserialize, JsonSchema)]
pub struct AboutArgs {
    /// The person, project, place or thing, as named in memories (case and accents ignored).
    pub entity: String,
    /// At most this many facts (1-100, default 20).
    pub limit: Option<i32>,
}

#[derive(Serialize, JsonSchema)]
pub struct AboutResult {
    /// {name, kind, memories}: memories is 0 when no memory names it.
    pub entity: Value,
    /// [{id, content, occurred_at, valid_from, valid_to}]: what holds now, newest first.
    pub facts: Value,
    /// [{name, kind, memories}]: the entities named in the same memories, most shared first.
    pub related: Value,
    /// [{id, content, valid_from, valid_to, superseded_by}]: what no longer holds, and what replaced it.
    pub history: Value,
}

/// The entity tools read the owner's own memories: not in a ghost or agent context.
fn own_memories(parts: &Parts, tool: &str) -> Result<(), String> {
    match caller(parts)?.internal {
        Ok(None) => Ok(()),
        _ => Err(format!(
            "{tool} reads your own memories; it is not available with X-Internal-Type (use memory_search there)."
        )),
    }
}

#[tool_router(router = entities_router, vis = "pub(super)")]
impl EngramServer {
    #[tool(
        description = "List the people, projects, places and other named things your memories are about, most \
                       mentioned first, with how many memories name each and when.",
        annotations(read_only_hint = true)
    )]
    async fn memory_entities(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<EntitiesArgs>,
    ) -> Result<Json<EntitiesResult>, String> {
        self.run("memory_entities", async {
            own_memories(&parts, "memory_entities")?;
            check_opt("prefix", a.prefix.as_deref(), 200)?;
            let sql = "SELECT name, kind, memories, first_seen::text, last_seen::text
                       FROM engram.entities(prefix => $1::text, \"limit\" => $2::integer)";
            self.sql(&parts, sql, &[&a.prefix, &a.limit], |rows| {
                Ok(EntitiesResult {
                    entities: rows
                        .iter()
                        .map(|r| {
                            Ok(EntityItem {
                                name: r.col(0)?,
                                kind: r.col(1)?,
                                memories: r.col(2)?,
                                first_seen: r.col(3)?,
                                last_seen: r.col(4)?,
                            })
                        })
                        .collect::<Result<_, String>>()?,
                })
            })
            .await
        })
        .await
    }

    #[tool(
        description = "What your memories say about one person, project, place or thing: the facts that hold now \
                       (newest first), what no longer holds and what replaced it, and related entities.",
        annotations(read_only_hint = true)
    )]
    async fn memory_about(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<AboutArgs>,
    ) -> Result<Json<AboutResult>, String> {
        self.run("memory_about", async {
            own_memories(&parts, "memory_about")?;
            check_len("entity", &a.entity, 200)?;
            let sql = "SELECT engram.about(entity => $1::text, \"limit\" => $2::integer)";
            self.sql(&parts, sql, &[&a.entity, &a.limit], |rows| {
                let mut v: Value = first(&rows)?.col(0)?;
                let mut take = |k: &str| v.get_mut(k).map(Value::take).unwrap_or(Value::Null);
                Ok(AboutResult {
                    entity: take("entity"),
                    facts: take("facts"),
                    related: take("related"),
                    history: take("history"),
                })
            })
            .await
        })
        .await
    }
}
