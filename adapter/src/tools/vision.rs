//! Group `vision` (off unless `--vision`, docs/VISION.md): images stored by content
//! hash and found again by a description (text -> image) or by a similar
//! image (image -> image), through an image embedder whose texts and images
//! share one space (CLIP).
//!
//! `memory_image_put` stores the bytes and returns at once; the background
//! worker embeds the owner's images without an embedding
//! (engram.image_backlog), so a slow or absent embedder never fails a put.

use super::*;
use base64::Engine;
use engram_embed::vision::Image;
use rmcp::handler::server::common::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Largest image a tool takes, decoded: engram.image_max_bytes' default
/// (the database checks the setting itself on put).
const MAX_IMAGE_BYTES: usize = engram_core::images::DEFAULT_MAX_BYTES as usize;

/// Largest base64 text of that many bytes.
const MAX_BASE64_BYTES: usize = MAX_IMAGE_BYTES.div_ceil(3) * 4;

/// What a vision tool answers when the server runs without `--vision`.
pub(crate) const VISION_OFF: &str = "Vision is not enabled on this server. Start engram-mcp with --vision and an \
                                     image embedder: --image-embedder-url URL (an OpenAI-compatible /v1/embeddings \
                                     that takes image data URIs, e.g. a CLIP server) or --image-embedder local \
                                     --image-model-dir DIR (CLIP weights in safetensors). See docs/VISION.md.";

#[derive(Deserialize, JsonSchema)]
pub struct ImagePutArgs {
    /// The image file's bytes, base64-encoded (a data: URI prefix is accepted too).
    pub data: String,
    /// Its type: image/png, image/jpeg, image/gif, image/webp or image/bmp.
    pub mime: String,
    /// The conversation the image belongs to; defaults to the X-Session-Id header, else this MCP session.
    pub session_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct ImagePutResult {
    /// The image's id (the sha256 of its bytes). Name it in a memory's metadata, {"images": ["<sha256>"]}, so
    /// the memory holds the image; then release this put (memory_image_release) and the image lives exactly as
    /// long as the memories that name it.
    pub sha256: String,
    /// "queued": a new image is embedded in the background, usually within a second, and is then found by
    /// memory_vision_search. A second put of the same bytes adds a reference to the stored image.
    pub embedding: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct ImageReleaseArgs {
    /// The image's id, as memory_image_put returned it.
    pub sha256: String,
}

#[derive(Serialize, JsonSchema)]
pub struct ImageReleaseResult {
    pub sha256: String,
    /// References left; at 0 the image, its bytes and its embedding are erased.
    pub refs: i32,
}

#[derive(Deserialize, JsonSchema)]
pub struct VisionSearchArgs {
    /// A description of the image you look for ("the red error banner"). Give this or `image`.
    pub query: Option<String>,
    /// An image to find similar images to, base64-encoded. Give this or `query`.
    pub image: Option<String>,
    /// The type of `image` (default image/png).
    pub mime: Option<String>,
    /// Most results, 1 to 50 (default 10).
    pub limit: Option<i32>,
    /// Only images put in this conversation.
    pub session_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct VisionHit {
    pub sha256: String,
    /// Cosine similarity of the image's embedding and the query's.
    #[serde(serialize_with = "score::serialize")]
    pub similarity: f32,
    pub session_id: Option<String>,
    /// RFC 3339.
    pub created_at: String,
}

#[derive(Serialize, JsonSchema)]
pub struct VisionSearchResult {
    pub results: Vec<VisionHit>,
}

/// The bytes of a base64 argument (standard alphabet, padding optional, an
/// optional `data:...;base64,` prefix, whitespace ignored).
fn decode_base64(what: &str, text: &str) -> Result<Vec<u8>, String> {
    let too_big = |n: usize| {
        format!(
            "{what} is {n} bytes of base64; the limit is {MAX_BASE64_BYTES} (10 MiB decoded). Send a smaller image."
        )
    };
    // A cheap bound first, then the exact one on the base64 itself.
    if text.len() > 2 * MAX_BASE64_BYTES {
        return Err(too_big(text.len()));
    }
    let body = match text.split_once(";base64,") {
        Some((prefix, rest)) if prefix.starts_with("data:") => rest,
        _ => text,
    };
    let clean: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    if clean.len() > MAX_BASE64_BYTES {
        return Err(too_big(clean.len()));
    }
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(clean.trim_end_matches('='))
        .map_err(|e| format!("{what} is not base64 ({e}); send the image file's bytes base64-encoded"))
}

/// A search image gets the checks a stored one gets (type, matching bytes,
/// size) before any decoder sees it.
fn search_image(data: &str, mime: Option<&str>) -> Result<Image, String> {
    let data = decode_base64("image", data)?;
    let head = &data[..data.len().min(engram_core::images::HEAD_BYTES)];
    let mime = engram_core::images::check_image(Some(mime.unwrap_or("image/png")), head, data.len(), MAX_IMAGE_BYTES)
        .map_err(|e| format!("image: {}; {}", e.message, e.hint))?;
    Ok(Image { mime, data })
}

/// Text queries go to the embedding service in the same `input` list as
/// image data URIs; a query that is itself a URI could be fetched or
/// decoded by a service that accepts URLs, so it is refused.
fn text_query(q: &str) -> Result<String, String> {
    let lower = q.trim_start().to_ascii_lowercase();
    if ["data:", "http://", "https://", "file:", "ftp://"]
        .iter()
        .any(|p| lower.starts_with(p))
    {
        return Err("query is a description in words; to search by an image, send it base64-encoded in `image`".into());
    }
    check_size("query", q, MAX_QUERY_BYTES)?;
    Ok(q.to_string())
}

impl EngramServer {
    /// The caller of a vision tool and the image embedder. A ghost
    /// conversation does not use the owner's images; without --vision the
    /// error says how to turn it on.
    fn vision_caller(&self, parts: &Parts) -> Result<(Caller, &dyn engram_embed::vision::ImageEmbedder), String> {
        let c = caller(parts)?;
        not_in_ghost(&c)?;
        let embedder = self.shared.vision.as_deref().ok_or_else(|| VISION_OFF.to_string())?;
        Ok((c, embedder))
    }
}

#[tool_router(router = vision_router, vis = "pub(super)")]
impl EngramServer {
    #[tool(
        description = "Store an image (a screenshot, a diagram) so that it can be found again by a description or by \
                       a similar image (memory_vision_search). Stored once per content: the same bytes again add a \
                       reference. Returns its id. To tie the image to a memory, name it in the memory's metadata \
                       {\"images\": [id]} and then memory_image_release this put: the image is erased when the last \
                       memory naming it is forgotten for good.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false)
    )]
    async fn memory_image_put(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ImagePutArgs>,
    ) -> Result<Json<ImagePutResult>, String> {
        self.run("memory_image_put", async {
            let (c, _) = self.vision_caller(&parts)?;
            let data = decode_base64("data", &a.data)?;
            let session = super::events::writing_session(a.session_id.clone(), &c)?;
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT engram.image_put(data => $1, mime => $2, session_id => $3)",
                    &[&data, &a.mime, &session],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            let sha256: String = first(&rows)?.col(0)?;
            // A new image has no embedding yet; for a known one the worker
            // finds nothing to do.
            self.shared.background.embed_images(&c);
            Ok(ImagePutResult {
                sha256,
                embedding: "queued".into(),
            })
        })
        .await
    }

    #[tool(
        description = "Give back one reference to an image (each memory_image_put took one). At the last reference \
                       the image, its bytes and its embedding are erased. Memories that name the image in their \
                       metadata hold references of their own until they are forgotten for good.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false)
    )]
    async fn memory_image_release(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<ImageReleaseArgs>,
    ) -> Result<Json<ImageReleaseResult>, String> {
        self.run("memory_image_release", async {
            let (c, _) = self.vision_caller(&parts)?;
            let sql = "SELECT engram.image_release(sha256 => $1)";
            let rows = self
                .shared
                .db
                .call(&c, sql, &[&a.sha256])
                .await
                .map_err(|e| match e.code.as_deref() {
                    Some("P0002") => format!(
                        "Image {} not found: it was never stored for you or was erased at its last release.",
                        a.sha256.chars().take(80).collect::<String>()
                    ),
                    _ => e.message,
                })?;
            Ok(ImageReleaseResult {
                sha256: a.sha256.trim().to_ascii_lowercase(),
                refs: match rows.first() {
                    Some(r) => r.col(0)?,
                    None => 0,
                },
            })
        })
        .await
    }

    #[tool(
        description = "Find stored images (memory_image_put) by a description (`query`, text -> image) or by a \
                       similar image (`image`, base64): the most similar first, with their ids and similarity. \
                       Optionally only one conversation's images (session_id).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn memory_vision_search(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(a): Parameters<VisionSearchArgs>,
    ) -> Result<Json<VisionSearchResult>, String> {
        self.run("memory_vision_search", async {
            let (c, embedder) = self.vision_caller(&parts)?;
            check_opt("session_id", a.session_id.as_deref(), MAX_ID_CHARS)?;
            let started = Instant::now();
            let vectors = match (a.query.as_deref().map(str::trim), a.image.as_deref()) {
                (Some(q), None) if !q.is_empty() => embedder.embed_texts(&[text_query(q)?]).await,
                (None, Some(image)) => embedder.embed_images(&[search_image(image, a.mime.as_deref())?]).await,
                _ => {
                    return Err("Give exactly one of `query` (a description of the image) or `image` (an image, \
                                base64) to search by."
                        .into())
                }
            };
            self.shared.metrics.embedding(started.elapsed(), vectors.is_ok());
            let query = Vector::from(
                vectors
                    .map_err(|e| format!("Could not embed the query: {e}. Retry later or check /health."))?
                    .remove(0),
            );
            let rows = self
                .shared
                .db
                .call(
                    &c,
                    "SELECT sha256, similarity, session_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')
                     FROM engram.vision_search(query_embedding => $1, k => coalesce($2, 10), session_id => $3)",
                    &[&query, &a.limit, &a.session_id],
                )
                .await
                .map_err(|e| db_error(e, None))?;
            Ok(VisionSearchResult {
                results: rows
                    .iter()
                    .map(|r| Ok(VisionHit {
                        sha256: r.col(0)?,
                        similarity: r.col(1)?,
                        session_id: r.col(2)?,
                        created_at: r.col(3)?,
                    }))
                    .collect::<Result<_, String>>()?,
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_forms() {
        assert_eq!(decode_base64("d", "aGk=").unwrap(), b"hi");
        assert_eq!(decode_base64("d", "aGk").unwrap(), b"hi");
        assert_eq!(decode_base64("d", "data:image/png;base64,aG\nk=").unwrap(), b"hi");
        assert!(decode_base64("d", "not base64!").unwrap_err().contains("base64"));
        let huge = "A".repeat(MAX_BASE64_BYTES + 4);
        assert!(decode_base64("d", &huge).unwrap_err().contains("limit"));
        // a 10 MiB image fits, with its data: prefix and line breaks
        let wrapped = format!("data:image/png;base64,{}", "AAAA\n".repeat(MAX_BASE64_BYTES / 4));
        assert_eq!(
            decode_base64("d", &wrapped).unwrap().len(),
            MAX_IMAGE_BYTES.div_ceil(3) * 3
        );
    }

    #[test]
    fn search_inputs_are_checked_before_embedding() {
        use base64::Engine;
        let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\n0000");
        assert_eq!(search_image(&png, None).unwrap().mime, "image/png");
        assert!(search_image(&png, Some("image/jpeg"))
            .unwrap_err()
            .contains("image/png"));
        let script = base64::engine::general_purpose::STANDARD.encode(b"#!/bin/sh");
        assert!(search_image(&script, None).is_err());
        assert!(text_query("the red error banner").is_ok());
        for uri in [
            "http://169.254.169.254/latest",
            " data:image/png;base64,AAAA",
            "FILE:///etc/passwd",
        ] {
            assert!(text_query(uri).unwrap_err().contains("`image`"), "{uri}");
        }
    }
}
