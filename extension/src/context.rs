//! `engram.context`, the context package (docs/CONTINUITY.md): what an
//! agent needs to resume, in one call and within `budget_chars`. The parts
//! are read by statements kept for the session, the memories by
//! [`crate::search::hits`] in the same process, and engram-core's
//! `context` decides what fits and writes the text.

use std::cell::RefCell;

use crate::errors::OrRaise;
use crate::kept::kept;
use crate::raw::RawVector;
use crate::search::{hits, Query};
use engram_core::policy::{self, Mode, Role};
use engram_core::{context, Error, Sqlstate};
use pgrx::datum::{DatumWithOid, Uuid};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient};
use pgrx::{JsonB, PgOid};
use serde_json::{json, Value};

/// Whether engram._check_name takes `name` (a workspace's, a session's): 1
/// to 200 bytes, not blank.
fn valid_name(name: &str) -> bool {
    !name.trim_matches(' ').is_empty() && name.len() <= 200
}

/// What an agent needs to resume: the workspace's latest state, pinned
/// slots, the latest summary, recent tool events, and the top memories for
/// the query (context_depth(mode, role) of them, past the ones the other
/// sections show). engram-core's `context` keeps what fits in
/// budget_chars, cutting in that order from the end, and writes `text`.
/// The workspace is the one given, else the one of the session's latest
/// event; summaries and tool events come from that workspace, else from the
/// session, else from all of the owner's.
#[allow(clippy::too_many_arguments)]
#[pg_extern(security_definer, name = "context")]
fn context(
    owner: default!(Option<String>, "NULL"),
    query_embedding: default!(Option<RawVector>, "NULL"),
    query_text: default!(Option<String>, "NULL"),
    session_id: default!(Option<String>, "NULL"),
    workspace: default!(Option<String>, "NULL"),
    mode: default!(Option<String>, "'dual'"),
    role: default!(Option<String>, "'owner'"),
    budget_chars: default!(Option<i32>, 4000),
) -> JsonB {
    if query_embedding.is_some_and(|e| e.oid() == pg_sys::InvalidOid) {
        error!("engram.context needs its query's type: call it from SQL");
    }
    let owner = crate::security::caller(owner, None, None, Some(false));
    let budget = budget(budget_chars.map(i64::from));
    let depth = policy::context_depth(
        Mode::parse(mode.as_deref().unwrap_or("dual")).or_raise(),
        Role::parse(role.as_deref().unwrap_or("owner")).or_raise(),
    ) as usize;
    let words = crate::search::query_words(query_text.as_deref());
    // (engram._check_name refuses a name that is not a valid one)
    if let Some(s) = session_id.as_ref().filter(|s| !valid_name(s)) {
        crate::checks::run_check(
            "SELECT engram._check_name('session_id', $1, '2026-11-23-a')",
            vec![s.clone().into()],
        );
    }
    let parts =
        Spi::connect_mut(|client| KEPT.with_borrow_mut(|k| parts(client, k, &owner, session_id.as_deref(), workspace)));
    let mut memories = Value::Array(Vec::new());
    let mut ids: Vec<Uuid> = Vec::new();
    if query_embedding.is_some() || words.is_some() {
        // the ids the summary and the tool events show
        let shown: Vec<String> = parts
            .tools
            .as_array()
            .into_iter()
            .flatten()
            .chain(Some(&parts.summary))
            .filter_map(|x| x.get("id")?.as_str().map(str::to_string))
            .collect();
        let floor = if query_embedding.is_some() && words.is_some() {
            crate::gucs::_setting_similarity_floor()
        } else {
            0.0
        };
        let window = words
            .and_then(|_| crate::time::query_window(query_text.as_deref().unwrap_or_default(), crate::time::now()));
        let scope = crate::knn::Scope {
            owner: Some(owner.clone()),
            statuses: Some(vec![Some("active".to_string())]),
            ..Default::default()
        };
        let query = Query {
            embedding: query_embedding,
            text: query_text,
            k: Some(depth as i32 + shown.len() as i32),
            min_similarity: Some(floor),
            window,
            indexed: true,
            known_at: None,
            ids: None,
        };
        let found: Vec<_> = hits(scope, query, None)
            .into_iter()
            .map(|h| h.row())
            .filter(|r| !shown.contains(&r.0.to_string()))
            .take(depth)
            .collect();
        ids = found.iter().map(|r| r.0).collect();
        memories = memories_json(found);
    }
    let package = json!({
        "state": parts.state,
        "slots": parts.slots,
        "summary": parts.summary,
        "tool_events": parts.tools,
        "memories": memories,
    });
    let mut result = context::render(&package, budget);
    // the memories that fit, counted as accessed
    let kept_ids: Vec<&str> = result["memories"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("id")?.as_str())
        .collect();
    let touched: Vec<Uuid> = ids
        .into_iter()
        .filter(|id| kept_ids.contains(&id.to_string().as_str()))
        .collect();
    crate::search::touch_hits(owner, touched);
    if let Value::Object(o) = &mut result {
        o.insert("workspace".into(), parts.workspace.map_or(Value::Null, Value::String));
        o.insert("depth".into(), json!(depth));
    }
    JsonB(result)
}

/// The sections other than the memories, as engram's JSON shows them.
struct Parts {
    workspace: Option<String>,
    state: Value,
    slots: Value,
    summary: Value,
    tools: Value,
}

/// Which of the owner's events the summary and the tool events come from.
#[derive(Clone, Copy)]
enum Events {
    Workspace,
    Session,
    All,
}

impl Events {
    /// The condition on `engram.events e` and the type of its `$2`.
    fn condition(self) -> (&'static str, Option<pg_sys::BuiltinOid>) {
        use pg_sys::BuiltinOid::*;
        match self {
            Events::Workspace => ("e.workspace_id = $2", Some(UUIDOID)),
            Events::Session => ("e.session_id = $2", Some(TEXTOID)),
            Events::All => ("true", None),
        }
    }
}

/// The statements kept for the session (see `crate::kept`); the event
/// statements one per [`Events`], so that each is planned for its index.
#[derive(Default)]
struct Kept {
    named: Option<OwnedPreparedStatement>,
    of_session: Option<OwnedPreparedStatement>,
    /// [latest, named]
    state: [Option<OwnedPreparedStatement>; 2],
    slots: Option<OwnedPreparedStatement>,
    summary: [Option<OwnedPreparedStatement>; 3],
    tools: [Option<OwnedPreparedStatement>; 3],
    memories: Option<OwnedPreparedStatement>,
}

thread_local! {
    static KEPT: RefCell<Kept> = RefCell::new(Kept::default());
}

fn parts(
    client: &mut SpiClient<'_>,
    k: &mut Kept,
    owner: &str,
    session_id: Option<&str>,
    workspace: Option<String>,
) -> Parts {
    use pg_sys::BuiltinOid::*;
    let text = || PgOid::BuiltIn(TEXTOID);
    // The workspace: the one named, else the one of the session's latest
    // event. A name that is not a valid one, or not found, goes through
    // engram._workspace, whose errors say what to do (a workspace created
    // since the lookup is its answer).
    let w: Option<(Uuid, String)> = if let Some(name) = workspace {
        let plan = kept(&mut k.named, client, || {
            (
                "SELECT x.id, x.name FROM engram.workspaces x WHERE x.owner = $1 AND x.name = $2".into(),
                vec![text(), text()],
            )
        });
        match valid_name(&name)
            .then(|| two(client, plan, vec![owner.into(), name.clone().into()]))
            .flatten()
        {
            Some(found) => Some(found),
            None => two(
                client,
                "SELECT w.id, w.name FROM engram._workspace($1, $2, false) w",
                vec![owner.into(), name.into()],
            )
            .or_else(|| error!("engram: engram._workspace returned no workspace")),
        }
    } else if let Some(s) = session_id {
        let plan = kept(&mut k.of_session, client, || {
            (
                "SELECT x.id, x.name FROM engram.events e
                 JOIN engram.workspaces x ON x.owner = e.owner AND x.id = e.workspace_id
                 WHERE e.owner = $1 AND e.session_id = $2 ORDER BY e.created_at DESC LIMIT 1"
                    .into(),
                vec![text(), text()],
            )
        });
        two(client, plan, vec![owner.into(), s.into()])
    } else {
        None
    };
    let state = match &w {
        Some((id, name)) => state_of(client, k, owner, *id, name.clone(), None),
        None => Value::Null,
    };
    let slots = pinned_slots(client, k, owner, w.as_ref().map(|w| w.1.clone()));
    let events = match (&w, session_id) {
        (Some(_), _) => Events::Workspace,
        (None, Some(_)) => Events::Session,
        (None, None) => Events::All,
    };
    let (condition, value_type) = events.condition();
    let args = || {
        let mut a: Vec<DatumWithOid<'static>> = vec![owner.to_string().into()];
        match (&w, session_id) {
            (Some((id, _)), _) => a.push((*id).into()),
            (None, Some(s)) => a.push(s.to_string().into()),
            (None, None) => {}
        }
        a
    };
    let types = || {
        let mut t = vec![text()];
        t.extend(value_type.map(PgOid::BuiltIn));
        t
    };
    let plan = kept(&mut k.summary[events as usize], client, || {
        (
            format!(
                "SELECT jsonb_build_object('id', m.id, 'session_id', e.session_id, 'content', m.content,
                                          'age_s', round(extract(epoch FROM now() - e.created_at)))
                 FROM engram.events e JOIN engram.memories m ON m.owner = e.owner AND m.id = e.memory_id
                 WHERE e.owner = $1 AND e.event_type = 'summary' AND m.status = 'active' AND {condition}
                 ORDER BY e.created_at DESC LIMIT 1"
            ),
            types(),
        )
    });
    let summary = one(client, plan, args());
    let plan = kept(&mut k.tools[events as usize], client, || {
        (
            format!(
                "SELECT coalesce(jsonb_agg(t.j ORDER BY t.at DESC), '[]') FROM (
                     SELECT e.created_at AS at, jsonb_build_object('id', m.id, 'tool_name', e.tool_name,
                         'success', e.success, 'error', left(e.error, 300), 'duration_ms', e.duration_ms,
                         'session_id', e.session_id,
                         'output_summary', left(CASE jsonb_typeof(e.tool_output) WHEN 'string'
                                                THEN e.tool_output #>> '{{}}' ELSE e.tool_output::text END, 200),
                         'content', m.content, 'age_s', round(extract(epoch FROM now() - e.created_at))) AS j
                     FROM engram.events e JOIN engram.memories m ON m.owner = e.owner AND m.id = e.memory_id
                     WHERE e.owner = $1 AND e.event_type = 'tool_invocation' AND m.status = 'active' AND {condition}
                     ORDER BY e.created_at DESC LIMIT 5) t"
            ),
            types(),
        )
    });
    let tools = one(client, plan, args());
    Parts {
        workspace: w.map(|w| w.1),
        state,
        slots,
        summary,
        tools,
    }
}

/// A state of a workspace as JSON: the one named, else the latest not
/// archived; null when there is none.
fn state_of(
    client: &mut SpiClient<'_>,
    k: &mut Kept,
    owner: &str,
    workspace_id: Uuid,
    workspace: String,
    name: Option<String>,
) -> Value {
    use pg_sys::BuiltinOid::*;
    let plan = kept(&mut k.state[usize::from(name.is_some())], client, || {
        let which = match name {
            Some(_) => "s.name = $4",
            None => "s.archived_at IS NULL AND $4::text IS NULL",
        };
        (
            format!(
                "SELECT jsonb_build_object('id', s.id, 'workspace', $3::text, 'name', s.name,
                     'description', s.description, 'conversation_context', s.conversation_context,
                     'active_task', s.active_task, 'active_files', to_jsonb(s.active_files),
                     'next_steps', to_jsonb(s.next_steps), 'tags', to_jsonb(s.tags), 'created_at', s.created_at,
                     'archived', s.archived_at IS NOT NULL, 'age_s', round(extract(epoch FROM now() - s.created_at)))
                 FROM engram.states s WHERE s.owner = $1 AND s.workspace_id = $2 AND {which}
                 ORDER BY s.created_at DESC LIMIT 1"
            ),
            vec![
                PgOid::BuiltIn(TEXTOID),
                PgOid::BuiltIn(UUIDOID),
                PgOid::BuiltIn(TEXTOID),
                PgOid::BuiltIn(TEXTOID),
            ],
        )
    });
    one(
        client,
        plan,
        vec![owner.into(), workspace_id.into(), workspace.into(), name.into()],
    )
}

/// engram._state_of: a state of a workspace as JSON (see [`state_of`]), for
/// engram.state_load. VOLATILE, as every helper that takes an owner and
/// reads it back: the planner never evaluates it.
#[pg_extern]
fn _state_of(
    p_owner: Option<String>,
    p_workspace_id: Option<Uuid>,
    p_workspace: Option<String>,
    p_name: Option<String>,
) -> Option<JsonB> {
    let (owner, id, workspace) = (p_owner?, p_workspace_id?, p_workspace?);
    let state = Spi::connect_mut(|client| KEPT.with_borrow_mut(|k| state_of(client, k, &owner, id, workspace, p_name)));
    (!state.is_null()).then_some(JsonB(state))
}

/// The pinned slots visible in a workspace (its own, and the global ones it
/// does not shadow; '' or NULL for the global ones only), as JSON: the
/// rule of engram._visible_slots (slot_get's and slot_list's), in one
/// statement.
fn pinned_slots(client: &mut SpiClient<'_>, k: &mut Kept, owner: &str, workspace: Option<String>) -> Value {
    use pg_sys::BuiltinOid::*;
    let plan = kept(&mut k.slots, client, || {
        (
            "SELECT coalesce(jsonb_agg(jsonb_build_object('label', v.label, 'workspace', nullif(v.workspace, ''),
                        'content', v.content, 'chars', char_length(v.content), 'size_limit', v.size_limit,
                        'pinned', true, 'age_s', round(extract(epoch FROM now() - v.updated_at)))
                        ORDER BY v.label), '[]')
             FROM (SELECT DISTINCT ON (s.label) s.* FROM engram.slots s
                   WHERE s.owner = $1 AND s.workspace IN (coalesce($2, ''), '')
                   ORDER BY s.label, s.workspace DESC) v
             WHERE v.pinned"
                .into(),
            vec![PgOid::BuiltIn(TEXTOID), PgOid::BuiltIn(TEXTOID)],
        )
    });
    one(client, plan, vec![owner.into(), workspace.into()])
}

/// engram._pinned_slots: the pinned slots of `p_workspace` for
/// engram.workspace_load, by the statement engram.context runs. VOLATILE,
/// as [`_state_of`].
#[pg_extern]
fn _pinned_slots(p_owner: Option<String>, p_workspace: Option<String>) -> JsonB {
    let Some(owner) = p_owner else {
        return JsonB(json!([]));
    };
    JsonB(Spi::connect_mut(|client| {
        KEPT.with_borrow_mut(|k| pinned_slots(client, k, &owner, p_workspace))
    }))
}

/// The memories' section: each hit's id, kind, content, score (to 4
/// places) and age, written by Postgres as the rest of the package is.
fn memories_json(found: Vec<crate::search::HitRow>) -> Value {
    use pg_sys::BuiltinOid::*;
    let (mut ids, mut kinds, mut contents, mut scores, mut created) = (vec![], vec![], vec![], vec![], vec![]);
    for r in found {
        ids.push(r.0);
        kinds.push(r.2);
        contents.push(r.1);
        scores.push(r.6);
        created.push(r.9);
    }
    Spi::connect_mut(|client| {
        KEPT.with_borrow_mut(|k| {
            let plan = kept(&mut k.memories, client, || {
                (
                    "SELECT coalesce(jsonb_agg(jsonb_build_object('id', h.id, 'kind', h.kind, 'content', h.content,
                                'score', round(h.score::numeric, 4),
                                'age_s', round(extract(epoch FROM now() - h.created_at))) ORDER BY h.n), '[]')
                     FROM unnest($1::uuid[], $2::text[], $3::text[], $4::real[], $5::timestamptz[])
                          WITH ORDINALITY AS h(id, kind, content, score, created_at, n)"
                        .into(),
                    vec![
                        PgOid::BuiltIn(UUIDARRAYOID),
                        PgOid::BuiltIn(TEXTARRAYOID),
                        PgOid::BuiltIn(TEXTARRAYOID),
                        PgOid::BuiltIn(FLOAT4ARRAYOID),
                        PgOid::BuiltIn(TIMESTAMPTZARRAYOID),
                    ],
                )
            });
            one(
                client,
                plan,
                vec![ids.into(), kinds.into(), contents.into(), scores.into(), created.into()],
            )
        })
    })
}

/// A kept statement's one jsonb value; null when it returns no row.
fn one(client: &SpiClient<'_>, plan: &OwnedPreparedStatement, args: Vec<DatumWithOid<'_>>) -> Value {
    client
        .select(plan, Some(1), &args)
        .and_then(|t| {
            if t.is_empty() {
                Ok(None)
            } else {
                t.first().get_one::<JsonB>()
            }
        })
        .unwrap_or_else(|e| error!("engram: reading the context package failed: {e}"))
        .map_or(Value::Null, |j| j.0)
}

/// A statement's first row's id and name, if it returns one.
fn two<'conn>(
    client: &SpiClient<'conn>,
    query: impl pgrx::spi::Query<'conn>,
    args: Vec<DatumWithOid<'_>>,
) -> Option<(Uuid, String)> {
    let table = client
        .select(query, Some(1), &args)
        .unwrap_or_else(|e| error!("engram: reading the context's workspace failed: {e}"));
    if table.is_empty() {
        return None;
    }
    let (id, name) = table
        .first()
        .get_two::<Uuid, String>()
        .unwrap_or_else(|e| error!("engram: reading the context's workspace failed: {e}"));
    id.zip(name)
}

/// A budget in characters; refuses NULL or one out of range (22023),
/// before any data is read.
fn budget(budget_chars: Option<i64>) -> usize {
    let budget = budget_chars
        .ok_or_else(|| {
            Error::new(
                Sqlstate::NullValueNotAllowed,
                "budget_chars is NULL",
                format!(
                    "pass {} to {} characters, e.g. budget_chars => 4000",
                    context::MIN_BUDGET,
                    context::MAX_BUDGET
                ),
            )
        })
        .or_raise();
    context::check_budget(budget).or_raise()
}

// The helpers of 0.22.0's plpgsql engram.context: not in SQL since 0.23.0,
// but the install scripts of the releases before create them from this
// library.

/// The package with only what fits in `budget_chars`, plus its `text`.
#[pg_extern(immutable, parallel_safe, strict, sql = false)]
fn _render_context(package: JsonB, budget_chars: i64) -> JsonB {
    let budget = context::check_budget(budget_chars).or_raise();
    JsonB(context::render(&package.0, budget))
}

/// Refuses a budget out of range (22023), before any data is read.
#[pg_extern(immutable, parallel_safe, sql = false)]
fn _check_budget(budget_chars: Option<i64>) {
    budget(budget_chars);
}
