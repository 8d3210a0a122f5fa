//! The MCP tools, one module per tool group: `memories` (the nine core
//! tools) and `entities` (two), `internal` (five), `sharing`, `slots`,
//! `workspace` and `events` (docs/CONTINUITY.md), and `vision` (with
//! `--vision`). Each tool validates its arguments,
//! embeds text when needed, and calls exactly one engram SQL function
//! through [`EngramServer::sql`], the shared path; every rule about memories
//! lives in the extension.

mod entities;
mod events;
mod internal;
pub(crate) mod memories;
pub mod resources;
mod sharing;
mod slots;
mod vision;
mod workspace;

pub use events::Background;

use crate::caller::{Caller, Internal};
use crate::db::{first, Db, DbError, RowExt};
use crate::limits::{check_len, check_opt, clip, clip_quoted, MAX_ID_CHARS, MAX_REASON_CHARS};
use crate::metrics::Metrics;
use engram_embed::cache::Cached;
use engram_embed::{EmbedError, Embedder};
use futures::FutureExt;
use memories::Hit;
use pgvector::Vector;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{tool_handler, Json, RoleServer, ServerHandler};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
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
    /// Embed conversation turns with the turn before them (`--turn-context`).
    pub turn_context: bool,
    /// Embeds captured events off the write path and writes due summaries.
    pub background: Background,
    /// MCP sessions to tell when an owner's resources change.
    pub subscribers: resources::Subscribers,
    /// The image embedder, with `--vision` (the `vision` tool group).
    pub vision: Option<Box<dyn engram_embed::vision::ImageEmbedder>>,
}

impl Shared {
    /// Embeds `text` for caller `c`; the cache is shared only within one owner.
    pub async fn embed(&self, c: &Caller, text: &str) -> Result<Vector, String> {
        let mut v = self
            .embed_texts(&c.owner, &[text.to_string()])
            .await
            .map_err(|e| format!("Could not embed the text: {e}. Retry later or check /health."))?;
        Ok(Vector::from(v.remove(0)))
    }

    /// Embeds a memory about to be written for caller `c`. With
    /// `--turn-context`, a conversation turn (an episodic memory of the
    /// caller's session, outside internal contexts) is embedded with the
    /// turn before it in that session (engram-core's
    /// `conversation::contextual_text`); the stored content stays the turn
    /// alone.
    pub async fn embed_memory(
        &self,
        c: &Caller,
        kind: Option<&str>,
        content: &str,
        occurred_at: Option<&str>,
    ) -> Result<Vector, String> {
        let in_session =
            self.turn_context && kind == Some("episodic") && c.session_id.is_some() && matches!(c.internal, Ok(None));
        if !in_session {
            return self.embed(c, content).await;
        }
        // A failed read (a revoked token, a bad moment) embeds the turn
        // alone: the write that follows reports what is wrong.
        let previous: Option<String> = self
            .db
            .call(
                c,
                "SELECT engram.previous_turn(session_id => $1, \"at\" => $2::text::timestamptz)",
                &[&c.session_id, &occurred_at],
            )
            .await
            .ok()
            .and_then(|rows| rows.first().and_then(|r| r.col::<Option<String>>(0).ok().flatten()));
        self.embed(
            c,
            &engram_core::conversation::contextual_text(content, previous.as_deref()),
        )
        .await
    }

    /// Embeds `texts` for `owner` (the cache's scope), counted in the metrics.
    pub async fn embed_texts(&self, owner: &str, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let started = Instant::now();
        let r = self.embedder.embed_in(owner, texts).await;
        self.metrics.embedding(started.elapsed(), r.is_ok());
        r
    }
}

/// The tool groups `--tools` serves. A tool of a group that is off is
/// neither listed nor callable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Groups {
    /// The handful of tools most agents need (BASIC_TOOLS), the default.
    pub basic: bool,
    pub core: bool,
    pub internal: bool,
    pub sharing: bool,
    pub slots: bool,
    pub workspace: bool,
    pub events: bool,
    /// Not a `--tools` name: `--vision` turns it on, since it needs an image embedder.
    pub vision: bool,
    /// Not a group: `--output-schemas` lists each tool's outputSchema (the
    /// results are structured either way).
    pub output_schemas: bool,
}

/// The default tool set (`--tools basic`): what an agent needs to keep and
/// use memories, at a small cost in tools/list on every turn.
pub const BASIC_TOOLS: [&str; 6] = [
    "memory_remember",
    "memory_search",
    "memory_recall",
    "memory_update",
    "memory_forget",
    "memory_context",
];

pub const GROUP_NAMES: [&str; 7] = ["basic", "core", "internal", "sharing", "slots", "workspace", "events"];

impl Groups {
    /// Group names, or `all`.
    pub fn parse(names: &[String]) -> Result<Groups, String> {
        let mut names: Vec<&str> = names.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
        if names.contains(&"all") {
            names = GROUP_NAMES.to_vec();
        }
        if names.contains(&"vision") {
            return Err(
                "the vision tool group is turned on by --vision (with an image embedder), not by --tools".into(),
            );
        }
        if let Some(bad) = names.iter().find(|g| !GROUP_NAMES.contains(g)) {
            return Err(format!(
                "unknown tool group '{bad}' in --tools; use any of {}, or all",
                GROUP_NAMES.join(", ")
            ));
        }
        Ok(Groups {
            basic: names.contains(&"basic"),
            core: names.contains(&"core"),
            internal: names.contains(&"internal"),
            sharing: names.contains(&"sharing"),
            slots: names.contains(&"slots"),
            workspace: names.contains(&"workspace"),
            events: names.contains(&"events"),
            vision: false,
            output_schemas: false,
        })
    }

    /// The group a tool belongs to.
    pub fn of(tool: &str) -> &'static str {
        if tool.starts_with("memory_internal_") {
            "internal"
        } else if tool.starts_with("memory_slot_") {
            "slots"
        } else if tool.starts_with("memory_workspace_") || tool.starts_with("memory_state_") {
            "workspace"
        } else if EVENT_TOOLS.contains(&tool) {
            "events"
        } else if SHARING_TOOLS.contains(&tool) {
            "sharing"
        } else if VISION_TOOLS.contains(&tool) {
            "vision"
        } else {
            "core"
        }
    }

    pub fn serves(&self, tool: &str) -> bool {
        if self.basic && BASIC_TOOLS.contains(&tool) {
            return true;
        }
        match Groups::of(tool) {
            "internal" => self.internal,
            "sharing" => self.sharing,
            "slots" => self.slots,
            "workspace" => self.workspace,
            "events" => self.events,
            "vision" => self.vision,
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

const VISION_TOOLS: [&str; 3] = ["memory_image_put", "memory_image_release", "memory_vision_search"];

const EVENT_TOOLS: [&str; 4] = [
    "memory_capture",
    "memory_context",
    "memory_summarize",
    "memory_sessions",
];

/// Limits checked before any text is embedded (the database checks the
/// same engram-core limits again): content as engram.remember, queries as
/// engram.search.
pub(crate) use engram_core::limits::{MAX_CONTENT_BYTES, MAX_QUERY_BYTES};
/// What a search that found nothing says (MCP and /v1): better than noise.
pub const NOTHING_RELEVANT: &str = "Nothing relevant: no memory shares a word with the query or comes close to it \
                                    in meaning.";

/// `note` of a search that found nothing; `floor`: the server's relevance
/// floor applied (no min_similarity given, not a ghost's search).
pub fn nothing_relevant(floor: bool) -> String {
    if floor {
        format!(
            "{NOTHING_RELEVANT} Searching by meaning and words leaves out hits under the relevance floor; pass \
             min_similarity (e.g. -1) to see the nearest memories anyway."
        )
    } else {
        NOTHING_RELEVANT.to_string()
    }
}

/// What a ghost conversation's core write tools answer (docs/SECURITY.md).
const GHOST_WRITES: &str = "A ghost conversation writes only through memory_internal_create (the ghost's own \
                            memories of this conversation); memory_remember, memory_update and the other core \
                            write tools are not available with X-Internal-Type: ghost.";

#[derive(Clone)]
pub struct EngramServer {
    shared: Arc<Shared>,
    tool_router: ToolRouter<Self>,
    /// One EngramServer serves one MCP session: it subscribes the session
    /// to resource changes once, whatever a client sends again.
    subscribed: Arc<std::sync::atomic::AtomicBool>,
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

pub(crate) fn check_size(what: &str, text: &str, limit: usize) -> Result<(), String> {
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
    Uuid::parse_str(id.trim()).map_err(|_| {
        format!(
            "'{}' is not a memory id (a UUID). Use memory_search or memory_list to find ids.",
            clip(id)
        )
    })
}

fn parse_ids(ids: &[String]) -> Result<Vec<Uuid>, String> {
    ids.iter().map(|i| parse_id(i)).collect()
}

/// A database error as a tool error that says how to recover, in the
/// tools' words (tool and argument names, not SQL's), with echoes of the
/// caller's input capped.
fn db_error(e: DbError, id: Option<&str>) -> String {
    match (e.code.as_deref(), id) {
        (Some("P0002"), Some(id)) => {
            format!(
                "Memory {} not found. Use memory_search or memory_list to find it.",
                clip(id)
            )
        }
        _ => tool_phrasing(&clip_quoted(&e.message)),
    }
}

/// engram's SQL functions and the tools that call them, for messages that
/// name a function (longest names first, so that no name is a prefix of a
/// later one).
const TOOL_NAMES: [(&str, &str); 28] = [
    ("engram.ghost_search", "memory_search"),
    ("engram.ghost_recall", "memory_recall"),
    ("engram.ghost_list", "memory_list"),
    ("engram.session_events", "memory_context"),
    ("engram.image_release", "memory_image_release"),
    ("engram.vision_search", "memory_vision_search"),
    ("engram.revoke_grant", "memory_revoke_grant"),
    ("engram.consolidate", "memory_consolidate"),
    ("engram.crystallize", "memory_crystallize"),
    ("engram.slot_delete", "memory_slot_delete"),
    ("engram.unpublish", "memory_unpublish"),
    ("engram.summarize", "memory_summarize"),
    ("engram.image_put", "memory_image_put"),
    ("engram.remember", "memory_remember"),
    ("engram.slot_list", "memory_slot_list"),
    ("engram.slot_set", "memory_slot_set"),
    ("engram.slot_get", "memory_slot_get"),
    ("engram.sessions", "memory_sessions"),
    ("engram.publish", "memory_publish"),
    ("engram.capture", "memory_capture"),
    ("engram.context", "memory_context"),
    ("engram.search", "memory_search"),
    ("engram.recall", "memory_recall"),
    ("engram.update", "memory_update"),
    ("engram.forget", "memory_forget"),
    ("engram.reopen", "memory_reopen"),
    ("engram.grant", "memory_grant"),
    ("engram.list", "memory_list"),
];

/// SQL phrasing in a database message, as a tool caller would say it:
/// argument syntax (`reason => '...'`, `'{...}'::jsonb`), the SQL names of
/// arguments whose tool names differ (`group_id`, `after`), and SQL
/// function names. "(SQL: engram.x)" asides are dropped: the message
/// already names the tool.
fn tool_phrasing(message: &str) -> String {
    let mut m = message.to_string();
    while let Some(start) = m.find(" (SQL: engram.") {
        match m[start..].find(')') {
            Some(end) => m.replace_range(start..start + end + 1, ""),
            None => break,
        }
    }
    for (sql, tool) in [
        ("'::jsonb", "'"),
        ("::jsonb", ""),
        ("group_id => ", "group: "),
        ("group_id and", "group and"),
        ("without after", "without cursor"),
        ("a previous engram.list call", "a previous memory_list call"),
        (" => ", ": "),
    ] {
        m = m.replace(sql, tool);
    }
    for (sql, tool) in TOOL_NAMES {
        let mut out = String::with_capacity(m.len());
        let mut rest = m.as_str();
        while let Some(i) = rest.find(sql) {
            let after = &rest[i + sql.len()..];
            let whole = !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            out.push_str(&rest[..i]);
            out.push_str(if whole { tool } else { sql });
            rest = after;
        }
        out.push_str(rest);
        m = out;
    }
    m
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

/// The hits of memory_internal_query as prompt text, within `max_chars`:
/// engram-core's context rendering (the same as engram.context's), so
/// every memory sits under a header engram writes and its stored lines are
/// quoted, never posing as a system or user message.
fn prompt_context(hits: &[Hit], max_chars: usize) -> String {
    let memories: Vec<Value> = hits
        .iter()
        .map(|h| serde_json::json!({"id": h.id, "kind": h.kind, "content": h.content}))
        .collect();
    let out = engram_core::context::render(&serde_json::json!({ "memories": memories }), max_chars);
    out["text"].as_str().unwrap_or_default().to_string()
}

impl EngramServer {
    pub fn new(shared: Arc<Shared>) -> EngramServer {
        EngramServer {
            shared,
            subscribed: Default::default(),
            tool_router: Self::memories_router()
                + Self::entities_router()
                + Self::internal_router()
                + Self::sharing_router()
                + Self::slots_router()
                + Self::workspace_router()
                + Self::events_router()
                + Self::vision_router(),
        }
    }

    /// Embeds `text` for caller `c` (see [`Shared::embed`]).
    async fn embed(&self, c: &Caller, text: &str) -> Result<Vector, String> {
        self.shared.embed(c, text).await
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
            // A tool that tells clients it is read-only may be served by the
            // read replica (--read-database-url): the annotation clients see
            // is the one routing rule.
            let read_only = self
                .tool_router
                .get(name)
                .and_then(|t| t.annotations.as_ref())
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false);
            // A panic in a tool body (a bug, a row it cannot read) is an
            // error answer: rmcp never answers a request whose handler panicked.
            let body = std::panic::AssertUnwindSafe(body.instrument(span.clone())).catch_unwind();
            let outcome = if read_only {
                crate::db::reading(body).await
            } else {
                body.await
            };
            outcome.unwrap_or_else(|panic| Err(panicked(name, &*panic)))
        } else if Groups::of(name) == "vision" {
            Err(vision::VISION_OFF.to_string())
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

    /// The shared path of a tool that is one SQL call: the caller from the
    /// request, the call bound to the caller's token (`db::Db::call`), the
    /// rows shaped into the result, and a database error turned into a
    /// message that says how to recover. Tools that embed text or route
    /// ghost reads use the same parts around their own call.
    async fn sql<T>(
        &self,
        parts: &Parts,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        shape: impl FnOnce(Vec<Row>) -> Result<T, String>,
    ) -> Result<T, String> {
        self.sql_about(parts, None, sql, params, shape).await
    }

    /// As `sql`, for a call about one memory: a not-found error names it
    /// and the tools that find memory ids.
    async fn sql_about<T>(
        &self,
        parts: &Parts,
        memory: Option<&str>,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        shape: impl FnOnce(Vec<Row>) -> Result<T, String>,
    ) -> Result<T, String> {
        let c = caller(parts)?;
        let rows = self
            .shared
            .db
            .call(&c, sql, params)
            .await
            .map_err(|e| db_error(e, memory))?;
        shape(rows)
    }
}

/// The error answer of a tool whose handler panicked (logged with the panic).
fn panicked(tool: &str, panic: &(dyn std::any::Any + Send)) -> String {
    tracing::error!(tool, panic = %panic_message(panic), "tool handler panicked");
    format!(
        "{tool} failed inside engram-mcp (an internal error, logged by the server); nothing more was done. \
         Retry, or report it if it persists."
    )
}

/// What a panic said (its &str or String payload), for the log.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// The first column of the first row, for SQL functions that return jsonb.
fn json_of(rows: Vec<Row>) -> Result<Value, String> {
    first(&rows)?.col::<Value>(0)
}

/// Internal tools are listed only to requests in an internal context; those
/// requests (a ghost or agent conversation of a platform)
/// are not the owner's own working sessions, so the continuity groups are
/// not listed to them. The database refuses what a context may not do
/// either way (docs/SECURITY.md).
fn listed(tool: &str, has_internal: bool) -> bool {
    match Groups::of(tool) {
        "internal" => has_internal,
        "workspace" | "events" | "slots" | "vision" => !has_internal,
        _ => true,
    }
}

/// Arguments tools took before 0.13.0 under another name, and still take
/// (their serde aliases): (tool, old name). They are now `query` and `limit`,
/// as in every other tool.
const RENAMED_ARGUMENTS: [(&str, &str); 2] = [("memory_context", "query_text"), ("memory_sessions", "lim")];

/// The first argument whose JSON type is not one its schema allows (a
/// `"limit": "5"`), as a refusal in the tools' words; serde would answer
/// "failed to deserialize parameters: invalid type: string", naming no
/// argument.
fn mistyped_argument(
    tool: &str,
    schema: &serde_json::Map<String, Value>,
    args: Option<&serde_json::Map<String, Value>>,
) -> Option<String> {
    let properties = schema.get("properties").and_then(Value::as_object)?;
    let mut names: Vec<&String> = args?.keys().collect();
    names.sort_unstable();
    names.into_iter().find_map(|name| {
        let value = &args?[name];
        let allowed: Vec<&str> = match properties.get(name)?.get("type")? {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => return None,
        };
        let fits = |t: &str| match t {
            "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
            "number" => value.is_number(),
            "string" => value.is_string(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "null" => value.is_null(),
            _ => true,
        };
        if allowed.iter().any(|t| fits(t)) {
            return None;
        }
        let wanted: Vec<&str> = allowed
            .iter()
            .filter(|t| **t != "null")
            .map(|t| match *t {
                "integer" => "a whole number",
                "number" => "a number",
                "string" => "a string",
                "boolean" => "true or false",
                "array" => "a list",
                "object" => "a JSON object",
                other => other,
            })
            .collect();
        let got = match value {
            Value::String(v) => format!("the string \"{}\"", clip(v)),
            Value::Number(n) => format!("the number {n}"),
            Value::Bool(b) => format!("{b}"),
            Value::Array(_) => "a list".into(),
            Value::Object(_) => "an object".into(),
            Value::Null => "null".into(),
        };
        let example = match (allowed.first().copied(), value) {
            (Some("integer" | "number"), Value::String(v)) if v.trim().parse::<f64>().is_ok() => {
                format!(" (send {name}: {}, without quotes)", v.trim())
            }
            _ => String::new(),
        };
        Some(format!(
            "{tool}: {name} must be {}, not {got}{example}; nothing was done. Call it again with that type \
             (tools/list describes each argument).",
            wanted.join(" or ")
        ))
    })
}

/// The refusal of a call to `tool` (input schema `schema`) with arguments it
/// does not take, naming them and the ones it takes; None when it takes
/// them all. serde would drop an unknown argument silently, and a caller
/// who misspelt one (memory_context {"query_text"} before 0.13.0 was
/// {"query"}: no memories came back) would never learn why.
fn unknown_arguments(
    tool: &str,
    schema: &serde_json::Map<String, Value>,
    args: Option<&serde_json::Map<String, Value>>,
) -> Option<String> {
    let known: Vec<&str> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let renamed = |a: &str| RENAMED_ARGUMENTS.contains(&(tool, a));
    let mut unknown: Vec<&str> = args?
        .keys()
        .map(String::as_str)
        .filter(|a| !known.contains(a) && !renamed(a))
        .collect();
    if unknown.is_empty() {
        return None;
    }
    unknown.sort_unstable();
    let mut takes = known.clone();
    takes.sort_unstable();
    // a near name: one is the other with a suffix (query / query_text) or a plural
    let near = |a: &str| {
        known.iter().copied().find(|k| {
            a.starts_with(&format!("{k}_"))
                || k.starts_with(&format!("{a}_"))
                || a.trim_end_matches('s') == k.trim_end_matches('s')
        })
    };
    let named: Vec<String> = unknown
        .iter()
        .map(|a| match near(a) {
            Some(k) => format!("'{}' (did you mean '{k}'?)", clip(a)),
            None => format!("'{}'", clip(a)),
        })
        .collect();
    Some(format!(
        "{tool} does not take {} {}; nothing was done. It takes: {}. Call it again with those names only \
         (tools/list describes each).",
        if unknown.len() == 1 {
            "the argument"
        } else {
            "the arguments"
        },
        named.join(", "),
        if takes.is_empty() {
            "no arguments".to_string()
        } else {
            takes.join(", ")
        }
    ))
}

const INSTRUCTIONS: &str = "engram: long-term memory. Search before you answer from memory; remember durable facts, \
                            events and procedures; update or flag memories that turn out wrong. Resources are \
                            curated by people: read them, never change them. Errors say how to recover.";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for EngramServer {
    /// Tools, and resources with list_changed notifications.
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("engram-mcp", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS.to_string())
    }

    /// Every tool call: the caller's leftover embedding backlog is noted
    /// first (a check per owner and process, whatever the tool: after a
    /// crash, the owner's next call of any tool drains it), then the tool
    /// runs; a panic anywhere in it, argument decoding included, is an
    /// error answer rather than a request rmcp never answers.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        if let Some(c) = context
            .extensions
            .get::<Parts>()
            .and_then(|p| p.extensions.get::<Caller>())
            .filter(|c| c.context().is_ok())
        {
            self.shared.background.note(c);
        }
        let name = request.name.to_string();
        // A tool --tools hides answers "not enabled" (from `run`), whatever its arguments.
        let served = self.shared.groups.serves(&name);
        if let Some(refusal) = self
            .tool_router
            .get(&name)
            .filter(|_| served)
            .and_then(|tool| unknown_arguments(&name, &tool.input_schema, request.arguments.as_ref()))
        {
            tracing::info!(tool = %name, "refused: unknown arguments");
            return Ok(CallToolResult::error(vec![ContentBlock::text(refusal)]).into());
        }
        if let Some(refusal) = self
            .tool_router
            .get(&name)
            .filter(|_| served)
            .and_then(|tool| mistyped_argument(&name, &tool.input_schema, request.arguments.as_ref()))
        {
            tracing::info!(tool = %name, "refused: an argument of the wrong type");
            return Ok(CallToolResult::error(vec![ContentBlock::text(refusal)]).into());
        }
        let tcc = ToolCallContext::new(self, request, context);
        match std::panic::AssertUnwindSafe(self.tool_router.call(tcc))
            .catch_unwind()
            .await
        {
            Ok(answer) => answer,
            Err(panic) => Ok(CallToolResult::error(vec![ContentBlock::text(panicked(&name, &*panic))]).into()),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, rmcp::ErrorData> {
        self.resources_list(&context).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, rmcp::ErrorData> {
        Ok(self.resources_read(&request.uri, &context).await?.into())
    }

    /// A session of an owner hears when that owner's resources change.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(c) = context
            .extensions
            .get::<Parts>()
            .and_then(|p| p.extensions.get::<Caller>())
        {
            if !self.subscribed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                self.shared.subscribers.register(&c.owner, context.peer.clone());
            }
        }
    }

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
            .filter(|t| self.shared.groups.serves(&t.name) && listed(&t.name, has_internal))
            .map(|mut t| {
                if !self.shared.groups.output_schemas {
                    t.output_schema = None;
                }
                t
            })
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
            metadata: None,
            score: 1.0,
            similarity: None,
            occurred_at: None,
            valid_from: None,
            valid_to: None,
            session_id: None,
        }
    }

    #[test]
    fn server_info_names_engram_and_its_version() {
        let info = <EngramServer as ServerHandler>::get_info(&EngramServer::new(Arc::new(Shared {
            db: Db::connect(
                "host=/nonexistent user=x",
                None,
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
            turn_context: false,
            background: Background::new(std::time::Duration::ZERO, None, false).0,
            subscribers: Default::default(),
            vision: None,
        })));
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
        assert_eq!(full.lines().count(), 5, "{full}");
        assert!(
            full.contains("[memory · semantic · id i]\n> alice drinks tea\n"),
            "{full}"
        );
        let short = prompt_context(&hits, 260);
        assert!(short.chars().count() <= 260, "{}", short.chars().count());
        assert!(short.ends_with("…\n"), "{short}");
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
                basic: false,
                core: true,
                internal: false,
                sharing: true,
                slots: false,
                workspace: false,
                events: false,
                vision: false,
                output_schemas: false,
            }
        );
        let basic = Groups::parse(&["basic".into()]).unwrap();
        assert!(basic.serves("memory_remember") && basic.serves("memory_context"));
        assert!(!basic.serves("memory_list") && !basic.serves("memory_capture"));
        assert!(Groups::parse(&["vision".into()]).unwrap_err().contains("--vision"));
        assert_eq!(Groups::of("memory_vision_search"), "vision");
        assert!(!all_groups_but_vision().serves("memory_image_put"));
        assert_eq!(Groups::of("memory_slot_get"), "slots");
        assert_eq!(Groups::of("memory_state_save"), "workspace");
        assert_eq!(Groups::of("memory_context"), "events");
        let all = Groups::parse(&["all".into()]).unwrap();
        assert!(all.core && all.internal && all.sharing && all.slots && all.workspace && all.events);
        assert!(g.serves("memory_search") && g.serves("memory_grant"));
        assert!(!g.serves("memory_internal_create"));
        assert!(Groups::parse(&["core".into(), "everything".into()])
            .unwrap_err()
            .contains("everything"));
        assert_eq!(Groups::of("memory_unpublish"), "sharing");
        assert_eq!(Groups::of("memory_internal_query"), "internal");
        assert_eq!(Groups::of("memory_recall"), "core");
    }

    fn all_groups_but_vision() -> Groups {
        Groups::parse(&["all".into()]).unwrap()
    }

    #[test]
    fn sizes_are_checked_before_embedding() {
        assert!(check_size("content", &"x".repeat(MAX_CONTENT_BYTES), MAX_CONTENT_BYTES).is_ok());
        let e = check_size("content", &"x".repeat(MAX_CONTENT_BYTES + 1), MAX_CONTENT_BYTES).unwrap_err();
        assert!(e.contains("limit"), "{e}");
    }

    #[test]
    fn database_messages_are_put_in_the_tools_words() {
        let say = |code: &str, message: &str| {
            db_error(
                DbError {
                    code: Some(code.into()),
                    message: message.into(),
                    hint: None,
                },
                None,
            )
        };
        assert_eq!(
            say(
                "22023",
                "publish to exactly one target: space => '<space id>' or group_id => '<group id>'"
            ),
            "publish to exactly one target: space: '<space id>' or group: '<group id>'"
        );
        assert_eq!(
            say(
                "22023",
                "metadata must be a JSON object, not array; pass metadata => '{\"key\": \"value\"}'::jsonb"
            ),
            "metadata must be a JSON object, not array; pass metadata: '{\"key\": \"value\"}'"
        );
        assert_eq!(
            say(
                "P0002",
                "memory x not found; use engram.search or engram.list to find memory ids"
            ),
            "memory x not found; use memory_search or memory_list to find memory ids"
        );
        assert_eq!(
            say(
                "P0002",
                "Use memory_state_list (SQL: engram.state_list) to see its states"
            ),
            "Use memory_state_list to see its states"
        );
        assert_eq!(
            say(
                "22023",
                "malformed cursor; the cursor comes from another version; start again without after"
            ),
            "malformed cursor; the cursor comes from another version; start again without cursor"
        );
        assert_eq!(say("XX000", "see engram.listing"), "see engram.listing");
        let long = say("P0002", &format!("Workspace \"{}\" not found", "w".repeat(100_000)));
        assert!(long.chars().count() < 120, "{long}");
    }

    #[test]
    fn not_found_errors_say_how_to_recover() {
        let e = DbError {
            code: Some("P0002".into()),
            message: "memory x not found".into(),
            hint: None,
        };
        assert_eq!(
            db_error(e, Some("abc")),
            "Memory abc not found. Use memory_search or memory_list to find it."
        );
        assert!(parse_id("nope").unwrap_err().contains("memory_search"));
    }

    fn schema(names: &[&str]) -> serde_json::Map<String, Value> {
        let props: serde_json::Map<String, Value> = names
            .iter()
            .map(|n| (n.to_string(), serde_json::json!({"type": "string"})))
            .collect();
        serde_json::json!({"type": "object", "properties": props})
            .as_object()
            .unwrap()
            .clone()
    }

    fn args(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn arguments_of_the_wrong_type_are_named_with_what_to_send() {
        let mut search = schema(&["query", "limit", "tags"]);
        let props = search.get_mut("properties").unwrap().as_object_mut().unwrap();
        props.insert("query".into(), serde_json::json!({"type": "string"}));
        props.insert(
            "limit".into(),
            serde_json::json!({"type": ["integer", "null"], "format": "int32"}),
        );
        props.insert("tags".into(), serde_json::json!({"type": ["array", "null"]}));
        let check = |v: Value| mistyped_argument("memory_search", &search, Some(&args(v)));
        assert_eq!(check(serde_json::json!({"query": "x", "limit": 5, "tags": null})), None);
        assert_eq!(
            check(serde_json::json!({"query": "x", "limit": "5"})).unwrap(),
            "memory_search: limit must be a whole number, not the string \"5\" (send limit: 5, without quotes); \
             nothing was done. Call it again with that type (tools/list describes each argument)."
        );
        assert!(check(serde_json::json!({"query": 3}))
            .unwrap()
            .contains("query must be a string, not the number 3"));
        assert!(check(serde_json::json!({"query": "x", "tags": "a"}))
            .unwrap()
            .contains("tags must be a list"));
        assert!(check(serde_json::json!({"query": "x", "limit": 2.5})).is_some());
    }

    #[test]
    fn unknown_arguments_are_refused_naming_what_the_tool_takes() {
        let search = schema(&["query", "limit", "kinds"]);
        assert_eq!(
            unknown_arguments(
                "memory_search",
                &search,
                Some(&args(serde_json::json!({"query": "x", "limit": 2})))
            ),
            None
        );
        assert_eq!(unknown_arguments("memory_search", &search, None), None);
        let refusal = unknown_arguments(
            "memory_search",
            &search,
            Some(&args(serde_json::json!({"query_text": "x"}))),
        )
        .unwrap();
        assert_eq!(
            refusal,
            "memory_search does not take the argument 'query_text' (did you mean 'query'?); nothing was done. \
             It takes: kinds, limit, query. Call it again with those names only (tools/list describes each)."
        );
        let two = unknown_arguments(
            "memory_search",
            &search,
            Some(&args(
                serde_json::json!({"query": "x", "verbose": true, "kind": "semantic"}),
            )),
        )
        .unwrap();
        assert!(
            two.contains("the arguments 'kind' (did you mean 'kinds'?), 'verbose';"),
            "{two}"
        );
        // the names tools took before 0.13.0 still pass
        let context = schema(&["query", "session_id"]);
        assert_eq!(
            unknown_arguments(
                "memory_context",
                &context,
                Some(&args(serde_json::json!({"query_text": "x"})))
            ),
            None
        );
        // ...for their own tool only
        assert!(unknown_arguments("memory_search", &search, Some(&args(serde_json::json!({"lim": 3})))).is_some());
        let none = unknown_arguments(
            "memory_sessions",
            &schema(&[]),
            Some(&args(serde_json::json!({"x": 1}))),
        )
        .unwrap();
        assert!(none.contains("It takes: no arguments."), "{none}");
    }
}

/// Scores as an agent reads them: four decimals. A tool's result becomes
/// JSON through f64, where an f32 0.7 would read 0.699999988079071.
pub(crate) mod score {
    pub fn round(v: f32) -> f64 {
        (f64::from(v) * 1e4).round() / 1e4
    }

    pub fn serialize<S: serde::Serializer>(v: &f32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(round(*v))
    }

    pub mod opt {
        pub fn serialize<S: serde::Serializer>(v: &Option<f32>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(v) => s.serialize_some(&super::round(*v)),
                None => s.serialize_none(),
            }
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn scores_carry_four_decimals_without_float_noise() {
            let v = serde_json::to_value(serde_json::json!({})).unwrap();
            assert!(v.is_object());
            assert_eq!(super::round(0.7), 0.7);
            assert_eq!(super::round(0.123_456_7), 0.1235);
            #[derive(serde::Serialize)]
            struct S {
                #[serde(serialize_with = "super::serialize")]
                a: f32,
                #[serde(serialize_with = "super::opt::serialize")]
                b: Option<f32>,
            }
            let v = serde_json::to_value(S { a: 0.7, b: Some(0.3) }).unwrap();
            assert_eq!(v.to_string(), r#"{"a":0.7,"b":0.3}"#);
        }
    }
}
