//! Resources over MCP: the human-curated entries of the caller's
//! owner (engram.resources, engram.resource_get) as `resources/list` and
//! `resources/read` under `engram://resources/{id}`, and
//! `notifications/resources/list_changed` to the owner's open sessions when
//! the REST API (crate::api) changes one. Agents read resources; only
//! platform tokens write them, through that API.

use super::{caller, db_error, json_of, EngramServer, Parts};
use crate::db::RowExt;
use rmcp::model::{ListResourcesResult, ReadResourceResult, Resource, ResourceContents};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use std::sync::Mutex;

pub const URI_PREFIX: &str = "engram://resources/";

/// The open MCP sessions per owner, for list_changed notifications.
#[derive(Default)]
pub struct Subscribers(Mutex<Vec<(String, Peer<RoleServer>)>>);

impl Subscribers {
    pub fn register(&self, owner: &str, peer: Peer<RoleServer>) {
        let mut all = self.0.lock().unwrap();
        all.retain(|(_, p)| !p.is_transport_closed());
        all.push((owner.to_string(), peer));
    }

    /// Tells every open session of `owner` that its resources changed.
    pub async fn changed(&self, owner: &str) {
        let peers: Vec<Peer<RoleServer>> = {
            let mut all = self.0.lock().unwrap();
            all.retain(|(_, p)| !p.is_transport_closed());
            all.iter().filter(|(o, _)| o == owner).map(|(_, p)| p.clone()).collect()
        };
        for peer in peers {
            if let Err(e) = peer.notify_resource_list_changed().await {
                tracing::debug!(error = %e, "resources/list_changed not delivered");
            }
        }
    }
}

fn parts(context: &RequestContext<RoleServer>) -> Result<&Parts, ErrorData> {
    context
        .extensions
        .get::<Parts>()
        .ok_or_else(|| ErrorData::internal_error("request was not authenticated", None))
}

fn to_resource(r: &Value) -> Resource {
    let id = r["id"].as_str().unwrap_or_default();
    let name = r["name"].as_str().unwrap_or(id);
    let content = r["content"].as_str().unwrap_or_default();
    let mut description: String = content.chars().take(200).collect();
    if description.len() < content.len() {
        description.push('…');
    }
    Resource::new(format!("{URI_PREFIX}{id}"), name)
        .with_title(name)
        .with_description(description)
}

impl EngramServer {
    pub(super) async fn resources_list(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let c = caller(parts(context)?).map_err(|e| ErrorData::invalid_request(e, None))?;
        let rows = crate::db::reading(self.shared.db.call(&c, "SELECT engram.resources()", &[]))
            .await
            .map_err(|e| ErrorData::internal_error(db_error(e, None), None))?;
        let items = rows
            .iter()
            .map(|r| r.col::<Value>(0).map(|v| to_resource(&v)))
            .collect::<Result<_, String>>()
            .map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(ListResourcesResult::with_all_items(items))
    }

    pub(super) async fn resources_read(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, ErrorData> {
        let c = caller(parts(context)?).map_err(|e| ErrorData::invalid_request(e, None))?;
        let id = uri
            .strip_prefix(URI_PREFIX)
            .and_then(|id| uuid::Uuid::parse_str(id).ok())
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("unknown resource {uri}; resources/list gives engram://resources/{{id}} URIs"),
                    None,
                )
            })?;
        let rows = crate::db::reading(self.shared.db.call(&c, "SELECT engram.resource_get(id => $1)", &[&id]))
            .await
            .map_err(|e| match e.code.as_deref() {
                Some("P0002") => ErrorData::resource_not_found(format!("resource {uri} not found"), None),
                _ => ErrorData::internal_error(db_error(e, None), None),
            })?;
        let r = json_of(rows).map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            r["content"].as_str().unwrap_or_default(),
            uri,
        )]))
    }
}
