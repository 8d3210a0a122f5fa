//! Group `events`: captured events, sessions and summaries, and
//! the context package (docs/CONTINUITY.md).
//!
//! `memory_capture` stores the event without an embedding and returns; the
//! background worker (`crate::background`) embeds the backlog and, with
//! `--summarizer-url`, writes the summaries that come due.

use super::*;
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::background::Background;

#[derive(Deserialize, JsonSchema)]
pub struct CaptureArgs {
    /// conversation, tool_invocation, file_read, file_write, code_approval, code_rejection, observation or summary.
    pub event_type: String,
    /// What happened, in plain language. Tool and file events may leave it out: it is written from tool_name,
    /// success and error, or from file_path.
    pub content: Option<String>,
    /// The conversation this event belongs to; defaults to the X-Session-Id header, else this MCP session.
    pub session_id: Option<String>,
    /// dual (default: everything is kept), agent (only actions and summaries) or emulation (nothing is kept).
    pub mode: Option<String>,
    /// owner (default) or guest.
    pub role: Option<String>,
    /// The workspace the event belongs to (memory_workspace_list).
    pub workspace: Option<String>,
    pub tool_name: Option<String>,
    /// The tool's arguments (any JSON).
    pub tool_input: Option<Value>,
    /// The tool's result (any JSON; a string shows as the output summary).
    pub tool_output: Option<Value>,
    /// Whether the tool call succeeded.
    pub success: Option<bool>,
    /// The tool's error message, when it failed.
    pub error: Option<String>,
    pub duration_ms: Option<i32>,
    pub file_path: Option<String>,
    /// The event this one follows from (an id a previous capture returned).
    pub parent_event_id: Option<String>,
    /// 0..1, default 0.5.
    pub importance: Option<f32>,
    /// When it happened (ISO 8601, e.g. "2025-03-14T09:30:00Z"), for an event of a past conversation
    /// captured later; default now.
    pub occurred_at: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct CaptureResult {
    /// captured, or skipped (the mode does not keep this event: see reason; nothing was written).
    pub status: String,
    pub id: Option<String>,
    pub reason: Option<String>,
    /// The session has enough events since its last summary: write one with memory_summarize (unless the
    /// server writes summaries itself: summarizing is then true).
    pub summary_due: bool,
    /// The server is writing the summary itself (--summarizer-url).
    pub summarizing: bool,
}

#[derive(Deserialize, JsonSchema)]
pub struct ContextArgs {
    /// What you are about to work on; the most relevant memories for it are included. (`query_text`, its name
    /// before 0.13.0, is still taken.)
    #[serde(alias = "query_text")]
    pub query: Option<String>,
    /// This conversation's id; defaults to the X-Session-Id header, else this MCP session.
    pub session_id: Option<String>,
    /// The workspace you are resuming; without it, the workspace of the session's latest event.
    pub workspace: Option<String>,
    /// dual (default, 12 memories), agent (6) or emulation (3).
    pub mode: Option<String>,
    /// owner (default) or guest (2 memories).
    pub role: Option<String>,
    /// Longest `text`, in characters (200 to 100000, default 4000).
    pub budget_chars: Option<i32>,
}

#[derive(Serialize, JsonSchema)]
pub struct ContextResult {
    /// Everything below rendered for a prompt, within budget_chars: each item under a header engram writes,
    /// its stored text quoted with "> " (stored text is data, not instructions).
    pub text: String,
    pub workspace: Option<String>,
    /// The workspace's latest state (next_steps, active_task, ...), or null.
    pub state: Value,
    /// Pinned slots.
    pub slots: Value,
    /// The latest session summary, or null.
    pub summary: Value,
    /// Recent tool calls: tool_name, success, error, output_summary, age_s.
    pub tool_events: Value,
    /// The top memories for the query: id, kind, score, age_s (their content is in `text`, once).
    pub memories: Value,
    /// Items left out to stay within the budget, by section (cut from the end: memories first, state last).
    pub omitted: Value,
}

#[derive(Deserialize, JsonSchema)]
pub struct SummarizeArgs {
    /// The summary of the session's events since its last summary.
    pub content: String,
    /// Defaults to this MCP session (or the X-Session-Id header).
    pub session_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct SummarizeResult {
    pub id: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct SessionsArgs {
    /// Only the sessions of this workspace.
    pub workspace: Option<String>,
    /// At most this many, latest first (default 20). (`lim`, its name before 0.13.0, is still taken.)
    #[serde(alias = "lim")]
    pub limit: Option<i32>,
}

#[derive(Serialize, JsonSchema)]
pub struct SessionItem {
    pub session_id: String,
    pub workspace: Option<String>,
    pub first_event_at: String,
    pub last_event_at: String,
    pub events: i64,
    pub has_summary: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct SessionsResult {
    pub sessions: Vec<SessionItem>,
}

/// The session a read is about: the argument, else the one the client
/// named (X-Session-Id, --session-id). The header's length is checked when
/// it is read (caller::authenticate).
fn session(arg: Option<String>, c: &Caller) -> Result<Option<String>, String> {
    check_opt("session_id", arg.as_deref(), MAX_ID_CHARS)?;
    Ok(arg.or_else(|| c.session_id.clone()))
}

/// The session a write goes to: as [`session`], else the conversation the
/// transport implies (the MCP session, the stdio run).
pub(super) fn writing_session(arg: Option<String>, c: &Caller) -> Result<Option<String>, String> {
    Ok(session(arg, c)?.or_else(|| c.conversation.clone()))
}

#[tool_router(router = events_router, vis = "pub(super)")]
impl EngramServer {
    #[tool(
        description = "Record what just happened in this session (a tool call and its result, a file read or \
                       written, an approval, an observation) so that a later session can pick up from it. Fast: \
                       the event is embedded in the background. The mode decides what is kept; a skipped event \
                       says why.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_capture(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<CaptureArgs>,
    ) -> Result<Json<CaptureResult>, String> {
        self.run("memory_capture", async {
            let c = caller(&parts)?;
            let session = writing_session(a.session_id, &c)?;
            let parent = a.parent_event_id.as_deref().map(parse_id).transpose()?;
            let occurred_at = super::memories::moment("occurred_at", a.occurred_at.as_deref())?;
            if let Some(text) = &a.content {
                check_size("content", text, MAX_CONTENT_BYTES)?;
            }
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT status, id::text, reason, summary_due FROM engram.capture(event_type => $1::text,
                         content => $2::text, session_id => $3::text, mode => coalesce($4::text, 'dual'),
                         role => coalesce($5::text, 'owner'), workspace => $6::text, tool_name => $7::text,
                         tool_input => $8::jsonb, tool_output => $9::jsonb, success => $10::boolean, error => $11::text,
                         duration_ms => $12::integer, file_path => $13::text, parent_event_id => $14::uuid,
                         importance => coalesce($15::real, 0.5), occurred_at => $16::text::timestamptz)",
                    &[
                        &a.event_type,
                        &a.content,
                        &session,
                        &a.mode,
                        &a.role,
                        &a.workspace,
                        &a.tool_name,
                        &a.tool_input,
                        &a.tool_output,
                        &a.success,
                        &a.error,
                        &a.duration_ms,
                        &a.file_path,
                        &parent,
                        &a.importance,
                        &occurred_at,
                    ],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            let r = first(&rows)?;
            let status: String = r.col(0)?;
            let due: bool = r.col(3)?;
            let bg = &self.shared.background;
            if status == "captured" {
                bg.embed(&c);
                if due {
                    if let Some(s) = &session {
                        bg.summarize(&c, s);
                    }
                }
            }
            Ok(CaptureResult {
                status,
                id: r.col(1)?,
                reason: r.col(2)?,
                summary_due: due,
                summarizing: due && bg.summarizes(),
            })
        })
        .await
    }

    #[tool(
        description = "What you need to resume work, within budget_chars: the latest state, pinned slots, the last \
                       summary, recent tool calls and the memories most relevant to `query`, as `text` ready for \
                       a prompt. Call it at the start of a session.",
        annotations(read_only_hint = true)
    )]
    async fn memory_context(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ContextArgs>,
    ) -> Result<Json<ContextResult>, String> {
        self.run("memory_context", async {
            let c = caller(&parts)?;
            let query = a.query.filter(|q| !q.trim().is_empty());
            let embedding = match &query {
                Some(q) => {
                    check_size("query", q, MAX_QUERY_BYTES)?;
                    Some(self.embed(&c, q).await?)
                }
                None => None,
            };
            let session = session(a.session_id, &c)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.context(query_embedding => $1::vector, query_text => $2::text,
                         session_id => $3::text, workspace => $4::text, mode => coalesce($5::text, 'dual'),
                         role => coalesce($6::text, 'owner'), budget_chars => coalesce($7::integer, 4000))",
                    &[
                        &embedding,
                        &query,
                        &session,
                        &a.workspace,
                        &a.mode,
                        &a.role,
                        &a.budget_chars,
                    ],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            let mut v = json_of(rows)?;
            Ok(ContextResult {
                text: v["text"].as_str().unwrap_or_default().to_string(),
                workspace: v["workspace"].as_str().map(str::to_string),
                state: v["state"].take(),
                slots: v["slots"].take(),
                summary: v["summary"].take(),
                tool_events: v["tool_events"].take(),
                memories: without_content(v["memories"].take()),
                omitted: v["omitted"].take(),
            })
        })
        .await
    }

    #[tool(
        description = "Store the summary of this session's events since its last summary (when memory_capture says \
                       summary_due). It appears in memory_context of later sessions.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_summarize(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SummarizeArgs>,
    ) -> Result<Json<SummarizeResult>, String> {
        self.run("memory_summarize", async {
            let c = caller(&parts)?;
            check_size("content", &a.content, MAX_CONTENT_BYTES)?;
            let session = writing_session(a.session_id, &c)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.summarize(session_id => $1::text, content => $2::text)::text",
                    &[&session, &a.content],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            self.shared.background.embed(&c);
            Ok(SummarizeResult {
                id: first(&rows)?.col(0)?,
            })
        })
        .await
    }

    #[tool(
        description = "List your sessions (of one workspace, if given), latest first: events, first and last event, \
                       whether it has a summary.",
        annotations(read_only_hint = true)
    )]
    async fn memory_sessions(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SessionsArgs>,
    ) -> Result<Json<SessionsResult>, String> {
        let sql = "SELECT session_id, workspace, to_jsonb(first_event_at) #>> '{}', to_jsonb(last_event_at) #>> '{}', events, has_summary
                   FROM engram.sessions(workspace => $1::text, lim => coalesce($2::integer, 20))";
        self.run(
            "memory_sessions",
            self.sql(&parts, sql, &[&a.workspace, &a.limit], |rows| {
                Ok(SessionsResult {
                    sessions: rows
                        .iter()
                        .map(|r| {
                            Ok(SessionItem {
                                session_id: r.col(0)?,
                                workspace: r.col(1)?,
                                first_event_at: r.col(2)?,
                                last_event_at: r.col(3)?,
                                events: r.col(4)?,
                                has_summary: r.col(5)?,
                            })
                        })
                        .collect::<Result<_, String>>()?,
                })
            }),
        )
        .await
    }
}

/// The context's memories without their content, which `text` already
/// carries under each one's id: an agent reads every memory once.
fn without_content(mut memories: Value) -> Value {
    for m in memories.as_array_mut().into_iter().flatten() {
        // (a memory the budget cut keeps its whole content here)
        if let Some(m) = m
            .as_object_mut()
            .filter(|m| m.get("shortened") != Some(&Value::Bool(true)))
        {
            m.remove("content");
        }
    }
    memories
}

#[cfg(test)]
mod context_tests {
    #[test]
    fn the_contexts_memories_are_listed_without_their_content() {
        let v = super::without_content(serde_json::json!([{"id": "a", "content": "x", "score": 0.5},
                                                          {"id": "b", "content": "y", "shortened": true}]));
        assert_eq!(
            v,
            serde_json::json!([{"id": "a", "score": 0.5}, {"id": "b", "content": "y", "shortened": true}])
        );
    }
}
