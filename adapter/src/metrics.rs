//! Prometheus text metrics: calls, errors and latency per tool, embedder
//! latency and cache hits, pool usage.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Default, Clone, Copy)]
struct Series {
    calls: u64,
    errors: u64,
    seconds: f64,
}

#[derive(Default)]
pub struct Metrics {
    tools: Mutex<BTreeMap<&'static str, Series>>,
    embed: Mutex<Series>,
}

impl Metrics {
    pub fn tool(&self, name: &'static str, took: Duration, ok: bool) {
        let mut m = self.tools.lock().unwrap_or_else(|p| p.into_inner());
        let s = m.entry(name).or_default();
        s.calls += 1;
        s.errors += u64::from(!ok);
        s.seconds += took.as_secs_f64();
    }

    pub fn embedding(&self, took: Duration, ok: bool) {
        let mut s = self.embed.lock().unwrap_or_else(|p| p.into_inner());
        s.calls += 1;
        s.errors += u64::from(!ok);
        s.seconds += took.as_secs_f64();
    }

    pub fn render(&self, cache: (u64, u64), pool: (usize, usize)) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP engram_build_info The engram-mcp release serving.\n# TYPE engram_build_info gauge\n\
             engram_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        let tools = self.tools.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let _ = writeln!(
            out,
            "# HELP engram_tool_calls_total MCP tool calls.\n# TYPE engram_tool_calls_total counter"
        );
        for (name, s) in &tools {
            let _ = writeln!(out, "engram_tool_calls_total{{tool=\"{name}\"}} {}", s.calls);
        }
        let _ = writeln!(out, "# HELP engram_tool_errors_total MCP tool calls that returned an error.\n# TYPE engram_tool_errors_total counter");
        for (name, s) in &tools {
            let _ = writeln!(out, "engram_tool_errors_total{{tool=\"{name}\"}} {}", s.errors);
        }
        let _ = writeln!(
            out,
            "# HELP engram_tool_seconds_total Time spent in MCP tool calls.\n# TYPE engram_tool_seconds_total counter"
        );
        for (name, s) in &tools {
            let _ = writeln!(out, "engram_tool_seconds_total{{tool=\"{name}\"}} {:.6}", s.seconds);
        }
        let e = *self.embed.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(
            out,
            "# HELP engram_embed_calls_total Embedding requests (after the cache).\n# TYPE engram_embed_calls_total counter\nengram_embed_calls_total {}\n\
             # HELP engram_embed_errors_total Failed embedding requests.\n# TYPE engram_embed_errors_total counter\nengram_embed_errors_total {}\n\
             # HELP engram_embed_seconds_total Time spent embedding.\n# TYPE engram_embed_seconds_total counter\nengram_embed_seconds_total {:.6}",
            e.calls, e.errors, e.seconds
        );
        let _ = writeln!(
            out,
            "# HELP engram_embed_cache_hits_total Texts served from the embedding cache.\n# TYPE engram_embed_cache_hits_total counter\nengram_embed_cache_hits_total {}\n\
             # HELP engram_embed_cache_misses_total Texts embedded.\n# TYPE engram_embed_cache_misses_total counter\nengram_embed_cache_misses_total {}",
            cache.0, cache.1
        );
        let _ = writeln!(
            out,
            "# HELP engram_db_pool_connections Open database connections.\n# TYPE engram_db_pool_connections gauge\nengram_db_pool_connections {}\n\
             # HELP engram_db_pool_available Idle database connections.\n# TYPE engram_db_pool_available gauge\nengram_db_pool_available {}",
            pool.0, pool.1
        );
        out
    }
}
