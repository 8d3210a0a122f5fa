-- engram 0.13.0 -> 0.14.0 (ALTER EXTENSION engram UPDATE TO '0.14.0')
--
-- 0.14.0 ranks by how well a memory matches, not by rank alone:
-- the text leg of search scores rows by the share of the query's IDF they
-- hold times BM25's length factor (engram-core text_scores; it used
-- ts_rank_cd, which weighs every word alike and favours long rows), and a
-- hybrid query's relevance is the mean of cosine similarity and that
-- score (engram-core hybrid_relevance; it was reciprocal rank fusion, in
-- which ranks 1 and 2 differed by 1.6%, so that small trust gaps
-- reordered them). A correction by the owner no longer lowers a memory's
-- trust: the corrected memories' trust is computed anew below.
--
-- No table changes. Built as sql/README.md says: 2. new Rust functions;
-- 3. _install_api drops the previous API and loads this one from the
-- library; then the corrected memories' trust.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.14.0'" to load this file. \quit

-- 2. Rust functions new in 0.14.0.
CREATE FUNCTION engram."_hybrid_relevance"(
	"similarity" real, /* Option < f32 > */
	"text" real /* Option < f32 > */
) RETURNS real /* f32 */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_hybrid_relevance_wrapper';
CREATE FUNCTION engram."_max_query_terms"() RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_max_query_terms_wrapper';
CREATE FUNCTION engram."_term_mask"(
	"send" bytea, /* & [u8] */
	"terms" TEXT[] /* alloc::vec::Vec<core::option::Option<alloc::string::String>> */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_term_mask_wrapper';
CREATE FUNCTION engram."_text_scores"(
	"masks" bigint[], /* :: std :: option :: Option < Vec < Option < i64 > > > */
	"lens" double precision[], /* :: std :: option :: Option < Vec < Option < f64 > > > */
	"exact" bool[], /* :: std :: option :: Option < Vec < Option < bool > > > */
	"terms" INT /* Option < i32 > */
) RETURNS real[] /* Vec < f32 > */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_text_scores_wrapper';

-- 3. The 0.14.0 API, from the library (only when it is 0.14.0), in place of
-- the loaded 0.13.0 one.
SELECT engram._install_api('0.14.0');

-- Memories corrected by their owner get back the trust of one never
-- corrected: their author, age and flags only, as 0.14.0's
-- engram._trust_at computes it. The Rust trust_score, not the API helper,
-- so that this step also runs in a chain of hops that ends at a later
-- version (whose _install_api does not load this API). Values, not
-- calls, for the time and the setting: on Citus the UPDATE runs on the
-- shards. Archived and expired memories too (include_archived reads them).
DO $upgrade$
DECLARE
    v_now  timestamptz := now();
    v_half float8 := engram._setting_trust_half_life_days();
BEGIN
    UPDATE engram.memories AS m
    SET trust_score = engram.trust_score(m.author_type, extract(epoch FROM v_now - m.created_at)::float8 / 86400,
                                         0, m.flag_count > 0, v_half)
    WHERE m.correction_count > 0;
END
$upgrade$;
