//! Group `internal`: the five tools over the request's internal
//! context (X-Internal-Type headers, docs/SECURITY.md).

use super::memories::{
    Filters, ListArgs, ListResult, QueryArgs, QueryResult, RememberArgs, RememberResult, SearchArgs, SearchResult,
    UpdateArgs, UpdateResult,
};
use super::*;
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};

#[tool_router(router = internal_router, vis = "pub(super)")]
impl EngramServer {
    #[tool(
        description = "Create a ghost or agent memory in the request's internal context (X-Internal-Type headers).",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_internal_create(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<RememberArgs>,
    ) -> Result<Json<RememberResult>, String> {
        self.run("memory_internal_create", async {
            let c = caller(&parts)?;
            let i = internal(&c)?;
            self.remember_in(&c, Some(&i), a).await
        })
        .await
    }

    #[tool(
        description = "Update a ghost or agent memory of the request's internal context.",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn memory_internal_update(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<UpdateArgs>,
    ) -> Result<Json<UpdateResult>, String> {
        self.run("memory_internal_update", async {
            let c = caller(&parts)?;
            let i = internal(&c)?;
            self.update_in(&c, Some(&i), a).await
        })
        .await
    }

    #[tool(
        description = "Search the ghost or agent memories of the request's internal context.",
        annotations(read_only_hint = true)
    )]
    async fn memory_internal_search(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResult>, String> {
        self.run("memory_internal_search", async {
            let c = caller(&parts)?;
            let i = internal(&c)?;
            let (query, limit) = (a.query.clone(), a.limit);
            let floor = a.min_similarity.is_none();
            let found = self.search_in(&c, Some(&i), &query, limit, a.into()).await?;
            Ok(SearchResult {
                note: found.hits.is_empty().then(|| super::nothing_relevant(floor)),
                results: found.hits,
                time_window: found.time_window,
            })
        })
        .await
    }

    #[tool(
        description = "Ask the internal context's memories a question; returns the hits and a prompt-ready context string.",
        annotations(read_only_hint = true)
    )]
    async fn memory_internal_query(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<QueryArgs>,
    ) -> Result<Json<QueryResult>, String> {
        self.run("memory_internal_query", async {
            let c = caller(&parts)?;
            let i = internal(&c)?;
            let results = self
                .search_in(&c, Some(&i), &a.query, Some(a.limit.unwrap_or(5)), Filters::default())
                .await?
                .hits;
            let context = prompt_context(&results, a.max_chars.unwrap_or(2000));
            Ok(QueryResult { results, context })
        })
        .await
    }

    #[tool(
        description = "Browse the internal context's memories with filters and ordering, a page at a time.",
        annotations(read_only_hint = true)
    )]
    async fn memory_internal_search_by(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ListArgs>,
    ) -> Result<Json<ListResult>, String> {
        self.run("memory_internal_search_by", async {
            let c = caller(&parts)?;
            let i = internal(&c)?;
            self.list_in(&c, Some(&i), a).await
        })
        .await
    }
}
