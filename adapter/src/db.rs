//! Database access. engram-mcp logs in as a role that is a member of
//! engram_agent only (never a superuser: it checks at start). Every tool call
//! is one transaction that binds with the caller's own token
//! (engram.bind(token, act_as, internal context)) before it runs its one
//! engram SQL function, so the database, not adapter code, decides which
//! owner and scope the call may touch.

use crate::caller::Caller;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime, Timeouts};
use std::time::Duration;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

#[derive(Clone)]
pub struct Db {
    pool: Pool,
    /// A hot standby's pool (--read-database-url) for the calls of
    /// read-only tools; None sends everything to `pool`.
    read: Option<Pool>,
}

tokio::task_local! {
    /// Set while a read-only tool runs (see [`reading`]).
    static READ_ONLY: bool;
}

/// Runs a read-only tool's body: its database calls may go to the read
/// replica. A standby answers them with the same rows, row-level security
/// and token binding; engram records access statistics only in transactions
/// that can write, so the reads write nothing there.
pub async fn reading<F: std::future::Future>(body: F) -> F::Output {
    READ_ONLY.scope(true, body).await
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

impl DbError {
    /// The database could not be reached or is going away (a lost
    /// connection, SQLSTATE classes 08 and 57: shutdown, restart, "cannot
    /// connect now"): nothing about the call was wrong, and the same call
    /// succeeds once the database is back.
    pub fn unavailable(&self) -> bool {
        match &self.code {
            None => true,
            // 57014 is a statement timeout or a cancel: the call itself took
            // too long, and running it again elsewhere would double the load.
            Some(code) => code.starts_with("08") || (code.starts_with("57") && code != "57014"),
        }
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        let mut error = match e.as_db_error() {
            Some(db) => DbError {
                code: Some(db.code().code().to_string()),
                message: db.message().to_string(),
            },
            None => DbError {
                code: None,
                message: format!("the database connection failed: {e}"),
            },
        };
        if error.unavailable() {
            error
                .message
                .push_str("; the database is unavailable or restarting: retry shortly");
        }
        error
    }
}

impl From<PoolError> for DbError {
    fn from(e: PoolError) -> Self {
        let message = match e {
            PoolError::Timeout(_) => {
                "the database is busy (no connection free within the pool's wait timeout); retry shortly".to_string()
            }
            e => format!("database unavailable: {e}; retry shortly"),
        };
        DbError { code: None, message }
    }
}

/// Binds the transaction with the caller's token: who it acts for
/// (X-User-Id, platform tokens only) and the internal context (X-Internal-Type,
/// X-Ghost-*). The database checks all of it again.
const BIND: &str = "SELECT engram.bind($1, act_as => $2, internal_type => $3, ghost_type => $4, ghost_owner => $5,
                        ghost_space => $6, ghost_group => $7)";

/// Limits on waiting: for a pooled connection, and for each statement.
pub struct Limits {
    pub pool_wait: Duration,
    pub statement_timeout: Duration,
}

impl Db {
    /// Pools for the primary and, when `read_url` is given, a read replica.
    pub fn connect(url: &str, read_url: Option<&str>, max_size: usize, limits: &Limits) -> anyhow::Result<Db> {
        let read = match read_url {
            Some(u) => Some(Self::pool(u, max_size, limits).map_err(|e| anyhow::anyhow!("--read-database-url: {e}"))?),
            None => None,
        };
        Ok(Db {
            pool: Self::pool(url, max_size, limits)?,
            read,
        })
    }

    fn pool(url: &str, max_size: usize, limits: &Limits) -> anyhow::Result<Pool> {
        let mut config: tokio_postgres::Config = url.parse()?;
        // One slow owner cannot hold a connection forever.
        config.options(format!("-c statement_timeout={}", limits.statement_timeout.as_millis()));
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(max_size)
            .runtime(Runtime::Tokio1)
            .timeouts(Timeouts {
                wait: Some(limits.pool_wait),
                create: Some(Duration::from_secs(10)),
                recycle: Some(Duration::from_secs(10)),
            })
            .build()?;
        Ok(pool)
    }

    /// The replica's pool, if there is one (start-up checks it like the primary).
    pub fn replica(&self) -> Option<Db> {
        self.read.as_ref().map(|read| Db {
            pool: read.clone(),
            read: None,
        })
    }

    /// Refuses a login role that would bypass the database's checks: a
    /// superuser or BYPASSRLS role, a member of one (it can SET ROLE to it),
    /// or a role that may set engram.owner itself.
    pub async fn check_login_role(&self) -> anyhow::Result<String> {
        let client = self.pool.get().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let row = client
            .query_one(
                "SELECT current_user::text,
                        EXISTS (SELECT 1 FROM pg_roles r WHERE (r.rolsuper OR r.rolbypassrls)
                                  AND pg_has_role(current_user, r.oid, 'MEMBER'))
                        OR has_parameter_privilege('engram.owner', 'SET'),
                        pg_has_role(current_user, 'engram_agent', 'MEMBER')",
                &[],
            )
            .await?;
        let (role, elevated, member): (String, bool, bool) = (row.get(0), row.get(1), row.get(2));
        if elevated {
            anyhow::bail!(
                "engram-mcp logs in as '{role}', which is (or can become) a superuser or BYPASSRLS role, or may set \
                 engram.owner: the database's checks would not confine it. \
                 Log in as a role that is only a member of engram_agent, e.g. \
                 CREATE ROLE engram_mcp LOGIN IN ROLE engram_agent (scripts/run creates it)"
            );
        }
        if !member {
            anyhow::bail!(
                "engram-mcp logs in as '{role}', which is not a member of engram_agent: GRANT engram_agent TO {role}"
            );
        }
        Ok(role)
    }

    /// (size, available) of the pool, for /metrics.
    pub fn pool_status(&self) -> (usize, usize) {
        let s = self.pool.status();
        (s.size, s.available)
    }

    /// Runs `sql` in one transaction bound to the caller (engram.bind).
    pub async fn call(&self, caller: &Caller, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        let i = caller.internal.as_ref().ok().and_then(Option::as_ref);
        let internal_type = i.map(|i| i.internal_type.as_str());
        let ghost = |f: fn(&crate::caller::Internal) -> Option<&str>| i.and_then(f);
        let bind: [&(dyn ToSql + Sync); 7] = [
            &caller.token,
            &caller.act_as,
            &internal_type,
            &ghost(|i| i.ghost_type.as_deref()),
            &ghost(|i| i.ghost_owner.as_deref()),
            &ghost(|i| i.ghost_space.as_deref()),
            &ghost(|i| i.ghost_group.as_deref()),
        ];
        if let Some(read) = self
            .read
            .as_ref()
            .filter(|_| READ_ONLY.try_with(|r| *r).unwrap_or(false))
        {
            match Self::pipelined(read, BIND, &bind, sql, params).await {
                // The replica unreachable, restarting or saturated: the primary answers.
                Err(e) if e.unavailable() => {
                    tracing::warn!(error = %e, "read replica unavailable; reading from the primary")
                }
                result => return result,
            }
        }
        Self::pipelined(&self.pool, BIND, &bind, sql, params).await
    }

    /// A statement outside any binding: the token and catalogue functions
    /// below, which read no memories.
    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        let client = self.pool.get().await?;
        let stmt = client.prepare_cached(sql).await?;
        Ok(client.query(&stmt, params).await?)
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
        pool: &Pool,
        bind_sql: &str,
        bind_params: &[&(dyn ToSql + Sync)],
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, DbError> {
        let client = pool.get().await?;
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

    /// The owner and platform flag of a token, if it is usable.
    pub async fn authenticate(&self, token: &str) -> Result<Option<(String, bool)>, DbError> {
        let rows = self
            .query("SELECT owner, platform FROM engram.authenticate($1)", &[&token])
            .await?;
        Ok(rows.first().map(|r| (r.get(0), r.get(1))))
    }

    /// Whether requests without a token may be served (engram.bind(NULL)
    /// would bind): only in a database that has never had a token.
    pub async fn anonymous_allowed(&self) -> Result<bool, DbError> {
        Ok(self.query("SELECT engram.anonymous_allowed()", &[]).await?[0].get(0))
    }

    pub async fn has_tokens(&self) -> Result<bool, DbError> {
        Ok(self.query("SELECT engram.has_tokens()", &[]).await?[0].get(0))
    }

    /// The embedding dimension the database stores.
    pub async fn dims(&self) -> Result<i32, DbError> {
        Ok(self.query("SELECT engram._dims()", &[]).await?[0].get(0))
    }

    /// The dimension of image embeddings (engram.configure(image_dims => ...)).
    pub async fn image_dims(&self) -> Result<i32, DbError> {
        Ok(self.query("SELECT engram._image_dims()", &[]).await?[0].get(0))
    }

    pub async fn ping(&self) -> Result<(), DbError> {
        let client = self.pool.get().await?;
        client.simple_query("SELECT 1").await?;
        Ok(())
    }
}
