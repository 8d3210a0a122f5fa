//! Database access. engram-mcp logs in as a role that is a member of
//! engram_agent only (never a superuser: it checks at start). Every tool call
//! is one transaction that binds with the caller's own token
//! (engram.bind(token, act_as, internal context)) before it runs its one
//! engram SQL function, so the database, not adapter code, decides which
//! owner and scope the call may touch.

use crate::caller::Caller;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime, Timeouts};
use std::time::Duration;
use tokio_postgres::types::{FromSql, ToSql};
use tokio_postgres::{NoTls, Row};

/// Reads a column without panicking: a row the adapter cannot decode (a
/// type it does not expect, a value out of range) is an error answer, never
/// a panic that would leave the client waiting.
pub trait RowExt {
    fn col<'a, T: FromSql<'a>>(&'a self, idx: usize) -> Result<T, String>;
}

impl RowExt for Row {
    fn col<'a, T: FromSql<'a>>(&'a self, idx: usize) -> Result<T, String> {
        self.try_get(idx).map_err(|e| {
            let name = self
                .columns()
                .get(idx)
                .map(|c| c.name().to_string())
                .unwrap_or_default();
            tracing::warn!(column = %name, error = %e, "a row the adapter cannot read");
            format!(
                "engram-mcp could not read column '{name}' of a row the database returned ({}); the row was \
                 written outside engram's checks: fix or forget it (engram.forget)",
                crate::limits::clip(&e.to_string())
            )
        })
    }
}

/// The first row of a result, or an error answer (a function that returns
/// one row always does; none is a fault, not a panic).
pub fn first(rows: &[Row]) -> Result<&Row, String> {
    rows.first().ok_or_else(|| "the database returned no row".to_string())
}

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

/// An error with its causes, outermost first, each said once: the pool's
/// "error connecting to server" alone does not say why ("Connection
/// refused", "password authentication failed", "database ... does not
/// exist"). Generic wrappers ("db error") are left out.
pub fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        let text = text
            .trim_start_matches("Error occurred while creating a new object: ")
            .to_string();
        if text != "db error" && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    parts.join(": ")
}

/// What to check when the database cannot be reached, from the cause.
fn connect_hint(causes: &str) -> &'static str {
    let c = causes.to_lowercase();
    if c.contains("connection refused") || c.contains("no such file or directory") {
        "is PostgreSQL running and listening at the host and port of --database-url (ENGRAM_DATABASE_URL)?"
    } else if c.contains("password authentication failed") || c.contains("authentication") {
        "check the user and password of --database-url"
    } else if c.contains("database") && c.contains("does not exist") {
        "create the database (CREATE DATABASE ...; CREATE EXTENSION engram CASCADE) or fix dbname in --database-url"
    } else if c.contains("role") && c.contains("does not exist") {
        "create the login role (CREATE ROLE engram_mcp LOGIN IN ROLE engram_agent) or fix user in --database-url"
    } else if c.contains("timed out") || c.contains("timeout") {
        "the database did not answer in time: check the host, the network and the server's load"
    } else {
        "check --database-url and that the server accepts connections"
    }
}

/// Logs why the database cannot be reached, at most once per 10 seconds.
fn log_unreachable(e: &PoolError) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = LAST.load(Ordering::Relaxed);
    if now >= last + 10
        && LAST
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(error = %connect_error(e), "cannot reach the database (logged at most every 10 s)");
    }
}

/// A connection that could not be made, with its causes and what to check.
pub fn connect_error(e: &PoolError) -> String {
    let causes = with_causes(e);
    format!("{causes}; {}", connect_hint(&causes))
}

/// A failed database call: the SQLSTATE (when Postgres raised it) and message.
#[derive(Debug)]
pub struct DbError {
    pub code: Option<String>,
    pub message: String,
    /// The HINT of the error Postgres raised, if any.
    pub hint: Option<String>,
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
    /// What the caller sent cannot be used (the internal headers did not
    /// parse): a client error, raised before anything reaches the database.
    pub fn bad_request(message: impl Into<String>) -> DbError {
        DbError {
            code: Some("22023".into()),
            message: message.into(),
            hint: None,
        }
    }

    /// Whether running the same call again shortly may succeed: the database
    /// unavailable, a statement timeout or cancel, a lock or serialization
    /// conflict, or the server out of a resource (connections, memory).
    pub fn retryable(&self) -> bool {
        self.unavailable()
            || matches!(
                self.code.as_deref(),
                Some("57014" | "55P03" | "40001" | "40P01" | "25006")
            )
            || self.code.as_deref().is_some_and(|c| c.starts_with("53"))
    }

    /// The HTTP status of this error (the REST API's answer; MCP tool
    /// errors carry the same message): client mistakes are 4xx, conditions
    /// worth a retry 503 (with Retry-After), faults of engram itself 500.
    pub fn status(&self) -> http::StatusCode {
        use http::StatusCode as S;
        if self.retryable() {
            return S::SERVICE_UNAVAILABLE;
        }
        let Some(code) = self.code.as_deref() else {
            return S::SERVICE_UNAVAILABLE;
        };
        match code {
            "P0002" | "02000" => S::NOT_FOUND,
            "42501" | "28000" | "28P01" => S::FORBIDDEN,
            // a unique or exclusion violation; an object in a state that
            // does not allow the call (an archived memory, say)
            "23505" | "23P01" | "55000" | "55006" => S::CONFLICT,
            // data exceptions, other integrity violations, features off,
            // and engram's own RAISEs without a code: what the caller sent
            // (54000: a size limit or an owner's quota)
            c if c.starts_with("22")
                || c.starts_with("23")
                || c.starts_with("0A")
                || c.starts_with("54")
                || c == "P0001" =>
            {
                S::BAD_REQUEST
            }
            _ => S::INTERNAL_SERVER_ERROR,
        }
    }

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
                hint: db.hint().map(str::to_string),
            },
            None => DbError {
                code: None,
                message: format!("the database connection failed: {}", with_causes(&e)),
                hint: None,
            },
        };
        // A NUL character in a text or JSON argument: Postgres cannot store
        // one, and its own message ("invalid byte sequence ... 0x00") does not
        // say which input was wrong or what to do.
        let nul = error.message.contains("0x00") || error.message.contains("\\u0000");
        if matches!(error.code.as_deref(), Some("22021" | "22P05")) && nul {
            error.message = "an argument contains a NUL character (\\u0000), which Postgres cannot store; remove it \
                             and send the call again"
                .into();
        }
        if error.unavailable() {
            error
                .message
                .push_str("; the database is unavailable or restarting: retry shortly");
        } else if error.code.as_deref() == Some("57014") {
            error.message.push_str(
                "; the call took longer than the statement timeout (or was cancelled): retry shortly, or ask for \
                 less (a smaller limit, a narrower filter)",
            );
        } else if error.retryable() {
            error
                .message
                .push_str("; the database is busy with a conflicting call: retry shortly");
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
            e => {
                // The causes name roles and databases: the operator's log
                // has them (once per interval: every call fails alike during
                // an outage), a caller gets what to do.
                log_unreachable(&e);
                "the database is unavailable; retry shortly".to_string()
            }
        };
        DbError {
            code: None,
            message,
            hint: None,
        }
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
        // One slow owner cannot hold a connection forever. Times come back in
        // UTC whatever the server's zone, and relative times in queries ("yesterday",
        // engram.time_window) are read in UTC days, as the tools document.
        config.options(format!(
            "-c statement_timeout={} -c TimeZone=UTC",
            limits.statement_timeout.as_millis()
        ));
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
        let client = self.pool.get().await.map_err(|e| anyhow::anyhow!(connect_error(&e)))?;
        let row = client
            .query_one(
                "SELECT current_user::text,
                        EXISTS (SELECT 1 FROM pg_roles r WHERE (r.rolsuper OR r.rolbypassrls)
                                  AND pg_has_role(current_user, r.oid, 'MEMBER'))
                        OR has_parameter_privilege('engram.owner', 'SET'),
                        pg_has_role(current_user, 'engram_agent', 'MEMBER')",
                &[],
            )
            .await
            .map_err(|e| anyhow::anyhow!(with_causes(&e)))?;
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

    /// Fails, saying what to run, unless the database's engram is a version
    /// this engram-mcp's calls match (compat::EXTENSION_VERSIONS).
    pub async fn check_extension(&self) -> anyhow::Result<()> {
        let client = self.pool.get().await.map_err(|e| anyhow::anyhow!(connect_error(&e)))?;
        check_extension_of(&client).await
    }

    /// (size, available) of the pool, for /metrics.
    pub fn pool_status(&self) -> (usize, usize) {
        let s = self.pool.status();
        (s.size, s.available)
    }

    /// Runs `sql` in one transaction bound to the caller (engram.bind).
    /// A caller whose internal headers did not parse is refused here, before
    /// anything reaches the database: no path can bind without its context
    /// (a ghost falling back to the accessor's own memories).
    pub async fn call(&self, caller: &Caller, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        let i = caller.context().map_err(DbError::bad_request)?;
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
        match rows.first() {
            Some(r) => Ok(Some((
                r.col(0).map_err(DbError::bad_request)?,
                r.col(1).map_err(DbError::bad_request)?,
            ))),
            None => Ok(None),
        }
    }

    /// Whether requests without a token may be served (engram.bind(NULL)
    /// would bind): only in a database that has never had a token.
    pub async fn anonymous_allowed(&self) -> Result<bool, DbError> {
        self.scalar("SELECT engram.anonymous_allowed()").await
    }

    pub async fn has_tokens(&self) -> Result<bool, DbError> {
        self.scalar("SELECT engram.has_tokens()").await
    }

    /// The embedding dimension the database stores.
    pub async fn dims(&self) -> Result<i32, DbError> {
        self.scalar("SELECT engram._dims()").await
    }

    /// The embedding model on record (engram.configure(embedding_model => ...)).
    pub async fn embedding_model(&self) -> Result<Option<String>, DbError> {
        self.scalar("SELECT engram.embedding_model()").await
    }

    /// The dimension of image embeddings (engram.configure(image_dims => ...)).
    pub async fn image_dims(&self) -> Result<i32, DbError> {
        self.scalar("SELECT engram._image_dims()").await
    }

    /// The one value of a catalogue function.
    async fn scalar<T: for<'a> FromSql<'a>>(&self, sql: &str) -> Result<T, DbError> {
        let rows = self.query(sql, &[]).await?;
        first(&rows).and_then(|r| r.col(0)).map_err(|message| DbError {
            code: Some("XX000".into()),
            message,
            hint: None,
        })
    }

    pub async fn ping(&self) -> Result<(), DbError> {
        let client = self.pool.get().await?;
        client.simple_query("SELECT 1").await?;
        Ok(())
    }
}

/// Fails, saying what to run, unless the database `client` is connected to
/// has an engram version this engram-mcp's calls match: the server's start,
/// `export` and `import` all check it before their first call.
pub async fn check_extension_of(client: &tokio_postgres::Client) -> anyhow::Result<()> {
    let found: Option<String> = client
        .query_opt(
            "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'engram'",
            &[],
        )
        .await?
        .map(|r| r.get(0));
    crate::compat::check_extension(found.as_deref()).map_err(|e| anyhow::anyhow!(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(code: &str) -> DbError {
        DbError {
            code: Some(code.into()),
            message: "m".into(),
            hint: None,
        }
    }

    #[test]
    fn sqlstates_map_to_statuses_a_client_can_act_on() {
        use http::StatusCode as S;
        for (code, status) in [
            ("P0002", S::NOT_FOUND),
            ("42501", S::FORBIDDEN),
            ("28000", S::FORBIDDEN),
            ("23505", S::CONFLICT),
            ("55000", S::CONFLICT),
            ("22023", S::BAD_REQUEST),
            ("22004", S::BAD_REQUEST),
            ("22007", S::BAD_REQUEST),
            ("23514", S::BAD_REQUEST),
            ("P0001", S::BAD_REQUEST),
            ("54000", S::BAD_REQUEST),
            ("57014", S::SERVICE_UNAVAILABLE),
            ("57P01", S::SERVICE_UNAVAILABLE),
            ("08006", S::SERVICE_UNAVAILABLE),
            ("40001", S::SERVICE_UNAVAILABLE),
            ("55P03", S::SERVICE_UNAVAILABLE),
            ("53300", S::SERVICE_UNAVAILABLE),
            ("XX000", S::INTERNAL_SERVER_ERROR),
            ("42883", S::INTERNAL_SERVER_ERROR),
        ] {
            assert_eq!(error(code).status(), status, "{code}");
        }
        assert!(error("57014").retryable() && !error("57014").unavailable());
    }

    #[tokio::test]
    async fn a_caller_whose_headers_did_not_parse_never_reaches_the_database() {
        let db = Db::connect(
            "host=/nonexistent user=x",
            None,
            1,
            &Limits {
                pool_wait: Duration::from_millis(10),
                statement_timeout: Duration::from_secs(1),
            },
        )
        .unwrap();
        let caller = Caller {
            token: Some("t".into()),
            act_as: Some("alice".into()),
            owner: "alice".into(),
            internal: Err("header x-ghost-owner was sent more than once; send it once".into()),
            session_id: None,
            conversation: None,
            platform: true,
        };
        let e = db.call(&caller, "SELECT 1", &[]).await.unwrap_err();
        assert_eq!(e.code.as_deref(), Some("22023"));
        assert!(e.message.contains("more than once"), "{e}");
        assert_eq!(e.status(), http::StatusCode::BAD_REQUEST);
    }
}
