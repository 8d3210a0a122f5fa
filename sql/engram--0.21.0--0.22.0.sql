-- engram 0.21.0 -> 0.22.0 (ALTER EXTENSION engram UPDATE TO '0.22.0')
--
-- 0.22.0: a search runs in Rust from its candidates to its hits.
--   * engram._search_hits: the legs, the candidates' rows, engram-core's
--     ranking, and for engram.search the newer-fact ordering, grouping by
--     conversation, access counts, renewed lifetimes and the miss record,
--     as plans prepared once per session; its arguments are the read
--     scope's fields and its result names its columns (no type the API
--     owns);
--   * engram._text_index_read: the text leg's bounded read of the text
--     index (rounds of MaxScore over the postings) in Rust, on kept plans;
--     _lexical_indexed (plpgsql) keeps only the scoring of every match;
--   * engram.search is Rust: it calls _search_hits's steps in the same
--     process (no plpgsql frame); engram._search (ghost_search) wraps
--     _search_hits and engram.context reads it; the plpgsql _newer_first
--     and _by_session are gone with the previous API.
--
-- No table changes. Built as sql/README.md says; _install_api drops the
-- previous API and loads this one from the library.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.22.0'" to load this file. \quit

CREATE FUNCTION engram."_search_hits"(
	"owner" TEXT, /* Option < String > */
	"statuses" TEXT[], /* Option < Texts > */
	"internal_type" TEXT, /* Option < String > */
	"kinds" TEXT[], /* Option < Texts > */
	"tags_all" TEXT[], /* Option < Texts > */
	"tags_any" TEXT[], /* Option < Texts > */
	"session_id" TEXT, /* Option < String > */
	"created_after" timestamp with time zone, /* Option < Tstz > */
	"created_before" timestamp with time zone, /* Option < Tstz > */
	"max_level" smallint, /* Option < i16 > */
	"space" TEXT, /* Option < String > */
	"group_id" TEXT, /* Option < String > */
	"valid_at" timestamp with time zone, /* Option < Tstz > */
	"namespace_prefix" TEXT[], /* Option < Texts > */
	"filter" jsonb, /* Option < RawJsonb > */
	"p_embedding" vector, /* Option < RawVector > */
	"p_text" TEXT, /* Option < String > */
	"p_k" INT, /* Option < i32 > */
	"p_min_similarity" real, /* Option < f32 > */
	"p_window" tstzrange, /* Option < Range < Tstz > > */
	"p_indexed" bool, /* Option < bool > */
	"p_known_at" timestamp with time zone, /* Option < Tstz > */
	"p_ids" uuid[], /* :: std :: option :: Option < Vec < Option < Uuid > > > */
	"p_finish" bool, /* Option < bool > */
	"p_search_k" INT, /* Option < i32 > */
	"p_group_sessions" bool, /* Option < bool > */
	"p_refresh_ttl" bool /* Option < bool > */
) RETURNS TABLE (
	"id" uuid,  /* Uuid */
	"content" TEXT,  /* Option < String > */
	"kind" TEXT,  /* Option < String > */
	"tags" TEXT[],  /* Option < Texts > */
	"metadata" jsonb,  /* Option < RawJsonb > */
	"similarity" real,  /* Option < f32 > */
	"score" real,  /* f32 */
	"trust_score" real,  /* Option < f32 > */
	"staleness_score" real,  /* Option < f32 > */
	"created_at" timestamp with time zone,  /* Option < Tstz > */
	"source" TEXT,  /* Option < String > */
	"occurred_at" timestamp with time zone,  /* Option < Tstz > */
	"valid_from" timestamp with time zone,  /* Option < Tstz > */
	"valid_to" timestamp with time zone,  /* Option < Tstz > */
	"namespace" TEXT[],  /* Option < Texts > */
	"key" TEXT,  /* Option < String > */
	"value" jsonb,  /* Option < RawJsonb > */
	"session" TEXT  /* Option < String > */
)
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_search_hits_wrapper';

CREATE FUNCTION engram."_text_index_read"(
	"owner" TEXT, /* Option < String > */
	"statuses" TEXT[], /* Option < Texts > */
	"internal_type" TEXT, /* Option < String > */
	"kinds" TEXT[], /* Option < Texts > */
	"tags_all" TEXT[], /* Option < Texts > */
	"tags_any" TEXT[], /* Option < Texts > */
	"session_id" TEXT, /* Option < String > */
	"created_after" timestamp with time zone, /* Option < Tstz > */
	"created_before" timestamp with time zone, /* Option < Tstz > */
	"max_level" smallint, /* Option < i16 > */
	"space" TEXT, /* Option < String > */
	"group_id" TEXT, /* Option < String > */
	"valid_at" timestamp with time zone, /* Option < Tstz > */
	"namespace_prefix" TEXT[], /* Option < Texts > */
	"filter" jsonb, /* Option < RawJsonb > */
	"p_text" TEXT, /* Option < String > */
	"p_n" INT /* Option < i32 > */
) RETURNS TABLE (
	"id" uuid,  /* Uuid */
	"rank" real  /* f32 */
)
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_text_index_read_wrapper';

-- engram.search is Rust (who the call acts for, the argument checks, the
-- time window and the hits in one call). The plpgsql function goes first;
-- the API load below drops only plpgsql and SQL functions, and pins the
-- new one's search_path and row estimate as a fresh install does.
DROP FUNCTION IF EXISTS engram.search(text, vector, text, integer, text[], text[], text[], text, text[], text, timestamptz,
                            timestamptz, real, boolean, timestamptz, timestamptz, timestamptz, text, text[], jsonb,
                            boolean, text);
CREATE FUNCTION engram."search"(
	"owner" TEXT DEFAULT NULL, /* Option < String > */
	"query_embedding" vector DEFAULT NULL, /* Option < RawVector > */
	"query_text" TEXT DEFAULT NULL, /* Option < String > */
	"k" INT DEFAULT 10, /* Option < i32 > */
	"kinds" text[] DEFAULT NULL, /* Option < RawTexts > */
	"tags_all" text[] DEFAULT NULL, /* Option < RawTexts > */
	"tags_any" text[] DEFAULT NULL, /* Option < RawTexts > */
	"internal_type" TEXT DEFAULT NULL, /* Option < String > */
	"scope_tags" text[] DEFAULT NULL, /* Option < RawTexts > */
	"session_id" TEXT DEFAULT NULL, /* Option < String > */
	"created_after" timestamp with time zone DEFAULT NULL, /* Option < Tstz > */
	"created_before" timestamp with time zone DEFAULT NULL, /* Option < Tstz > */
	"min_similarity" real DEFAULT NULL, /* Option < f32 > */
	"include_archived" bool DEFAULT false, /* Option < bool > */
	"valid_at" timestamp with time zone DEFAULT NULL, /* Option < Tstz > */
	"known_at" timestamp with time zone DEFAULT NULL, /* Option < Tstz > */
	"reference_time" timestamp with time zone DEFAULT NULL, /* Option < Tstz > */
	"entity" TEXT DEFAULT NULL, /* Option < String > */
	"namespace_prefix" text[] DEFAULT NULL, /* Option < RawTexts > */
	"filter" jsonb DEFAULT NULL, /* Option < RawJsonb > */
	"refresh_ttl" bool DEFAULT false, /* Option < bool > */
	"group_by" TEXT DEFAULT NULL /* Option < String > */
) RETURNS TABLE (
	"id" uuid,  /* Uuid */
	"content" TEXT,  /* Option < String > */
	"kind" TEXT,  /* Option < String > */
	"tags" TEXT[],  /* Option < Texts > */
	"metadata" jsonb,  /* Option < RawJsonb > */
	"similarity" real,  /* Option < f32 > */
	"score" real,  /* f32 */
	"trust_score" real,  /* Option < f32 > */
	"staleness_score" real,  /* Option < f32 > */
	"created_at" timestamp with time zone,  /* Option < Tstz > */
	"source" TEXT,  /* Option < String > */
	"occurred_at" timestamp with time zone,  /* Option < Tstz > */
	"valid_from" timestamp with time zone,  /* Option < Tstz > */
	"valid_to" timestamp with time zone,  /* Option < Tstz > */
	"time_window" tstzrange,  /* Option < Range < Tstz > > */
	"namespace" TEXT[],  /* Option < Texts > */
	"key" TEXT,  /* Option < String > */
	"value" jsonb,  /* Option < RawJsonb > */
	"session" TEXT  /* Option < String > */
)
SECURITY DEFINER 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'search_wrapper';

UPDATE engram.configuration SET version = '0.22.0';

SELECT engram._install_api('0.22.0');
