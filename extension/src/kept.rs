//! SPI plans prepared once per session and kept (`SPI_keepplan`): the
//! statements on engram's hot paths skip parsing and planning on every call.
//! Postgres re-plans a kept plan itself when a table or function it uses
//! changes.

use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient};
use pgrx::PgOid;

/// The plan in `slot`; if the slot is empty, first prepared from the
/// statement and parameter types that `statement` gives (built only then).
pub(crate) fn kept<'a>(
    slot: &'a mut Option<OwnedPreparedStatement>,
    client: &SpiClient<'_>,
    statement: impl FnOnce() -> (String, Vec<PgOid>),
) -> &'a OwnedPreparedStatement {
    slot.get_or_insert_with(|| {
        let (sql, types) = statement();
        client
            .prepare(sql.as_str(), &types)
            .unwrap_or_else(|e| error!("engram: preparing a kept statement failed: {e}"))
            .keep()
    })
}
