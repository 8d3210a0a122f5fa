//! engram-mcp: the MCP server in front of the engram extension.

mod background;
mod body_deadline;
mod caller;
mod compat;
mod config;
mod db;
mod jsonrpc;
mod limits;
mod metrics;
mod stdio;
mod summarizer;
mod tls;
mod tools;
mod transfer;
mod ui;
mod v1;

use anyhow::{bail, Context};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{middleware, Json, Router};
use clap::Parser;
use config::{Cli, Command, CommonArgs, EmbedderArgs, EmbedderKind, OriginPolicy, ServeArgs};
use engram_embed::cache::Cached;
use engram_embed::http::{HttpOptions, OllamaEmbedder, OpenAiEmbedder};
use engram_embed::local::LocalEmbedder;
use engram_embed::onnx::OnnxEmbedder;
use engram_embed::Embedder;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tools::{EngramServer, Shared};

/// Texts whose embeddings the cache keeps (about 1.5 KiB each at 384 dimensions).
const EMBED_CACHE_ENTRIES: usize = 10_000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let command = Cli::parse().command;
    init_logging(&command);
    match command {
        Command::Serve(args) => serve(args).await,
        Command::Stdio(args) => stdio::run(args).await,
        Command::Export(args) => transfer::export(args).await,
        Command::Import(args) => transfer::import(args).await,
    }
}

/// Logs go to standard error in every mode: over stdio, standard output is
/// the protocol. RUST_LOG overrides the defaults: engram-mcp's own events
/// from `info` up for the HTTP server and the file tools, warnings only over
/// stdio (a desktop client shows a subprocess's standard error as its log,
/// and a conversation should not fill it), and warnings only from the
/// libraries (ONNX Runtime alone writes hundreds of lines at `info` while it
/// loads the model). Colour only on a terminal.
fn init_logging(command: &Command) {
    use std::io::IsTerminal;
    let default = match command {
        Command::Stdio(_) => "warn",
        _ => "warn,engram_mcp=info",
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into()))
        .init();
}

/// --model-dir, else where an installed engram-mcp keeps the model.
fn model_dir(args: &EmbedderArgs) -> std::path::PathBuf {
    args.model_dir.clone().unwrap_or_else(compat::default_model_dir)
}

/// --onnx-runtime, else where an installed engram-mcp keeps ONNX Runtime.
fn onnx_runtime(args: &EmbedderArgs) -> std::path::PathBuf {
    args.onnx_runtime.clone().unwrap_or_else(compat::default_onnx_runtime)
}

pub(crate) fn build_embedder(args: &EmbedderArgs, dims: usize) -> anyhow::Result<Box<dyn Embedder>> {
    let service = |what: &str| -> anyhow::Result<(String, String)> {
        let url = args
            .url
            .clone()
            .with_context(|| format!("--embedder {what} needs --embedder-url"))?;
        let model = args
            .model
            .clone()
            .with_context(|| format!("--embedder {what} needs --embedder-model"))?;
        Ok((url, model))
    };
    let options = HttpOptions {
        api_key: args.api_key.clone(),
        ..HttpOptions::default()
    };
    Ok(match args.kind {
        EmbedderKind::Local => Box::new(OnnxEmbedder::load(&model_dir(args), &onnx_runtime(args))?),
        EmbedderKind::LocalF32 => Box::new(LocalEmbedder::load(&model_dir(args))?),
        EmbedderKind::Openai => {
            let (url, model) = service("openai")?;
            Box::new(OpenAiEmbedder::new(&url, &model, dims, options)?)
        }
        EmbedderKind::Ollama => {
            let (url, model) = service("ollama")?;
            Box::new(OllamaEmbedder::new(&url, &model, dims, options)?)
        }
    })
}

/// The image embedder `--vision` asks for, or None without `--vision`
/// (image flags without it are a mistake worth an error).
pub(crate) fn build_image_embedder(
    args: &CommonArgs,
    dims: usize,
) -> anyhow::Result<Option<Box<dyn engram_embed::vision::ImageEmbedder>>> {
    use config::ImageEmbedderKind;
    use engram_embed::vision::{clip::ClipEmbedder, http::OpenAiImageEmbedder};
    if !args.vision {
        if args.image_embedder.is_some() || args.image_embedder_url.is_some() || args.image_model_dir.is_some() {
            bail!("--image-embedder, --image-embedder-url and --image-model-dir take effect only with --vision; add --vision");
        }
        return Ok(None);
    }
    let kind = args.image_embedder.unwrap_or(if args.image_embedder_url.is_some() {
        ImageEmbedderKind::Openai
    } else {
        ImageEmbedderKind::Local
    });
    Ok(Some(match kind {
        ImageEmbedderKind::Openai => {
            let url = args.image_embedder_url.clone().context(
                "--vision with --image-embedder openai needs --image-embedder-url (a CLIP server's base URL)",
            )?;
            let options = HttpOptions {
                api_key: args.image_embedder_api_key.clone(),
                ..HttpOptions::default()
            };
            Box::new(OpenAiImageEmbedder::new(
                &url,
                &args.image_embedder_model,
                dims,
                options,
            )?)
        }
        ImageEmbedderKind::Local => {
            let dir = args.image_model_dir.clone().context(
                "--vision needs an image embedder: --image-embedder-url URL (a CLIP server), or --image-embedder \
                 local --image-model-dir DIR (CLIP weights: config.json, model.safetensors, tokenizer.json)",
            )?;
            Box::new(ClipEmbedder::load(&dir)?)
        }
    }))
}

/// What every server mode starts with: the database checked (login role,
/// dimension), the embedder loaded and probed, the background worker
/// running.
pub(crate) struct Started {
    pub shared: Arc<Shared>,
    pub db: db::Db,
    pub role: String,
    pub dims: i32,
}

/// Why vectors of `model` may not go into a database whose vectors come
/// from `recorded` (None: they may). Two models of one dimension would mix
/// two vector spaces, and nothing else would notice.
pub(crate) fn model_mismatch(recorded: Option<&str>, model: &str) -> Option<String> {
    match recorded {
        Some(r) if r != model => Some(format!(
            "the database's embeddings come from model {r}, but this engram-mcp embeds with {model}; start it \
             with the embedder of {r}, or re-embed into a new database with this one: engram-mcp export \
             --all-owners --out all.jsonl from this database, SELECT engram.configure(embedding_model => '{model}') \
             in the new one, then engram-mcp import --all-owners --reembed all.jsonl there (docs/OPERATIONS.md)"
        )),
        _ => None,
    }
}

/// Refuses to serve with another model than the one on record.
async fn check_model(db: &db::Db, model: &str) -> anyhow::Result<()> {
    let recorded = db
        .embedding_model()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the engram database: {e}"))?;
    if let Some(why) = model_mismatch(recorded.as_deref(), model) {
        bail!(why);
    }
    match recorded {
        Some(_) => Ok(()),
        None => {
            tracing::warn!(
                model,
                "no embedding model on record; a DBA records this one with \
                 SELECT engram.configure(embedding_model => '{model}'), so that another model is refused"
            );
            Ok(())
        }
    }
}

pub(crate) async fn start(args: &CommonArgs) -> anyhow::Result<Started> {
    // Flags first: a typo should not wait for the model to load.
    let mut groups = tools::Groups::parse(&args.tools).map_err(|e| anyhow::anyhow!(e))?;
    groups.vision = args.vision;
    groups.output_schemas = args.output_schemas;
    let limits = db::Limits {
        pool_wait: std::time::Duration::from_millis(args.pool_wait_ms),
        statement_timeout: std::time::Duration::from_millis(args.statement_timeout_ms),
    };
    let db = db::Db::connect(
        &args.database_url,
        args.read_database_url.as_deref(),
        args.pool_size,
        &limits,
    )?;
    let role = db
        .check_login_role()
        .await
        .map_err(|e| anyhow::anyhow!("cannot use the engram database: {e}"))?;
    db.check_extension()
        .await
        .map_err(|e| anyhow::anyhow!("cannot use the engram database: {e}"))?;
    if let Some(replica) = db.replica() {
        replica
            .check_login_role()
            .await
            .map_err(|e| anyhow::anyhow!("cannot use the read replica (--read-database-url): {e}"))?;
        replica
            .check_extension()
            .await
            .map_err(|e| anyhow::anyhow!("cannot use the read replica (--read-database-url): {e}"))?;
    }
    let dims = db
        .dims()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the engram database: {e}"))?;
    let embedder = build_embedder(&args.embedder, dims as usize)?;
    if embedder.dims() != dims as usize {
        bail!(
            "the embedder {} produces {} dimensions but the database stores {dims}; run \
             SELECT engram.configure(embedding_dims => {}) while it holds no embeddings, or pick another model",
            embedder.name(),
            embedder.dims(),
            embedder.dims()
        );
    }
    check_model(&db, &embedder.model()).await?;
    // A check against a real embedding service at start-up, not at the first call.
    let probe = embedder.embed(&["engram start-up check".to_string()]).await?;
    engram_embed::check_dims(&probe, dims as usize)?;
    let vision = if args.vision {
        let image_dims = db.image_dims().await.map_err(|e| {
            anyhow::anyhow!(
                "--vision needs engram 0.6.0 or later in the database (ALTER EXTENSION engram UPDATE); \
                     reading the image dimension failed: {e}"
            )
        })?;
        let vision = build_image_embedder(args, image_dims as usize)?.context("--vision without an image embedder")?;
        if vision.dims() != image_dims as usize {
            bail!(
                "the image embedder {} produces {} dimensions but the database stores {image_dims} for images; \
                 run SELECT engram.configure(image_dims => {}) while no image holds an embedding, or pick \
                 another model",
                vision.name(),
                vision.dims(),
                vision.dims()
            );
        }
        // As for text: a real check against the service at start-up.
        let probe = vision.embed_texts(&["engram start-up check".to_string()]).await?;
        engram_embed::check_dims(&probe, image_dims as usize)?;
        tracing::info!(image_embedder = %vision.name(), image_dims, "vision memories on");
        Some(vision)
    } else {
        build_image_embedder(args, 0)?
    };
    let summarizer = match &args.summarizer_url {
        Some(url) => Some(summarizer::Summarizer::new(
            url,
            &args.summarizer_model,
            args.summarizer_api_key.clone(),
            std::time::Duration::from_secs(args.summarizer_timeout_s),
        )?),
        None => None,
    };
    let (background, worker) = tools::Background::new(
        std::time::Duration::from_millis(args.embed_batch_wait_ms),
        summarizer,
        vision.is_some(),
    );
    let shared = Arc::new(Shared {
        db: db.clone(),
        embedder: Cached::new(embedder, EMBED_CACHE_ENTRIES),
        metrics: Default::default(),
        groups,
        conflict_threshold: args.conflict_threshold,
        turn_context: args.turn_context,
        background,
        subscribers: Default::default(),
        vision,
    });
    tokio::spawn(background::run(shared.clone(), worker));
    Ok(Started { shared, db, role, dims })
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let origins = config::origin_policy(&args.allowed_origins)?;
    let origins_for_site = origins.clone();
    let Started { shared, db, role, dims } = start(&args.common).await?;
    if !args.listen.ip().is_loopback() && !db.has_tokens().await.map_err(|e| anyhow::anyhow!("{e}"))? {
        bail!(
            "refusing to listen on {} without tokens: anyone could read and write memories. Create one with \
             SELECT engram.create_token(owner => '...', label => '...'), or listen on 127.0.0.1",
            args.listen
        );
    }

    let cancel = CancellationToken::new();
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(args.allowed_hosts.clone())
        .with_cancellation_token(cancel.child_token());
    config = match origins {
        OriginPolicy::Any => config.disable_allowed_origins(),
        OriginPolicy::Only(origins) => config.with_allowed_origins(origins).enforce_origin_validation(),
    };
    let factory = {
        let shared = shared.clone();
        move || Ok(EngramServer::new(shared.clone()))
    };
    let auth = Arc::new(caller::AuthState {
        db: db.clone(),
        loopback_listener: args.listen.ip().is_loopback(),
        recent: Default::default(),
    });
    let mcp = if args.stateless {
        config.legacy_session_mode = false;
        config.json_response = true;
        Router::new().nest_service(
            "/mcp",
            StreamableHttpService::new(factory, Arc::new(NeverSessionManager::default()), config),
        )
    } else {
        config.legacy_session_mode = true;
        Router::new().nest_service(
            "/mcp",
            StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config),
        )
    };
    let guard = Arc::new(caller::SiteGuard {
        hosts: args.allowed_hosts.clone(),
        origins: origins_for_site,
    });
    let health_state = Arc::new(Health {
        shared: shared.clone(),
        interval: std::time::Duration::from_millis(args.health_interval_ms),
        last: Default::default(),
    });
    // /metrics counts every owner's calls: behind authentication (platform
    // tokens) unless --metrics-open mounts it beside /health.
    let metrics_route = Router::new().route(
        "/metrics",
        get(metrics).with_state(Arc::new(MetricsState {
            shared: shared.clone(),
            open: args.metrics_open,
        })),
    );
    let (authenticated_metrics, open_metrics) = if args.metrics_open {
        (Router::new(), metrics_route)
    } else {
        (metrics_route, Router::new())
    };
    // Layers run outside-in in the reverse order of `.layer` calls: the
    // Host/Origin guard is the outermost layer of every route, then
    // authentication (for /mcp, /api and /metrics), then each route's own.
    let (rest, openapi) = v1::router(shared.clone());
    let app = mcp
        .layer(middleware::from_fn(jsonrpc::check))
        .layer(middleware::map_response(session_deleted_is_no_content))
        .merge(rest)
        .merge(v1::aliases::router(shared.clone()))
        .merge(authenticated_metrics)
        .layer(middleware::from_fn_with_state(auth, caller::authenticate))
        .merge(ui::router())
        .merge(v1::document_route(openapi))
        .merge(
            Router::new()
                .route("/health", get(health))
                .with_state(health_state)
                .merge(open_metrics),
        )
        // an explicit fallback, so that the guard covers unknown paths too
        .fallback(|| async {
            caller::deny(
                StatusCode::NOT_FOUND,
                "no such route; MCP is at /mcp, the JSON API at /v1",
            )
        })
        .layer(middleware::from_fn_with_state(guard, caller::guard_site))
        // every error under /v1, the guard's and authentication's included, as problem details
        .layer(middleware::from_fn(v1::problems_under_v1));

    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    tracing::info!(
        listen = %args.listen,
        embedder = %shared.embedder.name(),
        dims,
        db_role = %role,
        stateless = args.stateless,
        max_connections = args.max_connections,
        "engram-mcp serving MCP at {scheme}://{}/mcp",
        args.listen
    );
    let limits = ConnectionLimits {
        max: args.max_connections as usize,
        header_timeout: std::time::Duration::from_millis(args.header_timeout_ms),
        body_timeout: std::time::Duration::from_millis(args.body_timeout_ms),
        body_deadline: std::time::Duration::from_millis(args.body_deadline_ms),
        tls,
    };
    serve_connections(listener, app, limits, async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        cancel.cancel();
    })
    .await;
    Ok(())
}

/// What one client may hold of the server: connections at once, and how
/// long it may take to send a request's headers and each piece of its body.
struct ConnectionLimits {
    max: usize,
    header_timeout: std::time::Duration,
    body_timeout: std::time::Duration,
    body_deadline: std::time::Duration,
    /// HTTPS: each connection's handshake, within `header_timeout`.
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// The accept loop (HTTP/1.1): at most `limits.max` connections are open
/// at once (the next waits in the kernel's listen queue, holding no file
/// descriptor of this process, until one closes); a connection that does
/// not send a request's headers within `header_timeout` is closed (hyper's
/// header read timeout, which also ends idle kept-alive connections); a
/// request body that stalls for `body_timeout`, or is not complete after
/// `body_deadline`, fails. The peer address goes
/// into each request (ConnectInfo): it decides whether an anonymous request
/// may be served. On shutdown the loop stops accepting, and open
/// connections finish their requests (at most 5 s).
async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let open = Arc::new(tokio::sync::Semaphore::new(limits.max));
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let http = Arc::new(http);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            permit = open.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of file descriptors, say: wait rather than spin.
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            app: app.clone(),
            http: http.clone(),
            peer,
            body_timeout: limits.body_timeout,
            body_deadline: limits.body_deadline,
            closed: closed.clone(),
        };
        let (tls, handshake_timeout) = (limits.tls.clone(), limits.header_timeout);
        tokio::spawn(async move {
            let _permit = permit;
            match tls {
                None => connection.serve(stream).await,
                // A client that does not finish its handshake in time is
                // cut off like one that does not send its headers.
                Some(tls) => match tokio::time::timeout(handshake_timeout, tls.accept(stream)).await {
                    Ok(Ok(stream)) => connection.serve(stream).await,
                    Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                },
            }
        });
    }
    let _ = closing.send(true);
    // Wait (a while) for the open connections to finish.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(6), open.acquire_many(limits.max as u32)).await;
}

/// One accepted connection, served until it ends or the server shuts down.
struct Connection {
    app: Router,
    http: Arc<hyper::server::conn::http1::Builder>,
    peer: std::net::SocketAddr,
    body_timeout: std::time::Duration,
    body_deadline: std::time::Duration,
    closed: tokio::sync::watch::Receiver<bool>,
}

impl Connection {
    async fn serve<S>(self, stream: S)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        use tower::ServiceExt;
        let Connection {
            app,
            http,
            peer,
            body_timeout,
            body_deadline,
            mut closed,
        } = self;
        let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let mut req = req.map(|body| {
                let gaps = tower_http::timeout::TimeoutBody::new(body_timeout, body);
                axum::body::Body::new(body_deadline::DeadlineBody::new(gaps, body_deadline))
            });
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo::<std::net::SocketAddr>(peer));
            app.clone().oneshot(req)
        });
        let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        tokio::pin!(conn);
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            }
            _ = async move {
                let _ = closed.wait_for(|c| *c).await;
            } => {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn).await;
            }
        }
    }
}

/// Ctrl-C or SIGTERM (what `scripts/run --stop`, systemd and Kubernetes send).
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// rmcp answers a session's DELETE with 202, which the MCP spec leaves open
/// but the Python SDK logs as "Session termination failed: 202". The session
/// is gone when rmcp answers, so 204 says the same thing in the form clients expect.
async fn session_deleted_is_no_content(
    method: axum::http::Method,
    mut response: axum::response::Response,
) -> axum::response::Response {
    if method == axum::http::Method::DELETE && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

/// GET /health's state: its last answer and when it was made.
struct Health {
    shared: Arc<Shared>,
    interval: std::time::Duration,
    last: tokio::sync::Mutex<Option<(std::time::Instant, StatusCode, serde_json::Value)>>,
}

/// GET /health: the database and the embedder (and the image embedder with
/// --vision), checked at most once per `--health-interval-ms` however often
/// it is called (an unauthenticated caller cannot make the server run an
/// embedder inference per request); callers that arrive during a check
/// wait for it and share its answer. A failed check is reused for at most a
/// second, so that recovery shows quickly.
async fn health(State(h): State<Arc<Health>>) -> impl IntoResponse {
    let mut last = h.last.lock().await;
    if let Some((at, status, body)) = last.as_ref() {
        let keep = if *status == StatusCode::OK {
            h.interval
        } else {
            h.interval.min(std::time::Duration::from_secs(1))
        };
        if at.elapsed() < keep {
            return (*status, Json(body.clone()));
        }
    }
    let (status, body) = check_health(&h.shared).await;
    *last = Some((std::time::Instant::now(), status, body.clone()));
    (status, Json(body))
}

async fn check_health(shared: &Shared) -> (StatusCode, serde_json::Value) {
    let database = shared
        .db
        .ping()
        .await
        .map(|_| "ok".to_string())
        .unwrap_or_else(|e| e.to_string());
    // Past the cache: a health check must reach the provider itself.
    let embedder = match shared
        .embedder
        .inner()
        .embed(&["engram health check".to_string()])
        .await
    {
        Ok(_) => "ok".to_string(),
        Err(e) => e.to_string(),
    };
    // With --vision, the image embedder is checked the same way.
    let image_embedder = match shared.vision.as_deref() {
        Some(v) => Some(match v.embed_texts(&["engram health check".to_string()]).await {
            Ok(_) => "ok".to_string(),
            Err(e) => e.to_string(),
        }),
        None => None,
    };
    let ok = database == "ok" && embedder == "ok" && image_embedder.as_deref().is_none_or(|s| s == "ok");
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut body = serde_json::json!({
        "status": if ok { "ok" } else { "degraded" },
        "database": database,
        "embedder": embedder,
        "model": shared.embedder.name(),
        "embedding_model": shared.embedder.model(),
    });
    if let (Some(state), Some(v)) = (image_embedder, shared.vision.as_deref()) {
        body["image_embedder"] = state.into();
        body["image_model"] = v.name().into();
    }
    (status, body)
}

/// GET /metrics's state: the counters, and whether --metrics-open serves
/// them without a token.
struct MetricsState {
    shared: Arc<Shared>,
    open: bool,
}

/// GET /metrics: the calls of every owner, so, unless --metrics-open, only
/// for platform tokens, and for anonymous loopback callers while no token
/// exists (they may call every tool then anyway). caller::authenticate has
/// answered a missing or unknown token with 401 before this runs; a request
/// that reaches here unauthenticated is refused rather than served.
async fn metrics(
    State(m): State<Arc<MetricsState>>,
    who: Option<axum::Extension<caller::Caller>>,
) -> axum::response::Response {
    if !m.open {
        match who.as_deref() {
            Some(c) if c.platform || c.token.is_none() => {}
            Some(_) => {
                return caller::deny(
                    StatusCode::FORBIDDEN,
                    "/metrics counts the calls of every owner: send a platform token's \
                     Authorization: Bearer header (engram.create_token(..., platform => true))",
                )
            }
            None => {
                return caller::deny(
                    StatusCode::UNAUTHORIZED,
                    "missing token; send Authorization: Bearer <platform token>",
                )
            }
        }
    }
    let shared = &m.shared;
    (
        [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        shared.metrics.render(shared.embedder.stats(), shared.db.pool_status()),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn another_model_than_the_recorded_one_is_refused() {
        assert!(super::model_mismatch(None, "local:all-MiniLM-L6-v2").is_none());
        assert!(super::model_mismatch(Some("local:all-MiniLM-L6-v2"), "local:all-MiniLM-L6-v2").is_none());
        let why = super::model_mismatch(Some("openai:text-embedding-3-small"), "local:all-MiniLM-L6-v2").unwrap();
        assert!(
            why.contains("openai:text-embedding-3-small") && why.contains("--reembed"),
            "{why}"
        );
    }
}
