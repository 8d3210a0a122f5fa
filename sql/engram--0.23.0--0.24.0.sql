-- engram 0.23.0 -> 0.24.0 (ALTER EXTENSION engram UPDATE TO '0.24.0')
--
-- 0.24.0: remember's conflict check in one Rust call.
--   * engram._conflicts (Rust) finds the five nearest memories a new one
--     is compared with, reads their contents on a plan kept for the
--     session and applies engram-core's conflict rules; remember calls it
--     in place of _knn, the plpgsql _rows and one _conflict_reasons call
--     per neighbour (two, as the statement was planned);
--   * _rows, which only remember still called, is gone with the previous
--     API;
--   * _state_of and _pinned_slots are VOLATILE, as every helper that
--     takes an owner and reads it back: the planner never evaluates them.
--
-- No table changes. Built as sql/README.md says; _install_api drops the
-- previous API and loads this one from the library.

\echo Use "ALTER EXTENSION engram UPDATE TO '0.24.0'" to load this file. \quit

CREATE FUNCTION engram."_conflicts"(
	"p_owner" TEXT, /* String */
	"p_content" TEXT, /* String */
	"p_embedding" vector, /* Option < crate :: raw :: RawVector > */
	"p_internal_type" TEXT, /* Option < String > */
	"p_scope" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"p_valid_at" timestamp with time zone, /* Option < pgrx :: datum :: TimestampWithTimeZone > */
	"p_threshold" real /* f32 */
) RETURNS TABLE (
	"id" uuid,  /* pgrx :: datum :: Uuid */
	"content" TEXT,  /* String */
	"similarity" real,  /* f32 */
	"reasons" TEXT[]  /* Vec < String > */
)
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_conflicts_wrapper';

ALTER FUNCTION engram._state_of(text, uuid, text, text) VOLATILE;
ALTER FUNCTION engram._pinned_slots(text, text) VOLATILE;

UPDATE engram.configuration SET version = '0.24.0';

SELECT engram._install_api('0.24.0');
