//! Who is calling and in which scope: resolved from the HTTP headers of every
//! request (never cached in an MCP session) by an axum middleware, stored in
//! the request's extensions, and read by each tool from `http::request::Parts`.

use crate::db::Db;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use engram_core::tags::{self, ScopeArgs};
use std::net::SocketAddr;
use std::sync::Arc;

/// The internal (ghost/agent) context of a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Internal {
    pub internal_type: String,
    /// stamped on writes: `engram.internal_tags(...)`
    pub tags: Vec<String>,
    /// ANDed into every read: `engram.scope_tags(...)`
    pub scope: Vec<String>,
    /// X-Ghost-Type (user, space, group) for ghosts
    pub ghost_type: Option<String>,
    pub ghost_owner: Option<String>,
    pub ghost_space: Option<String>,
    pub ghost_group: Option<String>,
}

impl Internal {
    pub fn is_ghost(&self) -> bool {
        self.internal_type == "ghost"
    }

    /// The ghost's id: its owner, space or group, whichever X-Ghost-Type names.
    pub fn ghost_id(&self) -> Option<&str> {
        match self.ghost_type.as_deref() {
            Some("user") => self.ghost_owner.as_deref(),
            Some("space") => self.ghost_space.as_deref(),
            Some("group") => self.ghost_group.as_deref(),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Caller {
    /// The bearer token, or None for an anonymous loopback request (served
    /// only while no token exists; engram.bind(NULL) then binds the
    /// database's anonymous owner).
    pub token: Option<String>,
    /// X-User-Id (platform tokens only): the owner to act for.
    pub act_as: Option<String>,
    /// The owner the call acts for, as far as the adapter knows (for the
    /// embedding cache's scope and logs; the database decides in engram.bind).
    pub owner: String,
    /// `Ok(None)`: no X-Internal-Type. `Err`: headers present but incomplete
    /// or unknown: every tool answers with that error.
    pub internal: Result<Option<Internal>, String>,
    /// The session the client named (X-Session-Id, stdio's --session-id):
    /// what every tool takes as "this session", memory_context included.
    pub session_id: Option<String>,
    /// The conversation the transport implies when none is named: the MCP
    /// session over HTTP (as a digest, never the live session id, which
    /// would let another reader of the events resume the session), or the
    /// stdio process's run. Only what a conversation writes takes it
    /// (captured events, summaries, images); reads and the deduplication of
    /// memories do not, so a new conversation still sees the last one's
    /// summary. None when acting for a user (X-User-Id) or in an internal
    /// context: one platform connection carries many users' conversations.
    pub conversation: Option<String>,
    /// A platform token (what /api/resources requires; the database checks
    /// it again in engram.resource_*).
    pub platform: bool,
}

impl Caller {
    /// The internal context, or the header error every tool reports.
    pub fn context(&self) -> Result<Option<&Internal>, String> {
        match &self.internal {
            Ok(i) => Ok(i.as_ref()),
            Err(e) => Err(e.clone()),
        }
    }
}

/// Whether a Host header names this machine by a loopback name (what a
/// local client sends; a proxy passing a public name on does not).
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The session id an MCP session's events are stored under: a digest of the
/// live `Mcp-Session-Id` (which would let whoever reads it resume or end the
/// session), stable for the session's life.
pub fn conversation_of(mcp_session_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(mcp_session_id.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("mcp-{hex}")
}

pub struct AuthState {
    pub db: Db,
    /// Whether engram-mcp listens on a loopback address: anonymous requests
    /// are possible only then (and only from loopback peers).
    pub loopback_listener: bool,
    /// What the database last said of each token (and of anonymous access),
    /// for an outage: see `Recent`.
    pub recent: Recent,
}

/// A token's owner and whether it is a platform token.
type Identity = (String, bool);

/// The database's latest answers about tokens, used only while it cannot
/// be asked. During an outage a request with a token the database accepted
/// in the last ten minutes goes on to its handler, whose call fails with an
/// error that says "retry" (an MCP tool error, a /v1 503): an MCP client
/// keeps its session, where an HTTP 503 from /mcp ends it in some SDKs.
/// Nothing is served from it: every call binds with the token again in the
/// database, which refuses a token revoked in the meantime.
#[derive(Default)]
pub struct Recent {
    tokens: std::sync::Mutex<std::collections::HashMap<String, (Identity, std::time::Instant)>>,
    anonymous: std::sync::Mutex<Option<(bool, std::time::Instant)>>,
}

impl Recent {
    const KEPT: std::time::Duration = std::time::Duration::from_secs(600);
    const MAX_TOKENS: usize = 10_000;

    fn remember(&self, token: &str, identity: &Identity) {
        let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        if tokens.len() >= Self::MAX_TOKENS {
            tokens.retain(|_, (_, at)| at.elapsed() < Self::KEPT);
            if tokens.len() >= Self::MAX_TOKENS {
                tokens.clear();
            }
        }
        tokens.insert(token.to_string(), (identity.clone(), std::time::Instant::now()));
    }

    fn forget(&self, token: &str) {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner()).remove(token);
    }

    fn identity(&self, token: &str) -> Option<Identity> {
        let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        tokens
            .get(token)
            .filter(|(_, at)| at.elapsed() < Self::KEPT)
            .map(|(identity, _)| identity.clone())
    }

    fn set_anonymous(&self, allowed: bool) {
        *self.anonymous.lock().unwrap_or_else(|e| e.into_inner()) = Some((allowed, std::time::Instant::now()));
    }

    fn anonymous(&self) -> Option<bool> {
        self.anonymous
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .filter(|(_, at)| at.elapsed() < Self::KEPT)
            .map(|(allowed, _)| allowed)
    }
}

/// One header's value. Identity and scope come from headers, so anything
/// ambiguous is an error rather than a guess: a header sent twice (a proxy
/// appending a value after the client's), or sent empty (which would
/// otherwise silently mean "absent": an empty X-User-Id acting as the token's
/// own owner).
fn header<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, String> {
    let mut values = h.get_all(name).iter();
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!("header {name} was sent more than once; send it once"));
    }
    let v = v
        .to_str()
        .map_err(|_| format!("header {name} is not valid text; send printable ASCII"))?
        .trim();
    if v.is_empty() {
        return Err(format!("header {name} is empty; leave it out or give it a value"));
    }
    // Ids (owners, sessions, ghosts) have engram's id limit; the token is
    // looked up, never stored.
    if name != "authorization" {
        crate::limits::check_len(&format!("header {name}"), v, crate::limits::MAX_ID_CHARS)?;
    }
    Ok(Some(v))
}

/// The token of an `Authorization: Bearer <token>` header (scheme in any
/// case); other schemes are refused rather than read as "no token".
fn bearer(value: &str) -> Result<&str, String> {
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => Ok(token.trim()),
        _ => Err("unsupported Authorization header; send Authorization: Bearer <token>".into()),
    }
}

/// The internal context from X-Internal-Type and X-Ghost-*.
pub fn internal_from_headers(h: &HeaderMap) -> Result<Option<Internal>, String> {
    let Some(internal_type) = header(h, "x-internal-type")? else {
        for name in ["x-ghost-type", "x-ghost-owner", "x-ghost-space", "x-ghost-group"] {
            if header(h, name)?.is_some() {
                return Err(format!(
                    "{name} was sent without X-Internal-Type; add X-Internal-Type: ghost"
                ));
            }
        }
        return Ok(None);
    };
    let args = ScopeArgs {
        internal_type: Some(internal_type),
        ghost_type: header(h, "x-ghost-type")?,
        ghost_owner: header(h, "x-ghost-owner")?,
        ghost_space: header(h, "x-ghost-space")?,
        ghost_group: header(h, "x-ghost-group")?,
    };
    let describe = |e: engram_core::Error| format!("{} (check the X-Internal-Type and X-Ghost-* headers)", e.message);
    Ok(Some(Internal {
        internal_type: internal_type.to_string(),
        tags: tags::internal_tags(&args).map_err(describe)?,
        scope: tags::scope_tags(&args).map_err(describe)?,
        ghost_type: args.ghost_type.map(str::to_string),
        ghost_owner: args.ghost_owner.map(str::to_string),
        ghost_space: args.ghost_space.map(str::to_string),
        ghost_group: args.ghost_group.map(str::to_string),
    }))
}

/// An error answer: `{"error": message}`, with `WWW-Authenticate` on 401
/// and `Retry-After` on 503 (also the REST API's, crate::api).
pub(crate) fn deny(status: StatusCode, message: &str) -> Response {
    let mut r = (status, axum::Json(serde_json::json!({ "error": message }))).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut()
            .insert("www-authenticate", http::HeaderValue::from_static("Bearer"));
    }
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut()
            .insert("retry-after", http::HeaderValue::from_static("1"));
    }
    r
}

/// Authenticates the request and attaches a [`Caller`].
///
/// * `Authorization: Bearer <token>` maps to the token's owner. Platform
///   tokens may act for a user (`X-User-Id`) and set internal headers; user
///   tokens get 403 when they try.
/// * Without a token: served only on a loopback listener, from a loopback
///   peer that is not a proxy forwarding someone else's request (no
///   `Forwarded`, `X-Forwarded-For` or `X-Real-IP`), while no token exists
///   at all, and never with platform rights.
///   Revoking the last token therefore never opens a network listener.
///
/// The database checks the token again when each tool call binds with it
/// (engram.bind): this middleware only answers early with 401/403.
pub async fn authenticate(State(state): State<Arc<AuthState>>, mut req: Request, next: Next) -> Response {
    let h = req.headers();
    // A request a proxy forwarded comes from loopback but not from this
    // machine's user: the proxy's forwarding headers say so, or a Host that
    // names the machine by a public name.
    let forwarded = [
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-real-ip",
        "via",
    ]
    .iter()
    .any(|name| h.contains_key(*name))
        || !h
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .is_none_or(loopback_host);
    let peer_loopback = !forwarded
        && req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .is_some_and(|c| c.0.ip().is_loopback());
    let bearer = match header(h, "authorization") {
        Ok(None) => None,
        Ok(Some(v)) => match bearer(v) {
            Ok(token) => Some(token),
            Err(e) => return deny(StatusCode::UNAUTHORIZED, &e),
        },
        Err(e) => return deny(StatusCode::BAD_REQUEST, &e),
    };
    let (owner, platform) = match bearer {
        Some(token) => match state.db.authenticate(token).await {
            Ok(Some(identity)) => {
                state.recent.remember(token, &identity);
                identity
            }
            Ok(None) => {
                state.recent.forget(token);
                return deny(
                    StatusCode::UNAUTHORIZED,
                    "unknown or revoked token; create one with engram.create_token",
                );
            }
            Err(e) if e.unavailable() => match state.recent.identity(token) {
                Some(identity) => identity,
                None => return deny(StatusCode::SERVICE_UNAVAILABLE, &format!("cannot check the token: {e}")),
            },
            Err(e) => return deny(StatusCode::SERVICE_UNAVAILABLE, &format!("cannot check the token: {e}")),
        },
        None if !(state.loopback_listener && peer_loopback) => {
            return deny(
                StatusCode::UNAUTHORIZED,
                "missing token; send Authorization: Bearer <token>",
            )
        }
        // The database decides, as engram.bind(NULL) will: only while it
        // has never had a token.
        None => match state
            .db
            .anonymous_allowed()
            .await
            .inspect(|a| state.recent.set_anonymous(*a))
        {
            Ok(true) => (String::new(), false),
            Err(e) if e.unavailable() && state.recent.anonymous() == Some(true) => (String::new(), false),
            Ok(false) => {
                return deny(
                    StatusCode::UNAUTHORIZED,
                    "missing token; send Authorization: Bearer <token>",
                )
            }
            Err(e) => return deny(StatusCode::SERVICE_UNAVAILABLE, &format!("cannot check tokens: {e}")),
        },
    };
    let user = match header(h, "x-user-id") {
        Ok(v) => v.map(str::to_string),
        Err(e) => return deny(StatusCode::BAD_REQUEST, &e),
    };
    let internal = internal_from_headers(h);
    if !platform {
        if user.is_some() {
            return deny(
                StatusCode::FORBIDDEN,
                "X-User-Id needs a platform token; user tokens (and anonymous requests) act only for their own owner",
            );
        }
        if !matches!(internal, Ok(None)) {
            return deny(
                StatusCode::FORBIDDEN,
                "X-Internal-Type and X-Ghost-* need a platform token",
            );
        }
    }
    let token = bearer.map(str::to_string);
    let session_id = match header(h, "x-session-id").and_then(|s| match s {
        Some(s) => Ok(Some(s)),
        None => header(h, "x-conversation-session-id"),
    }) {
        Ok(v) => v.map(str::to_string),
        Err(e) => return deny(StatusCode::BAD_REQUEST, &e),
    };
    let conversation = match header(h, "mcp-session-id") {
        Ok(Some(mcp)) if user.is_none() && matches!(internal, Ok(None)) => Some(conversation_of(mcp)),
        Ok(_) => None,
        Err(e) => return deny(StatusCode::BAD_REQUEST, &e),
    };
    let caller = Caller {
        token,
        owner: user.clone().unwrap_or(owner),
        act_as: user,
        internal,
        session_id,
        conversation,
        platform,
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// The Host and Origin rules of /mcp (rmcp enforces them there) for the
/// routes outside it, /api and /ui: a page on another site that rebinds its
/// name to this address, or calls it from a browser, is refused before any
/// authentication (anonymous loopback access included).
pub struct SiteGuard {
    pub hosts: Vec<String>,
    pub origins: crate::config::OriginPolicy,
}

/// The host and port a request is addressed to: the Host header, or the
/// URI's authority (HTTP/2's `:authority`). None when it is missing or
/// malformed.
fn authority(req: &Request) -> Option<(String, Option<u16>)> {
    let parse = |a: &str| {
        http::uri::Authority::try_from(a)
            .ok()
            .map(|a| (normalize_host(a.host()), a.port_u16()))
    };
    match req.headers().get("host") {
        Some(v) => v.to_str().ok().and_then(parse),
        None => req.uri().authority().and_then(|a| parse(a.as_str())),
    }
}

fn normalize_host(h: &str) -> String {
    h.trim_matches(['[', ']']).to_ascii_lowercase()
}

/// Whether `--allowed-hosts` admits a request to `host`:`port`: an entry
/// without a port admits the host on any port, one with a port only that
/// port (rmcp's rule for /mcp, applied here to every route).
fn host_allowed(allowed: &[String], host: &str, port: Option<u16>) -> bool {
    let entries: Vec<&str> = allowed.iter().map(|a| a.trim()).filter(|a| !a.is_empty()).collect();
    if allowed.is_empty() {
        return true;
    }
    entries.iter().any(|entry| {
        let (h, p) = match http::uri::Authority::try_from(*entry) {
            Ok(a) => (normalize_host(a.host()), a.port_u16()),
            Err(_) => (normalize_host(entry), None),
        };
        h == host && p.is_none_or(|p| Some(p) == port)
    })
}

/// The outermost layer of every route (/mcp, /api, /ui, /health,
/// /metrics): a request addressed to a host that is not allowed, or sent
/// by a browser page of an origin that is not, is refused before anything
/// else runs. Authentication comes after it, so that a page on another site
/// learns nothing about tokens (a bad and a good token get the same 403).
pub async fn guard_site(State(g): State<Arc<SiteGuard>>, req: Request, next: Next) -> Response {
    let allowed = match authority(&req) {
        Some((host, port)) => host_allowed(&g.hosts, &host, port),
        None => g.hosts.is_empty(),
    };
    if !allowed {
        let shown = req
            .headers()
            .get("host")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        return deny(
            StatusCode::FORBIDDEN,
            &format!(
                "Host '{}' is not allowed; add it to --allowed-hosts (ENGRAM_ALLOWED_HOSTS)",
                crate::limits::clip(shown)
            ),
        );
    }
    if let Some(origin) = req.headers().get("origin") {
        let origin = origin.to_str().unwrap_or("(not text)");
        if !g.origins.allows(origin) {
            return deny(
                StatusCode::FORBIDDEN,
                &format!(
                    "Origin '{}' is not allowed; add it to --allowed-origins (ENGRAM_ALLOWED_ORIGINS)",
                    crate::limits::clip(origin)
                ),
            );
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_loopback_names_are_loopback_hosts() {
        for host in [
            "localhost",
            "localhost:8080",
            "LOCALHOST:1",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.9.9.9",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(loopback_host(host), "{host}");
        }
        for host in [
            "engram.example.com",
            "engram.example.com:443",
            "10.0.0.1:80",
            "[2001:db8::1]:443",
            "localhost.evil.com",
        ] {
            assert!(!loopback_host(host), "{host}");
        }
    }

    #[test]
    fn an_mcp_session_is_stored_as_a_digest() {
        let id = "4b59debf-c297-4ce0-b33e-b4dcf061b6ba";
        let stored = conversation_of(id);
        assert_eq!(stored, conversation_of(id), "stable for the session's life");
        assert!(stored.starts_with("mcp-") && stored.len() == 36, "{stored}");
        assert!(!stored.contains(&id[..8]), "the live id is not readable from it");
        assert_ne!(stored, conversation_of("another-session"));
    }
    #[test]
    fn hosts_are_matched_as_rmcp_matches_them() {
        let allowed: Vec<String> = ["localhost", "127.0.0.1", "::1", "mcp.example.com:8443"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(host_allowed(&allowed, "localhost", Some(8080)));
        assert!(host_allowed(&allowed, "::1", Some(8080)));
        assert!(host_allowed(&allowed, "127.0.0.1", None));
        assert!(host_allowed(&allowed, "mcp.example.com", Some(8443)));
        assert!(!host_allowed(&allowed, "mcp.example.com", Some(80)));
        assert!(!host_allowed(&allowed, "evil.example", Some(8080)));
        assert!(!host_allowed(&allowed, "localhost.evil.example", None));
        assert!(
            host_allowed(&[], "anything", None),
            "an empty list allows any host, as rmcp does"
        );
        assert_eq!(normalize_host("[::1]"), "::1");
        assert_eq!(normalize_host("LocalHost"), "localhost");
    }

    #[test]
    fn overlong_ids_in_headers_are_refused() {
        let long = http::HeaderValue::from_str(&"u".repeat(257)).unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-session-id", long.clone());
        assert!(header(&h, "x-session-id").unwrap_err().contains("limit is 256"));
        let mut h = HeaderMap::new();
        h.insert("authorization", long);
        assert!(header(&h, "authorization").is_ok());
    }

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, http::HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn ambiguous_headers_are_errors() {
        let mut h = HeaderMap::new();
        h.append("x-user-id", http::HeaderValue::from_static("bob"));
        h.append("x-user-id", http::HeaderValue::from_static("alice"));
        assert!(header(&h, "x-user-id").unwrap_err().contains("more than once"));
        assert!(header(&headers(&[("x-user-id", " ")]), "x-user-id")
            .unwrap_err()
            .contains("empty"));
        assert!(internal_from_headers(&headers(&[("x-internal-type", "")])).is_err());
        assert_eq!(
            header(&headers(&[("x-user-id", " bob ")]), "x-user-id"),
            Ok(Some("bob"))
        );
    }

    #[test]
    fn only_recent_answers_of_the_database_are_kept_for_an_outage() {
        let recent = Recent::default();
        assert_eq!(recent.identity("eg_1"), None);
        recent.remember("eg_1", &("alice".into(), false));
        assert_eq!(recent.identity("eg_1"), Some(("alice".into(), false)));
        recent.forget("eg_1");
        assert_eq!(
            recent.identity("eg_1"),
            None,
            "a token the database refused is forgotten"
        );
        assert_eq!(recent.anonymous(), None);
        recent.set_anonymous(true);
        assert_eq!(recent.anonymous(), Some(true));
    }

    #[test]
    fn bearer_scheme_in_any_case_and_nothing_else() {
        assert_eq!(bearer("Bearer eg_1"), Ok("eg_1"));
        assert_eq!(bearer("BEARER eg_1"), Ok("eg_1"));
        assert!(bearer("Basic dXNlcjpwYXNz").is_err());
        assert!(bearer("Bearer ").is_err());
        assert!(bearer("eg_1").is_err());
    }

    #[test]
    fn no_internal_headers_means_no_internal_context() {
        assert_eq!(internal_from_headers(&headers(&[])), Ok(None));
    }

    #[test]
    fn user_ghost_headers_build_the_seed_tags() {
        let i = internal_from_headers(&headers(&[
            ("x-internal-type", "ghost"),
            ("x-ghost-type", "user"),
            ("x-ghost-owner", "alice"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(i.tags, vec!["ghost", "ghost_type:user", "ghost_owner:user:alice"]);
        assert_eq!(i.scope, vec!["ghost_type:user", "ghost_owner:user:alice"]);
    }

    #[test]
    fn incomplete_or_stray_headers_are_errors() {
        assert!(internal_from_headers(&headers(&[("x-internal-type", "ghost")])).is_err());
        assert!(internal_from_headers(&headers(&[("x-internal-type", "ghost"), ("x-ghost-type", "user")])).is_err());
        assert!(internal_from_headers(&headers(&[("x-ghost-owner", "alice")])).is_err());
        assert!(internal_from_headers(&headers(&[("x-internal-type", "wraith")])).is_err());
        let agent = internal_from_headers(&headers(&[("x-internal-type", "agent")]))
            .unwrap()
            .unwrap();
        assert_eq!(agent.tags, vec!["agent"]);
        assert!(agent.scope.is_empty());
    }
}
