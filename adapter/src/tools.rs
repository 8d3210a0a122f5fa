//! The MCP tools: ToolHive's nine memory tools and remember-mcp's five
//! internal ones. Each validates its arguments, embeds text when needed, and
//! calls exactly one engram SQL function (see `db::Db::call`); every rule
//! about memories lives in the extension.

use crate::caller::{Caller, Internal};
use crate::db::{Db, DbError};
use crate::metrics::Metrics;
use engram_embed::cache::Cached;
use engram_embed::Embedder;
use pgvector::Vector;
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ListToolsResult, PaginatedRequestParams};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, Json, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;
use uuid::Uuid;

type Parts = http::request::Parts;
type ToolResult<T> = Result<Json<T>, String>;

pub struct Shared {
    pub db: Db,
    pub embedder: Cached<Box<dyn Embedder>>,
    pub metrics: Metrics,
    pub groups: Groups,
    pub conflict_threshold: Option<f32>,
}

/// The tool groups `--tools` serves. A tool of a group that is off is
/// neither listed nor callable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Groups {
    pub core: bool,
    pub internal: bool,
    pub sharing: bool,
    pub slots: bool,
}

pub const GROUP_NAMES: [&str; 4] = ["core", "internal", "sharing", "slots"];

impl Groups {
    pub fn parse(names: &[String]) -> Result<Groups, String> {
        let names: Vec<&str> = names.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
        if let Some(bad) = names.iter().find(|g| !GROUP_NAMES.contains(g)) {
            return Err(format!(
                "unknown tool group '{bad}' in --tools; use any of {}",
                GROUP_NAMES.join(", ")
            ));
        }
        Ok(Groups {
            core: names.contains(&"core"),
            internal: names.contains(&"internal"),
            sharing: names.contains(&"sharing"),
            slots: names.contains(&"slots"),
        })
    }

    /// The group a tool belongs to.
    pub fn of(tool: &str) -> &'static str {
        if tool.starts_with("memory_internal_") {
            "internal"
        } else if tool.starts_with("memory_slot_") {
            "slots"
        } else if SHARING_TOOLS.contains(&tool) {
            "sharing"
        } else {
            "core"
        }
    }

    pub fn serves(&self, tool: &str) -> bool {
        match Groups::of(tool) {
            "internal" => self.internal,
            "sharing" => self.sharing,
            "slots" => self.slots,
            _ => self.core,
        }
    }
}

const SHARING_TOOLS: [&str; 4] = [
    "memory_grant",
    "memory_revoke_grant",
    "memory_publish",
    "memory_unpublish",
];

/// Limits checked before any text is embedded (the database checks them
/// again): content as engram.remember, queries as engram.search.
const MAX_CONTENT_BYTES: usize = 256 * 1024;
const MAX_QUERY_BYTES: usize = 65_536;

/// What a ghost conversation's core write tools answer (SPEC 8.2).
const GHOST_WRITES: &str = "A ghost conversation writes only through memory_internal_create (the ghost's own \
                            memories of this conversation); memory_remember, memory_update and the other core \
                            write tools are not available with X-Internal-Type: ghost.";

#[derive(Clone)]
pub struct EngramServer {
    shared: Arc<Shared>,
    tool_router: ToolRouter<Self>,
}

// ---- arguments ---------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
pub struct RememberArgs {
    /// The fact, event or procedure to remember, in plain language (at most 256 KiB).
    pub content: String,
    /// semantic (a fact; default), episodic (an event, never a conflict) or procedural (how to do something).
    pub kind: Option<String>,
    /// Tags to file the memory under, e.g. ["project:apollo", "preference"].
    pub tags: Option<Vec<String>>,
    /// Extra structured data (a JSON object).
    pub metadata: Option<Value>,
    /// Forget automatically after this many days.
    pub ttl_days: Option<f64>,
    /// 0..1, default 0.5.
    pub importance: Option<f32>,
    /// Write even if a similar memory exists (after reviewing the conflicts of a first attempt).
    pub force: Option<bool>,
    /// Who may see it through your ghost: 1 (anyone your ghost talks to) to 5 (only accessors you trust
    /// fully; the default).
    pub access_level: Option<i32>,
}

#[derive(Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// What to look for, in natural language; exact tokens (error codes, ids) are matched too.
    pub query: String,
    /// Results to return (1-100, default 10).
    pub limit: Option<i32>,
    /// Only these kinds: semantic, episodic, procedural.
    pub kinds: Option<Vec<String>>,
    /// Only memories carrying every one of these tags.
    pub tags: Option<Vec<String>>,
}

#[derive(Deserialize, JsonSchema)]
pub struct QueryArgs {
    /// What the prompt needs to know, in natural language.
    pub query: String,
    /// Memories to include (1-100, default 5).
    pub limit: Option<i32>,
    /// Most characters of the prompt-ready context (default 2000).
    pub max_chars: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
pub struct IdArgs {
    /// The memory id (a UUID from memory_search or memory_list).
    pub id: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct UpdateArgs {
    /// The memory id (a UUID from memory_search or memory_list).
    pub id: String,
    /// New content (it is re-embedded; the old version is kept as a revision).
    pub content: Option<String>,
    /// Replaces the tags.
    pub tags: Option<Vec<String>>,
    /// Replaces the metadata (a JSON object).
    pub metadata: Option<Value>,
    /// Why it changed (kept in the revision history).
    pub reason: Option<String>,
    /// New access level (1-5) for your ghost's conversations.
    pub access_level: Option<i32>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ForgetArgs {
    /// The memory id (a UUID from memory_search or memory_list).
    pub id: String,
    /// Why it is forgotten.
    pub reason: Option<String>,
    /// Erase it with its history instead of archiving it (right to erasure).
    pub hard: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
pub struct FlagArgs {
    /// The memory id (a UUID from memory_search or memory_list).
    pub id: String,
    /// Why the memory looks wrong or doubtful.
    pub reason: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct ListArgs {
    /// Only these kinds: semantic, episodic, procedural.
    pub kinds: Option<Vec<String>>,
    /// Only memories carrying every one of these tags.
    pub tags: Option<Vec<String>>,
    /// active (default), archived or expired.
    pub status: Option<String>,
    /// created_at (default), updated_at, trust_score, importance or access_count.
    pub order_by: Option<String>,
    /// Newest/highest first (default true).
    pub descending: Option<bool>,
    /// Page size (1-1000, default 50).
    pub limit: Option<i32>,
    /// next_cursor of the previous page.
    pub cursor: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct GrantArgs {
    /// The user whose conversations with your ghost get this trust.
    pub accessor: String,
    /// 0 blocks them; 1-5 lets them see memories whose access_level is at most this.
    pub trust: i32,
}

#[derive(Deserialize, JsonSchema)]
pub struct AccessorArgs {
    /// The user whose grant to remove (they fall back to your ghost's default trust).
    pub accessor: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct PublishArgs {
    /// The memory id (a UUID from memory_search or memory_list).
    pub id: String,
    /// A space: every space ghost conversation of it can read the memory.
    pub space: Option<String>,
    /// A group: group ghost conversations of its members can read the memory.
    pub group: Option<String>,
}

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

#[derive(Deserialize, JsonSchema)]
pub struct ConsolidateArgs {
    /// Ids of the memories to merge; they are archived and point to the new one.
    pub ids: Vec<String>,
    /// The merged memory's content.
    pub content: String,
    /// Tags of the merged memory (default: the union of the originals').
    pub tags: Option<Vec<String>>,
    /// Kind of the merged memory (default: the originals' kind).
    pub kind: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct CrystallizeArgs {
    /// Ids of the memories (episodes, notes) the skill is learned from.
    pub ids: Vec<String>,
    /// A short name for the skill, e.g. "deploy-to-staging".
    pub name: String,
    /// The procedure, step by step.
    pub content: String,
}

// ---- results -----------------------------------------------------------

#[derive(Serialize, JsonSchema)]
pub struct RememberResult {
    /// created, duplicate (an identical memory exists: id) or conflict (similar memories: see conflicts; nothing written).
    pub status: String,
    pub id: Option<String>,
    /// [{id, content, similarity}] of similar memories.
    pub conflicts: Option<Value>,
}

#[derive(Serialize, JsonSchema)]
pub struct Hit {
    pub id: String,
    pub content: String,
    pub kind: String,
    pub tags: Vec<String>,
    pub score: f32,
    pub similarity: Option<f32>,
}

#[derive(Serialize, JsonSchema)]
pub struct SearchResult {
    pub results: Vec<Hit>,
}

#[derive(Serialize, JsonSchema)]
pub struct QueryResult {
    pub results: Vec<Hit>,
    /// The hits formatted for a prompt, within max_chars.
    pub context: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Memory {
    pub id: String,
    pub content: String,
    pub kind: String,
    pub source: String,
    pub tags: Vec<String>,
    pub metadata: Value,
    pub status: String,
    pub importance: f32,
    pub trust_score: f32,
    pub staleness_score: f32,
    pub revision_count: i64,
    pub access_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Serialize, JsonSchema)]
pub struct RecallResult {
    pub memory: Memory,
}

#[derive(Serialize, JsonSchema)]
pub struct UpdateResult {
    pub id: String,
    pub revision: i32,
}

#[derive(Serialize, JsonSchema)]
pub struct ForgetResult {
    pub id: String,
    pub forgotten: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct FlagResult {
    pub id: String,
    pub trust_score: f32,
}

#[derive(Serialize, JsonSchema)]
pub struct Listed {
    pub id: String,
    pub content: String,
    pub kind: String,
    pub tags: Vec<String>,
    pub status: String,
    pub importance: f32,
    pub trust_score: f32,
    pub created_at: String,
}

#[derive(Serialize, JsonSchema)]
pub struct ListResult {
    pub memories: Vec<Listed>,
    /// Pass as cursor for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct IdResult {
    pub id: String,
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

#[derive(Serialize, JsonSchema)]
pub struct GrantResult {
    pub accessor: String,
    pub trust: i32,
}

#[derive(Serialize, JsonSchema)]
pub struct RevokeGrantResult {
    pub accessor: String,
    /// false when there was no grant
    pub revoked: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct PublishResult {
    pub id: String,
    pub publication_id: String,
}

#[derive(Serialize, JsonSchema)]
pub struct UnpublishResult {
    pub id: String,
    /// false when it was not published there
    pub unpublished: bool,
}

// ---- helpers -----------------------------------------------------------

/// The caller of a tool. Malformed internal headers fail every tool: a
/// ghost conversation must never fall back to the accessor's own memories.
fn caller(parts: &Parts) -> Result<Caller, String> {
    let c = parts
        .extensions
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| "request was not authenticated".to_string())?;
    c.context()?;
    Ok(c)
}

/// The ghost a core read tool talks to (X-Internal-Type: ghost), if any.
fn ghost(c: &Caller) -> Option<(String, String)> {
    let i = c.internal.as_ref().ok()?.as_ref()?;
    if !i.is_ghost() {
        return None;
    }
    Some((i.ghost_type.clone()?, i.ghost_id()?.to_string()))
}

/// Core write tools refuse in a ghost conversation.
fn not_in_ghost(c: &Caller) -> Result<(), String> {
    match c.internal.as_ref().ok().and_then(Option::as_ref) {
        Some(i) if i.is_ghost() => Err(GHOST_WRITES.into()),
        _ => Ok(()),
    }
}

/// Columns of an `engram.slot` row, in the order `slot_of` reads them.
const SLOT_COLUMNS: &str = "label, workspace, content, chars, size_limit, pinned";

fn slot_of(r: &tokio_postgres::Row) -> Slot {
    Slot {
        label: r.get(0),
        workspace: r.get(1),
        content: r.get(2),
        chars: r.get(3),
        size_limit: r.get(4),
        pinned: r.get(5),
    }
}

fn check_size(what: &str, text: &str, limit: usize) -> Result<(), String> {
    if text.len() > limit {
        return Err(format!(
            "{what} is {} bytes; the limit is {limit}. Shorten it or split it into several memories.",
            text.len()
        ));
    }
    Ok(())
}

fn internal(c: &Caller) -> Result<Internal, String> {
    match &c.internal {
        Ok(Some(i)) => Ok(i.clone()),
        Ok(None) => Err(
            "This tool needs an internal context: send X-Internal-Type (ghost or agent, with X-Ghost-Type \
                         and X-Ghost-Owner/Space/Group for ghosts) using a platform token. For normal memories use the \
                         memory_* tools."
                .into(),
        ),
        Err(e) => Err(e.clone()),
    }
}

fn parse_id(id: &str) -> Result<Uuid, String> {
    Uuid::parse_str(id.trim())
        .map_err(|_| format!("'{id}' is not a memory id (a UUID). Use memory_search or memory_list to find ids."))
}

fn parse_ids(ids: &[String]) -> Result<Vec<Uuid>, String> {
    ids.iter().map(|i| parse_id(i)).collect()
}

/// A database error as a tool error that says how to recover.
fn db_error(e: DbError, id: Option<&str>) -> String {
    match (e.code.as_deref(), id) {
        (Some("P0002"), Some(id)) => {
            format!("Memory {id} not found. Use memory_search or memory_list to find it.")
        }
        _ => e.message,
    }
}

/// Tags for a write: the caller's own plus, in an internal context, the
/// internal tags (never removable by the caller).
fn stamped(tags: Option<Vec<String>>, i: Option<&Internal>) -> Option<Vec<String>> {
    match i {
        None => tags,
        Some(i) => {
            let mut all = i.tags.clone();
            for t in tags.unwrap_or_default() {
                if !all.contains(&t) {
                    all.push(t);
                }
            }
            Some(all)
        }
    }
}

fn prompt_context(hits: &[Hit], max_chars: usize) -> String {
    let mut out = String::new();
    for h in hits {
        let line = format!("- [{}] {}\n", h.kind, h.content.replace('\n', " "));
        if out.len() + line.len() > max_chars {
            let room = max_chars.saturating_sub(out.len());
            if room > 4 {
                out.extend(line.chars().take(room - 4));
                out.push_str("...\n");
            }
            break;
        }
        out.push_str(&line);
    }
    out
}

impl EngramServer {
    pub fn new(shared: Arc<Shared>) -> EngramServer {
        EngramServer {
            shared,
            tool_router: Self::tool_router(),
        }
    }

    /// Embeds `text` for caller `c`; the cache is shared only within one owner.
    async fn embed(&self, c: &Caller, text: &str) -> Result<Vector, String> {
        let started = Instant::now();
        let r = self.shared.embedder.embed_in(&c.owner, &[text.to_string()]).await;
        self.shared.metrics.embedding(started.elapsed(), r.is_ok());
        let mut v = r.map_err(|e| format!("Could not embed the text: {e}. Retry later or check /health."))?;
        Ok(Vector::from(v.remove(0)))
    }

    /// Runs a tool body with a tracing span and metrics.
    async fn run<T>(
        &self,
        name: &'static str,
        body: impl std::future::Future<Output = Result<T, String>>,
    ) -> ToolResult<T> {
        let started = Instant::now();
        let span = tracing::info_span!("tool", tool = name);
        // --tools is enforced here, at call time, not only in tools/list.
        let result = if self.shared.groups.serves(name) {
            body.instrument(span.clone()).await
        } else {
            Err(format!(
                "{name} is not enabled on this server: its tool group '{}' is not in --tools",
                Groups::of(name)
            ))
        };
        let ok = result.is_ok();
        self.shared.metrics.tool(name, started.elapsed(), ok);
        span.in_scope(|| match &result {
            Ok(_) => tracing::info!(ms = started.elapsed().as_secs_f64() * 1e3, "ok"),
            Err(e) => tracing::info!(ms = started.elapsed().as_secs_f64() * 1e3, error = %e, "tool error"),
        });
        result.map(Json)
    }

    async fn remember_in(&self, c: &Caller, i: Option<&Internal>, a: RememberArgs) -> Result<RememberResult, String> {
        check_size("content", &a.content, MAX_CONTENT_BYTES)?;
        let embedding = self.embed(c, &a.content).await?;
        let tags = stamped(a.tags, i).unwrap_or_default();
        let metadata = a.metadata.unwrap_or_else(|| Value::Object(Default::default()));
        let kind = a.kind.unwrap_or_else(|| "semantic".into());
        let internal_type = i.map(|i| i.internal_type.clone());
        let rows = self
            .shared
            .db
            .call(
                c,
                "SELECT status, id::text, conflicts FROM engram.remember(content => $1, embedding => $2, kind => $3,
                     tags => $4, metadata => $5, ttl => $6::float8 * interval '1 day', importance => $7,
                     internal_type => $8, session_id => $9, force => $10, conflict_threshold => $11,
                     access_level => coalesce($12, 5))",
                &[
                    &a.content,
                    &embedding,
                    &kind,
                    &tags,
                    &metadata,
                    &a.ttl_days,
                    &a.importance.unwrap_or(0.5),
                    &internal_type,
                    &c.session_id,
                    &a.force.unwrap_or(false),
                    &self.shared.conflict_threshold,
                    &a.access_level,
                ],
            )
            .await
            .map_err(|e| db_error(e, None))?;
        let r = &rows[0];
        Ok(RememberResult {
            status: r.get(0),
            id: r.get(1),
            conflicts: r.get(2),
        })
    }

    async fn search_in(
        &self,
        c: &Caller,
        i: Option<&Internal>,
        query: &str,
        limit: Option<i32>,
        kinds: Option<Vec<String>>,
        tags: Option<Vec<String>>,
    ) -> Result<Vec<Hit>, String> {
        check_size("query", query, MAX_QUERY_BYTES)?;
        let embedding = self.embed(c, query).await?;
        let rows = match (i, ghost(c)) {
            // Core reads in a ghost conversation: what the ghost may show.
            (None, Some((ghost_type, ghost_id))) => self
                .shared
                .db
                .call(
                    c,
                    "SELECT id::text, content, kind, tags, score, similarity FROM engram.ghost_search(
                         ghost_type => $1, ghost_id => $2, query_embedding => $3, query_text => $4, k => $5,
                         kinds => $6, tags_all => $7)",
                    &[&ghost_type, &ghost_id, &embedding, &query, &limit, &kinds, &tags],
                )
                .await,
            _ => {
                let internal_type = i.map(|i| i.internal_type.clone());
                let scope = i.map(|i| i.scope.clone());
                self.shared
                    .db
                    .call(
                        c,
                        "SELECT id::text, content, kind, tags, score, similarity FROM engram.search(query_embedding => $1,
                             query_text => $2, k => $3, kinds => $4, tags_all => $5, internal_type => $6, scope_tags => $7)",
                        &[&embedding, &query, &limit, &kinds, &tags, &internal_type, &scope],
                    )
                    .await
            }
        }
        .map_err(|e| db_error(e, None))?;
        Ok(rows
            .iter()
            .map(|r| Hit {
                id: r.get(0),
                content: r.get(1),
                kind: r.get(2),
                tags: r.get(3),
                score: r.get(4),
                similarity: r.get(5),
            })
            .collect())
    }

    async fn recall_in(&self, c: &Caller, id: &str) -> Result<Memory, String> {
        let uuid = parse_id(id)?;
        const COLUMNS: &str = "id::text, content, kind, source, tags, metadata, status, importance, trust_score,
                               staleness_score, revision_count, access_count, created_at::text, updated_at::text";
        let rows = match ghost(c) {
            Some((ghost_type, ghost_id)) => {
                self.shared
                    .db
                    .call(
                        c,
                        &format!(
                            "SELECT {COLUMNS} FROM engram.ghost_recall(ghost_type => $1, ghost_id => $2, id => $3)"
                        ),
                        &[&ghost_type, &ghost_id, &uuid],
                    )
                    .await
            }
            None => {
                self.shared
                    .db
                    .call(c, &format!("SELECT {COLUMNS} FROM engram.recall(id => $1)"), &[&uuid])
                    .await
            }
        }
        .map_err(|e| db_error(e, Some(id)))?;
        // ghost_recall answers "not found" with no row
        let r = rows
            .first()
            .ok_or_else(|| format!("Memory {id} not found. Use memory_search or memory_list to find it."))?;
        Ok(Memory {
            id: r.get(0),
            content: r.get(1),
            kind: r.get(2),
            source: r.get(3),
            tags: r.get(4),
            metadata: r.get(5),
            status: r.get(6),
            importance: r.get(7),
            trust_score: r.get(8),
            staleness_score: r.get(9),
            revision_count: r.get(10),
            access_count: r.get(11),
            created_at: r.get(12),
            updated_at: r.get(13),
        })
    }

    async fn update_in(&self, c: &Caller, i: Option<&Internal>, a: UpdateArgs) -> Result<UpdateResult, String> {
        let uuid = parse_id(&a.id)?;
        let embedding = match &a.content {
            Some(text) => {
                check_size("content", text, MAX_CONTENT_BYTES)?;
                Some(self.embed(c, text).await?)
            }
            None => None,
        };
        let tags = if a.tags.is_some() { stamped(a.tags, i) } else { None };
        let internal_type = i.map(|i| i.internal_type.clone());
        let scope = i.map(|i| i.scope.clone());
        let rows = self
            .shared
            .db
            .call(
                c,
                "SELECT engram.update(id => $1, content => $2, embedding => $3, tags => $4, metadata => $5,
                     reason => $6, internal_type => $7, scope_tags => $8, access_level => $9)",
                &[
                    &uuid,
                    &a.content,
                    &embedding,
                    &tags,
                    &a.metadata,
                    &a.reason,
                    &internal_type,
                    &scope,
                    &a.access_level,
                ],
            )
            .await
            .map_err(|e| db_error(e, Some(&a.id)))?;
        Ok(UpdateResult {
            id: uuid.to_string(),
            revision: rows[0].get(0),
        })
    }

    async fn list_in(&self, c: &Caller, i: Option<&Internal>, a: ListArgs) -> Result<ListResult, String> {
        const COLUMNS: &str =
            "id::text, content, kind, tags, status, importance, trust_score, created_at::text, next_cursor";
        let rows = match (i, ghost(c)) {
            (None, Some((ghost_type, ghost_id))) => {
                if a.status.as_deref().is_some_and(|s| s != "active") {
                    return Err("A ghost shows only active memories; leave status out.".into());
                }
                self.shared
                    .db
                    .call(
                        c,
                        &format!(
                            "SELECT {COLUMNS} FROM engram.ghost_list(ghost_type => $1, ghost_id => $2, kinds => $3,
                                 tags_all => $4, order_by => $5, descending => $6, \"limit\" => $7, after => $8)"
                        ),
                        &[
                            &ghost_type,
                            &ghost_id,
                            &a.kinds,
                            &a.tags,
                            &a.order_by,
                            &a.descending,
                            &a.limit,
                            &a.cursor,
                        ],
                    )
                    .await
            }
            _ => {
                let internal_type = i.map(|i| i.internal_type.clone());
                let scope = i.map(|i| i.scope.clone());
                self.shared
                    .db
                    .call(
                        c,
                        &format!(
                            "SELECT {COLUMNS} FROM engram.list(kinds => $1, tags_all => $2, internal_type => $3,
                                 scope_tags => $4, status => $5, order_by => $6, descending => $7,
                                 \"limit\" => $8, after => $9)"
                        ),
                        &[
                            &a.kinds,
                            &a.tags,
                            &internal_type,
                            &scope,
                            &a.status,
                            &a.order_by,
                            &a.descending,
                            &a.limit,
                            &a.cursor,
                        ],
                    )
                    .await
            }
        }
        .map_err(|e| db_error(e, None))?;
        let next_cursor = rows.last().and_then(|r| r.get::<_, Option<String>>(8));
        Ok(ListResult {
            memories: rows
                .iter()
                .map(|r| Listed {
                    id: r.get(0),
                    content: r.get(1),
                    kind: r.get(2),
                    tags: r.get(3),
                    status: r.get(4),
                    importance: r.get(5),
                    trust_score: r.get(6),
                    created_at: r.get(7),
                })
                .collect(),
            next_cursor,
        })
    }
}

// Return types are spelled out (not ToolResult<T>): the #[tool] macro reads
// them to publish each tool's outputSchema.
#[tool_router(router = tool_router)]
impl EngramServer {
    #[tool(
        description = "Remember a fact (semantic), event (episodic) or procedure. Returns status created, duplicate \
                       (an identical memory exists; its id) or conflict (similar memories exist; nothing was written: \
                       update or forget one of them, or call again with force=true)."
    )]
    async fn memory_remember(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<RememberArgs>,
    ) -> Result<Json<RememberResult>, String> {
        self.run("memory_remember", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            self.remember_in(&c, None, a).await
        })
        .await
    }

    #[tool(
        description = "Search memories by meaning and exact words; best first (score = relevance x trust x freshness).",
        annotations(read_only_hint = true)
    )]
    async fn memory_search(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResult>, String> {
        self.run("memory_search", async {
            let results = self
                .search_in(&caller(&parts)?, None, &a.query, a.limit, a.kinds, a.tags)
                .await?;
            Ok(SearchResult { results })
        })
        .await
    }

    #[tool(description = "Read one memory in full by id.", annotations(read_only_hint = true))]
    async fn memory_recall(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<IdArgs>,
    ) -> Result<Json<RecallResult>, String> {
        self.run("memory_recall", async {
            Ok(RecallResult {
                memory: self.recall_in(&caller(&parts)?, &a.id).await?,
            })
        })
        .await
    }

    #[tool(description = "Correct or extend a memory. The previous version is kept as a revision.")]
    async fn memory_update(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<UpdateArgs>,
    ) -> Result<Json<UpdateResult>, String> {
        self.run("memory_update", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            self.update_in(&c, None, a).await
        })
        .await
    }

    #[tool(
        description = "Forget a memory: archive it (default) or, with hard=true, erase it and its history.",
        annotations(destructive_hint = true)
    )]
    async fn memory_forget(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ForgetArgs>,
    ) -> Result<Json<ForgetResult>, String> {
        self.run("memory_forget", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            let uuid = parse_id(&a.id)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.forget(id => $1, reason => $2, hard => $3)",
                    &[&uuid, &a.reason, &a.hard.unwrap_or(false)],
                )
                .await
                .map_err(|e| db_error(e, Some(&a.id)))?;
            Ok(ForgetResult {
                id: uuid.to_string(),
                forgotten: rows[0].get(0),
            })
        })
        .await
    }

    #[tool(
        description = "Flag a memory as wrong or doubtful; its trust drops and it ranks lower. Returns the new trust score."
    )]
    async fn memory_flag(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<FlagArgs>,
    ) -> Result<Json<FlagResult>, String> {
        self.run("memory_flag", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            let uuid = parse_id(&a.id)?;
            let rows = self
                .shared
                .db
                .call(&c, "SELECT engram.flag(id => $1, reason => $2)", &[&uuid, &a.reason])
                .await
                .map_err(|e| db_error(e, Some(&a.id)))?;
            Ok(FlagResult {
                id: uuid.to_string(),
                trust_score: rows[0].get(0),
            })
        })
        .await
    }

    #[tool(
        description = "List memories with filters and ordering, a page at a time (pass next_cursor back as cursor).",
        annotations(read_only_hint = true)
    )]
    async fn memory_list(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ListArgs>,
    ) -> Result<Json<ListResult>, String> {
        self.run("memory_list", async { self.list_in(&caller(&parts)?, None, a).await })
            .await
    }

    #[tool(
        description = "Merge several memories into one; the originals are archived and point to it. All or nothing."
    )]
    async fn memory_consolidate(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ConsolidateArgs>,
    ) -> Result<Json<IdResult>, String> {
        self.run("memory_consolidate", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            let ids = parse_ids(&a.ids)?;
            check_size("content", &a.content, MAX_CONTENT_BYTES)?;
            let embedding = self.embed(&c, &a.content).await?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.consolidate(ids => $1, content => $2, embedding => $3, tags => $4, kind => $5)::text",
                    &[&ids, &a.content, &embedding, &a.tags, &a.kind],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(IdResult { id: rows[0].get(0) })
        })
        .await
    }

    #[tool(description = "Turn memories (e.g. the episodes of a task done well) into a reusable, read-only skill.")]
    async fn memory_crystallize(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<CrystallizeArgs>,
    ) -> Result<Json<IdResult>, String> {
        self.run("memory_crystallize", async {
            let c = caller(&parts)?;
            not_in_ghost(&c)?;
            let ids = parse_ids(&a.ids)?;
            check_size("content", &a.content, MAX_CONTENT_BYTES)?;
            let embedding = self.embed(&c, &a.content).await?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.crystallize(ids => $1, name => $2, content => $3, embedding => $4)::text",
                    &[&ids, &a.name, &a.content, &embedding],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(IdResult { id: rows[0].get(0) })
        })
        .await
    }

    #[tool(
        description = "Trust a user with your ghost: in their conversations with your ghost it shows your memories \
                       whose access_level is at most `trust` (1-5); 0 blocks them. Replaces an earlier grant."
    )]
    async fn memory_grant(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<GrantArgs>,
    ) -> Result<Json<GrantResult>, String> {
        self.run("memory_grant", async {
            let c = caller(&parts)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.grant(accessor => $1, trust => $2)",
                    &[&a.accessor, &a.trust],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(GrantResult {
                accessor: a.accessor,
                trust: rows[0].get(0),
            })
        })
        .await
    }

    #[tool(
        description = "Remove a user's grant: your ghost falls back to its default trust for them.",
        annotations(destructive_hint = true)
    )]
    async fn memory_revoke_grant(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<AccessorArgs>,
    ) -> Result<Json<RevokeGrantResult>, String> {
        self.run("memory_revoke_grant", async {
            let c = caller(&parts)?;
            let rows = self
                .shared
                .db
                .call(&c, "SELECT engram.revoke_grant(accessor => $1)", &[&a.accessor])
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(RevokeGrantResult {
                accessor: a.accessor,
                revoked: rows[0].get(0),
            })
        })
        .await
    }

    #[tool(
        description = "Publish one of your memories to a space (every space ghost conversation reads it) or a group \
                       (members' group ghost conversations read it). Give exactly one of space or group."
    )]
    async fn memory_publish(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<PublishArgs>,
    ) -> Result<Json<PublishResult>, String> {
        self.run("memory_publish", async {
            let c = caller(&parts)?;
            let uuid = parse_id(&a.id)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.publish(id => $1, space => $2, group_id => $3)::text",
                    &[&uuid, &a.space, &a.group],
                )
                .await
                .map_err(|e| db_error(e, Some(&a.id)))?;
            Ok(PublishResult {
                id: uuid.to_string(),
                publication_id: rows[0].get(0),
            })
        })
        .await
    }

    #[tool(
        description = "Withdraw a memory from a space or group, or from everywhere when neither is given.",
        annotations(destructive_hint = true)
    )]
    async fn memory_unpublish(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<PublishArgs>,
    ) -> Result<Json<UnpublishResult>, String> {
        self.run("memory_unpublish", async {
            let c = caller(&parts)?;
            let uuid = parse_id(&a.id)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.unpublish(id => $1, space => $2, group_id => $3)",
                    &[&uuid, &a.space, &a.group],
                )
                .await
                .map_err(|e| db_error(e, Some(&a.id)))?;
            Ok(UnpublishResult {
                id: uuid.to_string(),
                unpublished: rows[0].get(0),
            })
        })
        .await
    }

    #[tool(
        description = "Set a slot: a named, size-limited text block you keep at hand (a persona, a todo list). Global, \
                       or per workspace, where it shadows the global slot of the same label. Replaces the content."
    )]
    async fn memory_slot_set(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SlotSetArgs>,
    ) -> Result<Json<SlotResult>, String> {
        self.run("memory_slot_set", async {
            let c = caller(&parts)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    &format!(
                        "SELECT {SLOT_COLUMNS} FROM engram.slot_set(label => $1, content => $2, workspace => $3,
                             size_limit => coalesce($4, 2000), pinned => coalesce($5, false))"
                    ),
                    &[&a.label, &a.content, &a.workspace, &a.size_limit, &a.pinned],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(SlotResult {
                slot: slot_of(&rows[0]),
            })
        })
        .await
    }

    #[tool(
        description = "Append a line to a slot (created if missing); refused when it would pass the slot's size limit."
    )]
    async fn memory_slot_append(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SlotAppendArgs>,
    ) -> Result<Json<SlotResult>, String> {
        self.run("memory_slot_append", async {
            let c = caller(&parts)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    &format!(
                        "SELECT {SLOT_COLUMNS} FROM engram.slot_append(label => $1, content => $2, workspace => $3)"
                    ),
                    &[&a.label, &a.content, &a.workspace],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(SlotResult {
                slot: slot_of(&rows[0]),
            })
        })
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
        self.run("memory_slot_get", async {
            let c = caller(&parts)?;
            // slot_list applies slot_get's shadowing rule and returns the whole row
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    &format!("SELECT {SLOT_COLUMNS} FROM engram.slot_list(workspace => $2) WHERE label = $1"),
                    &[&a.label, &a.workspace],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            if rows.is_empty() {
                return Err(format!(
                    "Slot {} not found. Use memory_slot_list to see your slots, or memory_slot_set to create it.",
                    a.label
                ));
            }
            Ok(SlotResult {
                slot: slot_of(&rows[0]),
            })
        })
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
        self.run("memory_slot_list", async {
            let c = caller(&parts)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    &format!("SELECT {SLOT_COLUMNS} FROM engram.slot_list(workspace => $1)"),
                    &[&a.workspace],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(SlotListResult {
                slots: rows.iter().map(slot_of).collect(),
            })
        })
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
        self.run("memory_slot_delete", async {
            let c = caller(&parts)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.slot_delete(label => $1, workspace => $2)",
                    &[&a.label, &a.workspace],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(SlotDeleteResult {
                label: a.label,
                deleted: rows[0].get(0),
            })
        })
        .await
    }

    #[tool(description = "Create a ghost or agent memory in the request's internal context (X-Internal-Type headers).")]
    async fn memory_internal_create(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<RememberArgs>,
    ) -> Result<Json<RememberResult>, String> {
        self.run("memory_internal_create", async {
            let c = caller(&parts)?;
            let i = internal(&c)?;
            self.remember_in(&c, Some(&i), a).await
        })
        .await
    }

    #[tool(description = "Update a ghost or agent memory of the request's internal context.")]
    async fn memory_internal_update(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<UpdateArgs>,
    ) -> Result<Json<UpdateResult>, String> {
        self.run("memory_internal_update", async {
            let c = caller(&parts)?;
            let i = internal(&c)?;
            self.update_in(&c, Some(&i), a).await
        })
        .await
    }

    #[tool(
        description = "Search the ghost or agent memories of the request's internal context.",
        annotations(read_only_hint = true)
    )]
    async fn memory_internal_search(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResult>, String> {
        self.run("memory_internal_search", async {
            let c = caller(&parts)?;
            let i = internal(&c)?;
            let results = self.search_in(&c, Some(&i), &a.query, a.limit, a.kinds, a.tags).await?;
            Ok(SearchResult { results })
        })
        .await
    }

    #[tool(
        description = "Ask the internal context's memories a question; returns the hits and a prompt-ready context string.",
        annotations(read_only_hint = true)
    )]
    async fn memory_internal_query(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<QueryArgs>,
    ) -> Result<Json<QueryResult>, String> {
        self.run("memory_internal_query", async {
            let c = caller(&parts)?;
            let i = internal(&c)?;
            let results = self
                .search_in(&c, Some(&i), &a.query, Some(a.limit.unwrap_or(5)), None, None)
                .await?;
            let context = prompt_context(&results, a.max_chars.unwrap_or(2000));
            Ok(QueryResult { results, context })
        })
        .await
    }

    #[tool(
        description = "Browse the internal context's memories with filters and ordering, a page at a time.",
        annotations(read_only_hint = true)
    )]
    async fn memory_internal_search_by(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ListArgs>,
    ) -> Result<Json<ListResult>, String> {
        self.run("memory_internal_search_by", async {
            let c = caller(&parts)?;
            let i = internal(&c)?;
            self.list_in(&c, Some(&i), a).await
        })
        .await
    }
}

#[tool_handler(
    router = self.tool_router,
    name = "engram-mcp",
    version = "0.2.0", // a literal for the macro; a test keeps it equal to the crate version
    instructions = "engram: long-term memory. Search before you answer from memory; remember durable facts, events \
                    and procedures; update or flag memories that turn out wrong. Errors say how to recover."
)]
impl ServerHandler for EngramServer {
    /// Internal tools are listed only when the request carries X-Internal-Type
    /// (read from this request's headers, never from the session).
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        let has_internal = context
            .extensions
            .get::<Parts>()
            .and_then(|p| p.extensions.get::<Caller>())
            .is_some_and(|c| !matches!(c.internal, Ok(None)));
        let tools = self
            .tool_router
            .list_all()
            .into_iter()
            .filter(|t| self.shared.groups.serves(&t.name) && (has_internal || Groups::of(&t.name) != "internal"))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(content: &str) -> Hit {
        Hit {
            id: "i".into(),
            content: content.into(),
            kind: "semantic".into(),
            tags: vec![],
            score: 1.0,
            similarity: None,
        }
    }

    #[test]
    fn server_info_names_engram_and_its_version() {
        let info = <EngramServer as ServerHandler>::get_info(&EngramServer {
            shared: Arc::new(Shared {
                db: Db::connect(
                    "host=/nonexistent user=x",
                    1,
                    &crate::db::Limits {
                        pool_wait: std::time::Duration::from_secs(1),
                        statement_timeout: std::time::Duration::from_secs(1),
                    },
                )
                .unwrap(),
                embedder: Cached::new(Box::new(Fixed) as Box<dyn Embedder>, 1),
                metrics: Metrics::default(),
                groups: Groups::parse(&["core".into()]).unwrap(),
                conflict_threshold: None,
            }),
            tool_router: EngramServer::tool_router(),
        });
        let info = serde_json::to_value(info).unwrap();
        assert_eq!(info["serverInfo"]["name"], "engram-mcp");
        assert_eq!(info["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    }

    struct Fixed;

    #[async_trait::async_trait]
    impl Embedder for Fixed {
        fn name(&self) -> String {
            "fixed".into()
        }
        fn dims(&self) -> usize {
            1
        }
        async fn embed(&self, t: &[String]) -> Result<Vec<Vec<f32>>, engram_embed::EmbedError> {
            Ok(t.iter().map(|_| vec![1.0]).collect())
        }
    }

    #[test]
    fn prompt_context_respects_the_budget() {
        let hits = vec![hit("alice drinks tea"), hit(&"x".repeat(100))];
        let full = prompt_context(&hits, 10_000);
        assert_eq!(full.lines().count(), 2);
        assert!(full.starts_with("- [semantic] alice drinks tea\n"));
        let short = prompt_context(&hits, 60);
        assert!(short.len() <= 60, "{}", short.len());
        assert!(short.ends_with("...\n"));
    }

    #[test]
    fn internal_tags_cannot_be_removed_by_the_caller() {
        let i = Internal {
            internal_type: "agent".into(),
            tags: vec!["agent".into()],
            scope: vec![],
            ghost_type: None,
            ghost_owner: None,
            ghost_space: None,
            ghost_group: None,
        };
        assert_eq!(
            stamped(Some(vec!["x".into()]), Some(&i)),
            Some(vec!["agent".to_string(), "x".to_string()])
        );
        assert_eq!(stamped(None, Some(&i)), Some(vec!["agent".to_string()]));
        assert_eq!(stamped(Some(vec!["x".into()]), None), Some(vec!["x".to_string()]));
    }

    #[test]
    fn tool_groups_parse_and_classify() {
        let g = Groups::parse(&["core".into(), " sharing ".into()]).unwrap();
        assert_eq!(
            g,
            Groups {
                core: true,
                internal: false,
                sharing: true,
                slots: false
            }
        );
        assert_eq!(Groups::of("memory_slot_get"), "slots");
        assert!(g.serves("memory_search") && g.serves("memory_grant"));
        assert!(!g.serves("memory_internal_create"));
        assert!(Groups::parse(&["core".into(), "everything".into()])
            .unwrap_err()
            .contains("everything"));
        assert_eq!(Groups::of("memory_unpublish"), "sharing");
        assert_eq!(Groups::of("memory_internal_query"), "internal");
        assert_eq!(Groups::of("memory_recall"), "core");
    }

    #[test]
    fn sizes_are_checked_before_embedding() {
        assert!(check_size("content", &"x".repeat(MAX_CONTENT_BYTES), MAX_CONTENT_BYTES).is_ok());
        let e = check_size("content", &"x".repeat(MAX_CONTENT_BYTES + 1), MAX_CONTENT_BYTES).unwrap_err();
        assert!(e.contains("limit"), "{e}");
    }

    #[test]
    fn not_found_errors_say_how_to_recover() {
        let e = DbError {
            code: Some("P0002".into()),
            message: "memory x not found".into(),
        };
        assert_eq!(
            db_error(e, Some("abc")),
            "Memory abc not found. Use memory_search or memory_list to find it."
        );
        assert!(parse_id("nope").unwrap_err().contains("memory_search"));
    }
}
