//! Command line and environment: every flag is also an ENGRAM_* variable.

use clap::{Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "engram-mcp",
    version = crate::compat::VERSION,
    about = "engram's MCP server (Streamable HTTP at /mcp)",
    long_about = "engram-mcp authenticates MCP clients with bearer tokens from engram.create_token, maps \
                  the X-Internal-Type / X-Ghost-* / X-Session-Id headers to a scope, embeds text (a built-in \
                  offline model by default), and calls one engram SQL function per tool call in a \
                  transaction bound with the caller's own token (engram.bind). It logs in as a role that \
                  is only a member of engram_agent (never a superuser), so the database, not the adapter, \
                  decides what each call may touch."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve MCP over Streamable HTTP (POST/GET/DELETE /mcp), plus GET /health and GET /metrics (platform
    /// tokens, unless --metrics-open).
    Serve(ServeArgs),
    /// Serve MCP over standard input and output, for desktop clients that launch their servers as
    /// subprocesses. The caller's token comes from ENGRAM_TOKEN; logs go to standard error.
    Stdio(StdioArgs),
    /// Write every memory of one owner (any status, with embedding, tags, metadata and revisions) to a
    /// JSON Lines file. Needs a role that may run engram.export_memories (a DBA).
    Export(ExportArgs),
    /// Read a file written by export back into the database, keeping ids, timestamps, status and
    /// revisions. Idempotent: memories already there are skipped. Needs a role that may run
    /// engram.import_memory (a DBA).
    Import(ImportArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    /// Postgres connection string of the database to export from.
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// The owner whose memories to export.
    #[arg(long, required_unless_present = "all_owners")]
    pub owner: Option<String>,
    /// Export every owner's memories (each line names its owner; `import --all-owners` writes each back to
    /// it), in one snapshot.
    #[arg(long, conflicts_with = "owner")]
    pub all_owners: bool,
    /// The file to write (replaced only once the export is complete); `-` for standard output.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
    /// The JSON Lines file `engram-mcp export` wrote.
    pub file: PathBuf,
    /// Import into this owner instead of the one each memory names. Without it, every memory of the file
    /// must name the same owner (a file with several owners is refused), unless --all-owners.
    #[arg(long)]
    pub owner: Option<String>,
    /// Import each memory into the owner it names (a file `export --all-owners` wrote).
    #[arg(long, conflicts_with = "owner")]
    pub all_owners: bool,
    /// Keep the provenance the file states (source, author_type, trust_score, revision authors). Without
    /// it, imported memories are plain memories written by an agent, with trust computed anew, and their
    /// revisions are attributed to the importing role: a file cannot vouch for itself.
    #[arg(long)]
    pub keep_provenance: bool,
    /// Compute new embeddings with the configured embedder (--embedder ...) instead of the exported ones:
    /// for a database that uses another model. Without it, exported embeddings of another dimension are
    /// refused before anything is written.
    #[arg(long)]
    pub reembed: bool,
    /// Postgres connection string of the database to import into.
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    #[command(flatten)]
    pub embedder: EmbedderArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EmbedderKind {
    /// all-MiniLM-L6-v2 in-process with int8 weights on ONNX Runtime (384 dimensions), no network
    Local,
    /// the same model in f32 with candle: the reference vectors, about three times slower
    #[value(name = "local-f32")]
    LocalF32,
    /// an OpenAI-compatible POST {url}/v1/embeddings
    Openai,
    /// Ollama's POST {url}/api/embed
    Ollama,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ImageEmbedderKind {
    /// an OpenAI-compatible POST {url}/v1/embeddings taking image data URIs (--image-embedder-url)
    Openai,
    /// CLIP in safetensors, run in-process by candle (--image-model-dir)
    Local,
}

/// `engram-mcp serve`: the HTTP listener's own flags, then the common ones.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on. A non-loopback address requires at least one token (engram.create_token);
    /// requests without a token are served only on a loopback address, from loopback, while no token exists.
    #[arg(long, env = "ENGRAM_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Host names accepted in the Host header (DNS-rebinding protection), comma separated.
    #[arg(
        long,
        env = "ENGRAM_ALLOWED_HOSTS",
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1,::1"
    )]
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted in the Origin header (scheme://host[:port|:*]), comma separated. Requests
    /// without an Origin (every non-browser client) always pass; "*" accepts any origin, "" none.
    #[arg(
        long,
        env = "ENGRAM_ALLOWED_ORIGINS",
        value_delimiter = ',',
        default_value = "http://localhost:*,http://127.0.0.1:*,http://[::1]:*,https://localhost:*,https://127.0.0.1:*,https://[::1]:*"
    )]
    pub allowed_origins: Vec<String>,
    /// Serve HTTPS with this PEM certificate chain (the server's certificate first); needs --tls-key. Read
    /// again when the file changes, so a renewed certificate needs no restart.
    #[arg(long, env = "ENGRAM_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert (PKCS#8, RSA or EC).
    #[arg(long, env = "ENGRAM_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve without MCP sessions: every POST is answered with plain JSON.
    #[arg(long, env = "ENGRAM_STATELESS")]
    pub stateless: bool,
    /// Serve GET /metrics without a token. Without it /metrics, which counts the calls of every owner,
    /// answers only requests with a platform token's Authorization: Bearer header (or, while no token
    /// exists, loopback callers). For a scraper that cannot send a bearer token, on a trusted network.
    #[arg(long, env = "ENGRAM_METRICS_OPEN")]
    pub metrics_open: bool,
    /// Most client connections open at once; further connections wait in the listen queue until one
    /// closes (a flood of idle connections cannot exhaust the process's file descriptors).
    #[arg(long, env = "ENGRAM_MAX_CONNECTIONS", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Milliseconds a client has to send a request's headers, counted from when the server starts
    /// waiting for them (also the idle limit of a kept-alive connection); slower connections are closed.
    #[arg(long, env = "ENGRAM_HEADER_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_ms: u64,
    /// Milliseconds a request body may stall between two pieces of data; a stalled upload is
    /// answered with an error and its connection closed.
    #[arg(long, env = "ENGRAM_BODY_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_ms: u64,
    /// Milliseconds a request body may take in all, however steadily it trickles in; a slower upload
    /// is answered with an error and its connection closed (10 MiB, the largest image, at this default
    /// needs about 90 kB/s).
    #[arg(long, env = "ENGRAM_BODY_DEADLINE_MS", default_value_t = 120_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_deadline_ms: u64,
    /// Milliseconds GET /health reuses its last check of the database and the embedder (at most one
    /// check per interval however often it is called; a failed check is reused for at most a second).
    #[arg(long, env = "ENGRAM_HEALTH_INTERVAL_MS", default_value_t = 5_000)]
    pub health_interval_ms: u64,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `engram-mcp stdio`: one caller for the life of the process, the one its
/// token names. The token is read from ENGRAM_TOKEN only (never a flag: a
/// command line shows in `ps`); without one, stdio is served only while the
/// database has never had a token (the local owner). Internal contexts
/// (X-Internal-Type, X-Ghost-*) and X-User-Id have no stdio form: a platform
/// agent that needs them talks HTTP.
#[derive(clap::Args, Debug, Clone)]
pub struct StdioArgs {
    /// The conversation's session id (memory_capture, memory_context, memory_summarize). Default: a new
    /// id for each run, so each conversation a desktop client starts is a session of its own; give one to
    /// continue a session across runs.
    #[arg(long, env = "ENGRAM_SESSION_ID")]
    pub session_id: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// How text is embedded: what the servers and `import --reembed` share.
#[derive(clap::Args, Debug, Clone)]
pub struct EmbedderArgs {
    /// Embedding provider.
    #[arg(long = "embedder", env = "ENGRAM_EMBEDDER", value_enum, default_value_t = EmbedderKind::Local)]
    pub kind: EmbedderKind,
    /// Base URL of the embedding service (openai, ollama), e.g. http://127.0.0.1:11434.
    #[arg(long = "embedder-url", env = "ENGRAM_EMBEDDER_URL")]
    pub url: Option<String>,
    /// Embedding model name for the service (openai, ollama).
    #[arg(long = "embedder-model", env = "ENGRAM_EMBEDDER_MODEL")]
    pub model: Option<String>,
    /// API key sent as a bearer token to the embedding service.
    #[arg(long = "embedder-api-key", env = "ENGRAM_EMBEDDER_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Directory of the local model: tokenizer.json, plus model-int8.onnx (local) or config.json and
    /// model.safetensors (local-f32). scripts/setup unpacks all of them. Default: under share/engram beside
    /// the binary's directory (the Debian package: /usr/share/engram/models/all-MiniLM-L6-v2), else
    /// models/all-MiniLM-L6-v2 there (scripts/run's .engram/bin/engram-mcp finds .engram/models/...); never
    /// the working directory.
    #[arg(long, env = "ENGRAM_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
    /// The ONNX Runtime shared library the local embedder loads at start-up (from PyPI's onnxruntime
    /// wheel). Default: lib/libonnxruntime.so found as --model-dir is.
    #[arg(long, env = "ENGRAM_ONNX_RUNTIME")]
    pub onnx_runtime: Option<PathBuf>,
}

/// What every server mode needs: the database, the embedder, the tools.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Postgres connection string (libpq key=value or URL) of a database with the engram extension.
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// A hot standby of that database (streaming replication): the read-only tools (memory_search,
    /// memory_recall, memory_list, memory_context, ...) are served there, writes by the primary. Replication
    /// is asynchronous unless the primary says otherwise, so a read may briefly miss a write just made
    /// (see docs/SCALING.md). When the standby is unreachable, reads fall back to the primary.
    #[arg(long, env = "ENGRAM_READ_DATABASE_URL", hide_env_values = true)]
    pub read_database_url: Option<String>,
    #[command(flatten)]
    pub embedder: EmbedderArgs,
    /// Tool groups to serve, or `all`: basic (memory_remember, _search, _recall, _update, _forget and
    /// _context: what most agents need), core (the memory_* tools: also _list, _flag, _reopen, _consolidate,
    /// _crystallize, _entities, _about), internal (the five memory_internal_* tools, listed only to requests
    /// with X-Internal-Type), workspace (memory_workspace_*, memory_state_*), events (memory_capture,
    /// memory_context, memory_summarize, memory_sessions), slots (memory_slot_*), sharing (memory_grant,
    /// memory_revoke_grant, memory_publish, memory_unpublish). Tools of other groups are neither listed nor
    /// callable. The default lists 6 tools, about 7.5 KB of tools/list on every agent turn; `all` lists 34.
    #[arg(long, env = "ENGRAM_TOOLS", value_delimiter = ',', default_value = "basic,internal")]
    pub tools: Vec<String>,
    /// List each tool's outputSchema in tools/list (results are structured either way). Off by default: the
    /// schemas add about as much to every agent turn as the tools' arguments do.
    #[arg(long, env = "ENGRAM_OUTPUT_SCHEMAS")]
    pub output_schemas: bool,
    /// Serve vision memories: the `vision` tool group (memory_image_put, memory_vision_search), with
    /// the image embedder --image-embedder picks. Off by default; without it those tools are not listed.
    #[arg(long, env = "ENGRAM_VISION")]
    pub vision: bool,
    /// The image embedder of --vision: `openai`, an OpenAI-compatible POST {url}/v1/embeddings that takes image
    /// data URIs and texts in one space (a CLIP server; --image-embedder-url), or `local`, CLIP weights in
    /// safetensors run in-process by candle (--image-model-dir). Default: openai with --image-embedder-url,
    /// else local.
    #[arg(long, env = "ENGRAM_IMAGE_EMBEDDER", value_enum)]
    pub image_embedder: Option<ImageEmbedderKind>,
    /// Base URL of the image-embedding service, e.g. http://127.0.0.1:8000.
    #[arg(long, env = "ENGRAM_IMAGE_EMBEDDER_URL")]
    pub image_embedder_url: Option<String>,
    /// The model name sent to the image-embedding service.
    #[arg(long, env = "ENGRAM_IMAGE_EMBEDDER_MODEL", default_value = "clip")]
    pub image_embedder_model: String,
    /// Bearer key for the image-embedding service, if it needs one.
    #[arg(long, env = "ENGRAM_IMAGE_EMBEDDER_API_KEY", hide_env_values = true)]
    pub image_embedder_api_key: Option<String>,
    /// Directory of a CLIP model for --image-embedder local, in Hugging Face's layout: config.json,
    /// model.safetensors and tokenizer.json (e.g. openai/clip-vit-base-patch32; 512 dimensions).
    #[arg(long, env = "ENGRAM_IMAGE_MODEL_DIR")]
    pub image_model_dir: Option<PathBuf>,
    /// An OpenAI-compatible chat API (base URL, e.g. http://127.0.0.1:8000/v1) that writes session summaries
    /// when they come due (engram.summary_every events). Without it, agents write them with memory_summarize.
    #[arg(long, env = "ENGRAM_SUMMARIZER_URL")]
    pub summarizer_url: Option<String>,
    /// The chat model the summarizer asks.
    #[arg(long, env = "ENGRAM_SUMMARIZER_MODEL", default_value = "gpt-4o-mini")]
    pub summarizer_model: String,
    /// Bearer key for the summarizer, if it needs one.
    #[arg(long, env = "ENGRAM_SUMMARIZER_API_KEY", hide_env_values = true)]
    pub summarizer_api_key: Option<String>,
    /// Seconds to wait for a summary.
    #[arg(long, env = "ENGRAM_SUMMARIZER_TIMEOUT_S", default_value_t = 60)]
    pub summarizer_timeout_s: u64,
    /// Milliseconds the background embedder waits after a capture before it embeds the backlog, so that one
    /// batch takes a burst of captures.
    #[arg(long, env = "ENGRAM_EMBED_BATCH_WAIT_MS", default_value_t = 20)]
    pub embed_batch_wait_ms: u64,
    /// Cosine similarity at which memory_remember reports a conflict (calibrated for the local model; see docs/MCP.md).
    #[arg(long, env = "ENGRAM_CONFLICT_THRESHOLD")]
    pub conflict_threshold: Option<f32>,
    /// Embed each conversation turn (an episodic memory of a session) with the turn before it; the stored
    /// text and the full-text search keep the turn alone. Off by default: it helps long chats between people
    /// and hurts short user-assistant chats (docs/BENCHMARKS.md, "Turns embedded with their context").
    #[arg(long, env = "ENGRAM_TURN_CONTEXT")]
    pub turn_context: bool,
    /// Maximum database connections.
    #[arg(long, env = "ENGRAM_POOL_SIZE", default_value_t = 16)]
    pub pool_size: usize,
    /// How long a call waits for a free database connection before it fails with a retryable error.
    #[arg(long, env = "ENGRAM_POOL_WAIT_MS", default_value_t = 5000)]
    pub pool_wait_ms: u64,
    /// statement_timeout of every database statement, so one slow call cannot hold a connection.
    #[arg(long, env = "ENGRAM_STATEMENT_TIMEOUT_MS", default_value_t = 30000)]
    pub statement_timeout_ms: u64,
}

/// What `--allowed-origins` asks for, checked at start-up so that a typo is an
/// error rather than an entry rmcp would silently ignore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OriginPolicy {
    /// `*`: no Origin validation (the Host check still applies).
    Any,
    /// Only these origins; an empty list rejects every request that carries an Origin.
    Only(Vec<String>),
}

pub fn origin_policy(values: &[String]) -> anyhow::Result<OriginPolicy> {
    let values: Vec<&str> = values.iter().map(|v| v.trim()).filter(|v| !v.is_empty()).collect();
    if values == ["*"] {
        return Ok(OriginPolicy::Any);
    }
    for v in &values {
        // `:*` (any port) is rmcp's syntax, not a URI; check the rest.
        let base = v.strip_suffix(":*").unwrap_or(v);
        let uri: axum::http::Uri = base
            .parse()
            .map_err(|_| anyhow::anyhow!("--allowed-origins: '{v}' is not an origin; write scheme://host[:port|:*]"))?;
        let bare = uri.path() == "/" && !base.ends_with('/') && uri.query().is_none();
        if uri.scheme().is_none() || uri.host().is_none() || !bare {
            anyhow::bail!(
                "--allowed-origins: '{v}' is not an origin; write scheme://host[:port|:*] without a path, \
                 e.g. http://localhost:6274, or '*' for any origin"
            );
        }
    }
    Ok(OriginPolicy::Only(values.into_iter().map(String::from).collect()))
}

impl OriginPolicy {
    /// Whether a browser's Origin header passes (the same rule rmcp applies
    /// to /mcp): an exact entry, or an entry ending in `:*` and any port.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            OriginPolicy::Any => true,
            OriginPolicy::Only(list) => list.iter().any(|entry| match entry.strip_suffix('*') {
                Some(prefix) if entry.ends_with(":*") => origin
                    .strip_prefix(prefix)
                    .is_some_and(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())),
                _ => entry.eq_ignore_ascii_case(origin),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_matching() {
        let p = origin_policy(&strings(&["http://localhost:*", "https://app.example.com"])).unwrap();
        assert!(p.allows("http://localhost:8080"));
        assert!(p.allows("https://app.example.com"));
        assert!(!p.allows("http://localhost.evil.com:80"));
        assert!(!p.allows("http://localhost:"));
        assert!(!p.allows("https://evil.example"));
        assert!(OriginPolicy::Any.allows("https://evil.example"));
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn origins_default_and_any() {
        let default = strings(&[
            "http://localhost:*",
            "http://127.0.0.1:*",
            "http://[::1]:*",
            "https://localhost:*",
            "https://127.0.0.1:*",
            "https://[::1]:*",
        ]);
        assert_eq!(origin_policy(&default).unwrap(), OriginPolicy::Only(default.clone()));
        assert_eq!(origin_policy(&strings(&["*"])).unwrap(), OriginPolicy::Any);
        assert_eq!(origin_policy(&strings(&[""])).unwrap(), OriginPolicy::Only(vec![]));
        assert_eq!(
            origin_policy(&strings(&[" https://app.example.com:443 "])).unwrap(),
            OriginPolicy::Only(strings(&["https://app.example.com:443"]))
        );
    }

    #[test]
    fn origins_that_are_not_origins_are_refused() {
        let bad: [&[&str]; 5] = [
            &["localhost:8080"],
            &["app.example.com"],
            &["https://app.example.com/path"],
            &["http://"],
            &["*", "http://localhost:3000"], // "*" means any origin, so it stands alone
        ];
        for values in bad {
            assert!(origin_policy(&strings(values)).is_err(), "{values:?} should be refused");
        }
    }
}
