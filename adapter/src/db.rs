//! Database access. Every tool call is one transaction that switches to the
//! restricted role and binds engram.owner before it runs its one engram SQL
//! function, so row-level security, not adapter code, confines it to the
//! caller's owner.

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

#[derive(Clone)]
pub struct Db {
    pool: Pool,
    /// The restricted role every tool call runs as.
    role: String,
}

/// A failed database call: the SQLSTATE (when Postgres raised it) and message.
#[derive(Debug)]
pub struct DbError {
    pub code: Option<String>,
    pub message: String,
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} (SQLSTATE {code})", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => DbError {
                code: Some(db.code().code().to_string()),
                message: db.message().to_string(),
            },
            None => DbError {
                code: None,
                message: e.to_string(),
            },
        }
    }
}

impl From<deadpool_postgres::PoolError> for DbError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        DbError {
            code: None,
            message: format!("database unavailable: {e}"),
        }
    }
}

/// Switches to the restricted role and binds the owner, both transaction-local.
/// `set_config('role', ..)` is `SET LOCAL ROLE` with the name as a bound value.
const BIND_CALLER: &str = "SELECT set_config('role', $1, true), set_config('engram.owner', $2, true)";
/// The role switch alone, for the token and catalogue functions (no owner).
const BIND_ROLE: &str = "SELECT set_config('role', $1, true)";

impl Db {
    pub fn connect(url: &str, role: &str, max_size: usize) -> anyhow::Result<Db> {
        let config: tokio_postgres::Config = url.parse()?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager).max_size(max_size).build()?;
        Ok(Db {
            pool,
            role: role.to_string(),
        })
    }

    /// (size, available) of the pool, for /metrics.
    pub fn pool_status(&self) -> (usize, usize) {
        let s = self.pool.status();
        (s.size, s.available)
    }

    /// Runs `sql` as the restricted role with engram.owner = `owner`, in one transaction.
    pub async fn call(&self, owner: &str, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        self.pipelined(BIND_CALLER, &[&self.role, &owner], sql, params).await
    }

    /// Runs `sql` as the restricted role without an owner: the token and
    /// catalogue functions below, which read no memories.
    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        self.pipelined(BIND_ROLE, &[&self.role], sql, params).await
    }

    /// One round trip: BEGIN, the binding, the statement and COMMIT are
    /// pipelined. tokio-postgres queues each request when its future is first
    /// polled, so `join!` sends all four, in order, before awaiting any answer.
    /// If the binding or the statement fails, Postgres skips the rest of the
    /// transaction and COMMIT rolls it back; rows are returned only when the
    /// COMMIT succeeded, so an acknowledged write is a committed one. Should
    /// the request be cancelled mid-way, the queued COMMIT still ends the
    /// transaction before the connection serves anyone else.
    /// Statements are prepared once per connection.
    async fn pipelined(
        &self,
        bind_sql: &str,
        bind_params: &[&(dyn ToSql + Sync)],
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, DbError> {
        let client = self.pool.get().await?;
        let bind = client.prepare_cached(bind_sql).await?;
        let stmt = client.prepare_cached(sql).await?;
        let (begun, bound, rows, committed) = tokio::join!(
            client.batch_execute("BEGIN"),
            client.query(&bind, bind_params),
            client.query(&stmt, params),
            client.batch_execute("COMMIT"),
        );
        // The first error is the cause; later ones only report an aborted transaction.
        begun?;
        bound?;
        let rows = rows?;
        committed?;
        Ok(rows)
    }

    /// The owner and platform flag of a token, if it is valid.
    pub async fn authenticate(&self, token: &str) -> Result<Option<(String, bool)>, DbError> {
        let rows = self
            .query("SELECT owner, platform FROM engram.authenticate($1)", &[&token])
            .await?;
        Ok(rows.first().map(|r| (r.get(0), r.get(1))))
    }

    pub async fn has_tokens(&self) -> Result<bool, DbError> {
        Ok(self.query("SELECT engram.has_tokens()", &[]).await?[0].get(0))
    }

    /// The embedding dimension the database stores.
    pub async fn dims(&self) -> Result<i32, DbError> {
        Ok(self.query("SELECT engram._dims()", &[]).await?[0].get(0))
    }

    pub async fn ping(&self) -> Result<(), DbError> {
        let client = self.pool.get().await?;
        client.simple_query("SELECT 1").await?;
        Ok(())
    }
}
