-- engram 0.22.0 -> 0.23.0 (ALTER EXTENSION engram UPDATE TO '0.23.0')
--
-- 0.23.0: the context package is one Rust call.
--   * engram.context is Rust: who the call acts for, the checks, the
--     workspace, its latest state, the pinned slots, the latest summary and
--     tool events on plans kept for the session, the memories by
--     _search_hits's steps in the same process, engram-core's rendering,
--     and the access counts;
--   * engram._pinned_slots (workspace_load's) and engram._state_of
--     (state_load's; the SQL _state_json goes with the previous API) run
--     context's statements;
--   * engram.time_window is Rust: the window search and context read;
--   * _render_context, _check_budget and _time_window_bounds, which only
--     the plpgsql functions called, are gone.
--
-- No table changes. Built as sql/README.md says; _install_api drops the
-- previous API and loads this one from the library.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.23.0'" to load this file. \quit

-- The plpgsql and SQL functions go first (the API load below drops only
-- those, and would not replace a function of another language), then the
-- helpers no function calls any more.
DROP FUNCTION IF EXISTS engram.context(text, vector, text, text, text, text, text, integer);
DROP FUNCTION IF EXISTS engram.time_window(text, timestamptz);
DROP FUNCTION IF EXISTS engram._pinned_slots(text, text);
DROP FUNCTION IF EXISTS engram._render_context(jsonb, bigint);
DROP FUNCTION IF EXISTS engram._check_budget(bigint);
DROP FUNCTION IF EXISTS engram._time_window_bounds(text, double precision, integer);

CREATE FUNCTION engram."context"(
	"owner" TEXT DEFAULT NULL, /* Option < String > */
	"query_embedding" vector DEFAULT NULL, /* Option < RawVector > */
	"query_text" TEXT DEFAULT NULL, /* Option < String > */
	"session_id" TEXT DEFAULT NULL, /* Option < String > */
	"workspace" TEXT DEFAULT NULL, /* Option < String > */
	"mode" TEXT DEFAULT 'dual', /* Option < String > */
	"role" TEXT DEFAULT 'owner', /* Option < String > */
	"budget_chars" INT DEFAULT 4000 /* Option < i32 > */
) RETURNS jsonb /* JsonB */
SECURITY DEFINER
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'context_wrapper';

CREATE FUNCTION engram."time_window"(
	"query_text" TEXT, /* Option < & str > */
	"reference_time" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
) RETURNS tstzrange /* Option < Range < TimestampWithTimeZone > > */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'time_window_wrapper';

CREATE FUNCTION engram."_pinned_slots"(
	"p_owner" TEXT, /* Option < String > */
	"p_workspace" TEXT /* Option < String > */
) RETURNS jsonb /* JsonB */
STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_pinned_slots_wrapper';

CREATE FUNCTION engram."_state_of"(
	"p_owner" TEXT, /* Option < String > */
	"p_workspace_id" uuid, /* Option < Uuid > */
	"p_workspace" TEXT, /* Option < String > */
	"p_name" TEXT /* Option < String > */
) RETURNS jsonb /* Option < JsonB > */
STABLE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_state_of_wrapper';

UPDATE engram.configuration SET version = '0.23.0';

SELECT engram._install_api('0.23.0');
