-- engram 0.20.0 -> 0.21.0 (ALTER EXTENSION engram UPDATE TO '0.21.0')
--
-- 0.21.0: the k-nearest search of a scope runs in Rust.
--   * engram._knn: the plan choice (scope list, exact scan, HNSW walk) of
--     engram-core search_plan and its statements as plans prepared once
--     per session; its arguments are the read scope's fields (it took an
--     engram.read_scope, a type the API owns);
--   * engram._scope_filter: the scope's WHERE clause, kept in Rust beside
--     the statements that paste it;
--   * engram._owner, engram._check_context and engram._caller (who a call
--     acts for) in Rust, reading the binding parsed once per value;
--   * the plpgsql plans (_list_rerank, _hnsw_walk, _hnsw_walk_shared and
--     their texts) are gone with the previous API.
--
-- No table changes. Built as sql/README.md says; _install_api drops the
-- previous API and loads this one from the library.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.21.0'" to load this file. \quit

-- (the previous API's, plpgsql; in a chain of hops it may never have loaded)
DROP FUNCTION IF EXISTS engram._scope_filter(boolean);
DROP FUNCTION IF EXISTS engram._owner(text);
DROP FUNCTION IF EXISTS engram._check_context(text, text[], boolean);
DROP FUNCTION IF EXISTS engram._caller(text, text, text[], boolean);

CREATE FUNCTION engram."_knn"(
	"p_query" vector, /* Option < RawVector > */
	"p_n" INT, /* i32 */
	"owner" TEXT, /* Option < String > */
	"statuses" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"internal_type" TEXT, /* Option < String > */
	"kinds" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"tags_all" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"tags_any" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"session_id" TEXT, /* Option < String > */
	"created_after" timestamp with time zone, /* Option < TimestampWithTimeZone > */
	"created_before" timestamp with time zone, /* Option < TimestampWithTimeZone > */
	"max_level" smallint, /* Option < i16 > */
	"space" TEXT, /* Option < String > */
	"group_id" TEXT, /* Option < String > */
	"valid_at" timestamp with time zone, /* Option < TimestampWithTimeZone > */
	"namespace_prefix" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"filter" jsonb /* Option < RawJsonb > */
) RETURNS TABLE (
	"id" uuid,  /* Uuid */
	"distance" double precision  /* f64 */
)
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_knn_wrapper';
CREATE FUNCTION engram."_owner"(
	"p_owner" TEXT /* Option < String > */
) RETURNS TEXT /* String */
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_owner_wrapper';
CREATE FUNCTION engram."_check_context"(
	"p_internal_type" TEXT, /* Option < String > */
	"p_scope" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"p_write" bool /* Option < bool > */
) RETURNS void
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_check_context_wrapper';
CREATE FUNCTION engram."_caller"(
	"p_owner" TEXT, /* Option < String > */
	"p_internal_type" TEXT, /* Option < String > */
	"p_scope" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"p_write" bool /* Option < bool > */
) RETURNS TEXT /* String */
VOLATILE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_caller_wrapper';
CREATE FUNCTION engram."_scope_filter"(
	"p_owned" bool DEFAULT true /* bool */
) RETURNS TEXT /* String */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_scope_filter_wrapper';

UPDATE engram.configuration SET version = '0.21.0';

SELECT engram._install_api('0.21.0');
