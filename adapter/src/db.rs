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
    set_role: String,
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

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

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
            set_role: format!("SET LOCAL ROLE {}", quote_ident(role)),
        })
    }

    /// (size, available) of the pool, for /metrics.
    pub fn pool_status(&self) -> (usize, usize) {
        let s = self.pool.status();
        (s.size, s.available)
    }

    /// Runs `sql` as the restricted role with engram.owner = `owner`, in one transaction.
    pub async fn call(&self, owner: &str, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        tx.batch_execute(&self.set_role).await?;
        tx.execute("SELECT set_config('engram.owner', $1, true)", &[&owner])
            .await?;
        let rows = tx.query(sql, params).await?;
        tx.commit().await?;
        Ok(rows)
    }

    async fn restricted(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        tx.batch_execute(&self.set_role).await?;
        let rows = tx.query(sql, params).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// The owner and platform flag of a token, if it is valid.
    pub async fn authenticate(&self, token: &str) -> Result<Option<(String, bool)>, DbError> {
        let rows = self
            .restricted("SELECT owner, platform FROM engram.authenticate($1)", &[&token])
            .await?;
        Ok(rows.first().map(|r| (r.get(0), r.get(1))))
    }

    pub async fn has_tokens(&self) -> Result<bool, DbError> {
        Ok(self.restricted("SELECT engram.has_tokens()", &[]).await?[0].get(0))
    }

    /// The embedding dimension the database stores.
    pub async fn dims(&self) -> Result<i32, DbError> {
        Ok(self.restricted("SELECT engram._dims()", &[]).await?[0].get(0))
    }

    pub async fn ping(&self) -> Result<(), DbError> {
        let client = self.pool.get().await?;
        client.simple_query("SELECT 1").await?;
        Ok(())
    }
}
