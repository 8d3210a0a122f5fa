//! Group `sharing`: trust-gated ghost grants and publications (docs/SECURITY.md).

use super::*;
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
pub struct GrantArgs {
    /// The user whose conversations with your ghost get this trust.
    pub accessor: String,
    /// 0 blocks them; 1-5 lets them see memories whose access_level is at most this.
    pub trust: i32,
}

#[derive(Deserialize, JsonSchema)]
pub struct AccessorArgs {
    /// The user whose grant to remove (they fall back to your ghost's default trust).
    pub accessor: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct PublishArgs {
    /// The memory id (a UUID from memory_search or memory_list).
    pub id: String,
    /// A space: every space ghost conversation of it can read the memory.
    pub space: Option<String>,
    /// A group: group ghost conversations of its members can read the memory.
    pub group: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct GrantResult {
    pub accessor: String,
    pub trust: i32,
}

#[derive(Serialize, JsonSchema)]
pub struct RevokeGrantResult {
    pub accessor: String,
    /// false when there was no grant
    pub revoked: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct PublishResult {
    pub id: String,
    pub publication_id: String,
}

#[derive(Serialize, JsonSchema)]
pub struct UnpublishResult {
    pub id: String,
    /// false when it was not published there
    pub unpublished: bool,
}

#[tool_router(router = sharing_router, vis = "pub(super)")]
impl EngramServer {
    #[tool(
        description = "Trust a user with your ghost: in their conversations with your ghost it shows your memories \
                       whose access_level is at most `trust` (1-5); 0 blocks them. Replaces an earlier grant.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true)
    )]
    async fn memory_grant(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<GrantArgs>,
    ) -> Result<Json<GrantResult>, String> {
        let accessor = a.accessor.clone();
        let params: &[&(dyn ToSql + Sync)] = &[&a.accessor, &a.trust];
        self.run("memory_grant", async {
            check_len("accessor", &a.accessor, MAX_ID_CHARS)?;
            self.sql(
                &parts,
                "SELECT engram.grant(accessor => $1, trust => $2)",
                params,
                |rows| {
                    Ok(GrantResult {
                        accessor,
                        trust: first(&rows)?.col(0)?,
                    })
                },
            )
            .await
        })
        .await
    }

    #[tool(
        description = "Remove a user's grant: your ghost falls back to its default trust for them.",
        annotations(destructive_hint = true)
    )]
    async fn memory_revoke_grant(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<AccessorArgs>,
    ) -> Result<Json<RevokeGrantResult>, String> {
        let accessor = a.accessor.clone();
        let params: &[&(dyn ToSql + Sync)] = &[&a.accessor];
        self.run("memory_revoke_grant", async {
            check_len("accessor", &a.accessor, MAX_ID_CHARS)?;
            self.sql(&parts, "SELECT engram.revoke_grant(accessor => $1)", params, |rows| {
                Ok(RevokeGrantResult {
                    accessor,
                    revoked: first(&rows)?.col(0)?,
                })
            })
            .await
        })
        .await
    }

    #[tool(
        description = "Publish one of your memories to a space (every space ghost conversation reads it) or a group \
                       (members' group ghost conversations read it). Give exactly one of space or group.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true)
    )]
    async fn memory_publish(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<PublishArgs>,
    ) -> Result<Json<PublishResult>, String> {
        self.run("memory_publish", async {
            let uuid = parse_id(&a.id)?;
            if a.space.is_some() == a.group.is_some() {
                return Err(
                    "Give exactly one of space or group: the space or the group to publish the memory to.".into(),
                );
            }
            check_opt("space", a.space.as_deref(), MAX_ID_CHARS)?;
            check_opt("group", a.group.as_deref(), MAX_ID_CHARS)?;
            let sql = "SELECT engram.publish(id => $1, space => $2, group_id => $3)::text";
            self.sql_about(&parts, Some(&a.id), sql, &[&uuid, &a.space, &a.group], |rows| {
                Ok(PublishResult {
                    id: uuid.to_string(),
                    publication_id: first(&rows)?.col(0)?,
                })
            })
            .await
        })
        .await
    }

    #[tool(
        description = "Withdraw a memory from a space or group, or from everywhere when neither is given.",
        annotations(destructive_hint = true)
    )]
    async fn memory_unpublish(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<PublishArgs>,
    ) -> Result<Json<UnpublishResult>, String> {
        self.run("memory_unpublish", async {
            let uuid = parse_id(&a.id)?;
            let sql = "SELECT engram.unpublish(id => $1, space => $2, group_id => $3)";
            self.sql_about(&parts, Some(&a.id), sql, &[&uuid, &a.space, &a.group], |rows| {
                Ok(UnpublishResult {
                    id: uuid.to_string(),
                    unpublished: first(&rows)?.col(0)?,
                })
            })
            .await
        })
        .await
    }
}
