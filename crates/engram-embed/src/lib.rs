//! Embedding providers for engram-mcp.
//!
//! * [`onnx::OnnxEmbedder`]: all-MiniLM-L6-v2 with int8 weights run by ONNX
//!   Runtime, fully offline (the default; 384 dimensions).
//! * [`local::LocalEmbedder`]: the same model in f32 run in pure Rust with
//!   candle (the reference; about three times slower).
//! * [`http::OpenAiEmbedder`] and [`http::OllamaEmbedder`]: OpenAI-compatible
//!   `/v1/embeddings` and Ollama `/api/embed` over reqwest, with timeouts,
//!   retries with backoff and batching.
//! * [`cache::Cached`]: wraps any provider so the same content is embedded
//!   once (keyed by its SHA-256).
//! * [`vision`]: image embedders for image memories, which put images and
//!   texts in one space so text can find images: [`vision::clip::ClipEmbedder`]
//!   runs a Hugging Face CLIP checkpoint locally with candle, and
//!   [`vision::http::OpenAiImageEmbedder`] asks an OpenAI-compatible CLIP
//!   service, sending images as data URIs.
//!
//! Embedding never runs inside Postgres: the adapter computes vectors and
//! passes them to the extension's SQL functions.

pub mod cache;
pub mod http;
pub mod local;
pub mod onnx;
pub mod vision;

use async_trait::async_trait;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedding model: {0}")]
    Model(String),
    #[error("embedding service at {url}: {message}")]
    Http { url: String, message: String },
    #[error("embedding has {got} dimensions, expected {expected}")]
    Dimensions { expected: usize, got: usize },
}

/// A source of sentence embeddings.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// A short description for logs and `/health` (e.g. `local:all-MiniLM-L6-v2`).
    fn name(&self) -> String;
    /// The model whose vector space the vectors are in, as the database
    /// records it (`engram.configure(embedding_model => ...)`): two
    /// providers of one model (the local int8 and f32 runtimes) share it.
    fn model(&self) -> String {
        self.name()
    }
    /// The dimension of every vector this provider returns.
    fn dims(&self) -> usize;
    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// A boxed provider is a provider (the adapter picks one at start-up).
#[async_trait]
impl Embedder for Box<dyn Embedder> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn model(&self) -> String {
        (**self).model()
    }
    fn dims(&self) -> usize {
        (**self).dims()
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        (**self).embed(texts).await
    }
}

/// Where scripts/setup installs the local embedder's files: `$ENGRAM_HOME`
/// as scripts/lib.sh exports it, else this checkout's `.engram/`.
const SETUP_HOME: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.engram");

/// The local model's directory as scripts/setup leaves it:
/// `$ENGRAM_MODEL_DIR`, else the checkout's `.engram/models/all-MiniLM-L6-v2`
/// (the tests and the bench load it from here).
pub fn installed_model_dir() -> std::path::PathBuf {
    std::env::var_os("ENGRAM_MODEL_DIR")
        .map(Into::into)
        .unwrap_or_else(|| format!("{SETUP_HOME}/models/all-MiniLM-L6-v2").into())
}

/// The ONNX Runtime library as scripts/setup leaves it:
/// `$ENGRAM_ONNX_RUNTIME`, else the checkout's `.engram/lib/libonnxruntime.so`.
pub fn installed_onnx_runtime() -> std::path::PathBuf {
    std::env::var_os("ENGRAM_ONNX_RUNTIME")
        .map(Into::into)
        .unwrap_or_else(|| format!("{SETUP_HOME}/lib/libonnxruntime.so").into())
}

/// Runs an in-process model on tokio's blocking pool: embedding is
/// CPU-bound and must not hold up the async workers. The inputs (texts, or
/// images for [`vision`]) are copied because the blocking task must own them.
pub(crate) async fn off_thread<M, T, F>(model: &Arc<M>, inputs: &[T], run: F) -> Result<Vec<Vec<f32>>, EmbedError>
where
    M: Send + Sync + 'static,
    T: Clone + Send + 'static,
    F: FnOnce(&M, &[T]) -> Result<Vec<Vec<f32>>, EmbedError> + Send + 'static,
{
    let model = Arc::clone(model);
    let inputs = inputs.to_vec();
    tokio::task::spawn_blocking(move || run(&model, &inputs))
        .await
        .map_err(|e| EmbedError::Model(format!("embedding task: {e}")))?
}

/// Checks that every vector has `expected` dimensions.
pub fn check_dims(vectors: &[Vec<f32>], expected: usize) -> Result<(), EmbedError> {
    match vectors.iter().find(|v| v.len() != expected) {
        Some(v) => Err(EmbedError::Dimensions { expected, got: v.len() }),
        None => Ok(()),
    }
}

/// Cosine similarity of two vectors (1.0 for identical directions).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_basics() {
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }

    #[test]
    fn dims_are_checked() {
        assert!(check_dims(&[vec![0.0; 3]], 3).is_ok());
        assert!(matches!(
            check_dims(&[vec![0.0; 3], vec![0.0; 2]], 3),
            Err(EmbedError::Dimensions { expected: 3, got: 2 })
        ));
    }
}
