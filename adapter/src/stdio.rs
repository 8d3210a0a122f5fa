//! `engram-mcp stdio`: the same tools over standard input and output, for
//! desktop clients that launch their MCP servers as subprocesses.
//!
//! Over HTTP every request carries its caller (the bearer token and the
//! headers, resolved by `caller::authenticate`). A stdio process has one
//! caller for its whole life: the token in `ENGRAM_TOKEN`, checked once at
//! start-up and bound again by the database on every tool call
//! (`engram.bind`), exactly as over HTTP. The tools read their caller from
//! the request's `http::request::Parts`, so [`StdioServer`] hands each
//! request a `Parts` that carries this caller: one code path for both
//! transports.

use crate::caller::Caller;
use crate::config::StdioArgs;
use crate::tools::EngramServer;
use crate::{start, Started};
use anyhow::{bail, Context};
use engram_embed::Embedder;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

/// An [`EngramServer`] whose every request comes from one caller.
pub struct StdioServer {
    inner: EngramServer,
    caller: Caller,
}

impl StdioServer {
    fn with_caller(&self, mut context: RequestContext<RoleServer>) -> RequestContext<RoleServer> {
        let (mut parts, ()) = http::Request::new(()).into_parts();
        parts.extensions.insert(self.caller.clone());
        context.extensions.insert(parts);
        context
    }
}

impl ServerHandler for StdioServer {
    fn get_info(&self) -> ServerConfig {
        self.inner.get_info()
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.get_tool(name)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.inner.list_tools(request, self.with_caller(context)).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.inner.list_resources(request, self.with_caller(context)).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.inner.read_resource(request, self.with_caller(context)).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.inner.call_tool(request, self.with_caller(context)).await
    }
}

/// Who the process acts for: the token's owner, or the local owner of a
/// database that has never had a token (the rule of a loopback listener).
async fn caller(db: &crate::db::Db, args: &StdioArgs) -> anyhow::Result<Caller> {
    let token = std::env::var("ENGRAM_TOKEN").ok();
    let token = token.as_deref().map(str::trim).filter(|t| !t.is_empty());
    let (owner, platform) = match token {
        Some(token) => match db.authenticate(token).await.map_err(|e| anyhow::anyhow!("{e}"))? {
            Some(identity) => identity,
            None => bail!(
                "ENGRAM_TOKEN is unknown, expired or revoked; create one with \
                 SELECT engram.create_token(owner => '...', label => '...')"
            ),
        },
        None if db.anonymous_allowed().await.map_err(|e| anyhow::anyhow!("{e}"))? => (String::new(), false),
        None => bail!(
            "this database has tokens: set ENGRAM_TOKEN to one (engram.create_token), \
             e.g. in the client's \"env\" for this server"
        ),
    };
    Ok(Caller {
        token: token.map(str::to_string),
        act_as: None,
        owner,
        internal: Ok(None),
        session_id: args.session_id.clone(),
        // One process is one conversation (one initialize): without
        // --session-id what it captures goes to a session of its own, so
        // memory_capture works out of the box and two conversations never
        // share a session.
        conversation: Some(format!("stdio-{}", uuid::Uuid::new_v4())),
        platform,
    })
}

pub async fn run(args: StdioArgs) -> anyhow::Result<()> {
    let Started { shared, db, role, dims } = start(&args.common).await?;
    let caller = caller(&db, &args).await?;
    tracing::info!(
        embedder = %shared.embedder.name(),
        dims,
        db_role = %role,
        owner = %caller.owner,
        session = caller.session_id.as_deref().or(caller.conversation.as_deref()).unwrap_or_default(),
        "engram-mcp serving MCP over stdio"
    );
    let server = StdioServer {
        inner: EngramServer::new(shared),
        caller,
    };
    let service = server
        .serve(rmcp::transport::stdio())
        .await
        .context("MCP over stdio: the client's initialize failed")?;
    service.waiting().await.context("MCP over stdio")?;
    Ok(())
}
