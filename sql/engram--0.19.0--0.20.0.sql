-- engram 0.19.0 -> 0.20.0 (ALTER EXTENSION engram UPDATE TO '0.20.0')
--
-- 0.20.0: a text leg whose cost does not grow with the store.
--   * the text index: engram.text_postings (a posting per distinct lexeme
--     of each active memory, ordered by the memory's length),
--     engram.text_terms (document frequencies), engram.text_sizes
--     (memories and total length per owner and internal type), kept by
--     triggers on engram.memories and built here from the stored memories;
--   * three Rust functions (_term_weights, _text_rank, _text_reads);
--   * the API: the text leg of search reads the text index (bounded) for
--     callers who see every memory of the owner's internal type.
--
-- Built as sql/README.md says; _install_api drops the previous API and
-- loads this one from the library.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.20.0'" to load this file. \quit

CREATE TABLE engram.text_postings (
    owner     text NOT NULL,
    list      bigint NOT NULL,
    lexeme    text NOT NULL,
    len       integer NOT NULL,
    memory_id uuid NOT NULL,
    PRIMARY KEY (owner, list, lexeme, len, memory_id)
);
CREATE TABLE engram.text_terms (
    owner  text NOT NULL,
    list   bigint NOT NULL,
    lexeme text NOT NULL,
    df     bigint NOT NULL,
    PRIMARY KEY (owner, list, lexeme)
);
CREATE TABLE engram.text_sizes (
    owner     text NOT NULL,
    list      bigint NOT NULL,
    docs      bigint NOT NULL,
    total_len bigint NOT NULL,
    PRIMARY KEY (owner, list)
);
ALTER TABLE engram.text_postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.text_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE engram.text_sizes ENABLE ROW LEVEL SECURITY;
UPDATE engram.configuration SET version = '0.20.0';

CREATE FUNCTION engram."_term_weights"(
	"docs" bigint, /* Option < i64 > */
	"dfs" bigint[] /* :: std :: option :: Option < Vec < Option < i64 > > > */
) RETURNS double precision[] /* Vec < f64 > */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_term_weights_wrapper';
CREATE FUNCTION engram."_text_reads"(
	"weights" double precision[], /* :: std :: option :: Option < Vec < Option < f64 > > > */
	"dfs" double precision[], /* :: std :: option :: Option < Vec < Option < f64 > > > */
	"frontiers" double precision[], /* :: std :: option :: Option < Vec < Option < f64 > > > */
	"exact" bool[], /* :: std :: option :: Option < Vec < Option < bool > > > */
	"theta" real, /* Option < f32 > */
	"first" bool, /* Option < bool > */
	"wanted" INT, /* Option < i32 > */
	"mean" double precision /* Option < f64 > */
) RETURNS bool[] /* Vec < bool > */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_text_reads_wrapper';
CREATE FUNCTION engram."_text_rank"(
	"masks" bigint[], /* :: std :: option :: Option < Vec < Option < i64 > > > */
	"lens" double precision[], /* :: std :: option :: Option < Vec < Option < f64 > > > */
	"exact" bool[], /* :: std :: option :: Option < Vec < Option < bool > > > */
	"weights" double precision[], /* :: std :: option :: Option < Vec < Option < f64 > > > */
	"mean" double precision /* Option < f64 > */
) RETURNS real[] /* Vec < f32 > */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_text_rank_wrapper';

CREATE FUNCTION engram."_best_hits"(
	"ids" uuid[], /* :: std :: option :: Option < Vec < Option < pgrx :: Uuid > > > */
	"sims" double precision[], /* :: std :: option :: Option < Vec < Option < f64 > > > */
	"texts" real[], /* :: std :: option :: Option < Vec < Option < f32 > > > */
	"in_window" bool[], /* :: std :: option :: Option < Vec < Option < bool > > > */
	"trusts" real[], /* :: std :: option :: Option < Vec < Option < f32 > > > */
	"stales" real[], /* :: std :: option :: Option < Vec < Option < f32 > > > */
	"has_text" bool, /* bool */
	"has_embedding" bool, /* bool */
	"min_similarity" real, /* Option < f32 > */
	"staleness_weight" real, /* f32 */
	"k" INT /* i32 */
) RETURNS TABLE (
	"pos" INT,  /* i32 */
	"score" real  /* f32 */
)
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_best_hits_wrapper';

CREATE FUNCTION engram."_limit"(
	"name" TEXT /* & str */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_limit_wrapper';

-- Gone: the rank fusion of 0.13.0 and earlier (this library answers those
-- names with what to run), and the per-row helpers that engram-core's
-- ranking replaced in one call a search.
DROP FUNCTION engram._fused_relevance(bigint, bigint);
DROP FUNCTION engram._weighted_fusion(bigint, bigint, boolean);
DROP FUNCTION engram._text_relevance(real);
DROP FUNCTION engram._hybrid_relevance(real, real);
DROP FUNCTION engram._window_boosted(real, boolean);

SELECT engram._install_api('0.20.0');

-- The text index of every owner, from the stored memories (one statement
-- per owner and table; on Citus the new tables are distributed by
-- engram.distribute(), then engram.rebuild_lists() builds it:
-- docs/SCALING.md). A chain of hops that passed 0.19.0 without loading its
-- API also runs 0.19.0's entity pass here (the 0.19.0 hop said so). Since
-- 0.21.0 this hop is never a chain's last: the setting below hands both to
-- the last hop's _install_api.
DO $build$
DECLARE
    v_owner text;
BEGIN
    IF to_regprocedure('engram._rebuild_text_index(text)') IS NULL THEN
        -- an intermediate hop: the chain's last hop builds it (engram's
        -- _install_api, after the API, when this transaction-local
        -- setting says so)
        PERFORM pg_catalog.set_config('engram_upgrade.text_index', 'true', true);
        RETURN;
    END IF;
    IF NOT engram._is_distributed() THEN
        FOR v_owner IN SELECT DISTINCT m.owner FROM engram.memories m ORDER BY 1 LOOP
            PERFORM engram._rebuild_text_index(v_owner);
        END LOOP;
    END IF;
    IF coalesce(current_setting('engram_upgrade.reindex_entities', true), '') = 'true' THEN
        PERFORM engram._reindex_entities();
    END IF;
END
$build$;
