//! A CLIP service behind an OpenAI-compatible `POST {url}/v1/embeddings`.
//!
//! CLIP servers that speak OpenAI's embeddings API take images and texts in
//! the same `{model, input: [...]}` request: an image is a data URI
//! (`data:image/png;base64,...`), a text a plain string. So this is the text provider's [`crate::http`] client —
//! same timeouts, retries with backoff, batching, dimension check and bearer
//! key — with images encoded first and every vector normalised after: the
//! spaces only compare by cosine, and not every server normalises.

use super::{data_uri, unit, Image, ImageEmbedder};
use crate::http::{Client, Format, HttpOptions};
use crate::EmbedError;
use async_trait::async_trait;

/// An OpenAI-compatible CLIP embeddings API (`{url}/v1/embeddings`).
pub struct OpenAiImageEmbedder {
    client: Client,
    base_url: String,
}

impl OpenAiImageEmbedder {
    /// `dims` is what the model returns (e.g. 512 for ViT-B/32); every
    /// response is checked against it.
    pub fn new(base_url: &str, model: &str, dims: usize, options: HttpOptions) -> Result<Self, EmbedError> {
        Ok(OpenAiImageEmbedder {
            client: Client::new(base_url, "/v1/embeddings", model, dims, options, Format::OpenAi)?,
            base_url: base_url.trim_end_matches('/').to_string(),
        })
    }

    /// Posts the inputs and normalises what comes back; `kind` names an input
    /// in errors ("image 3").
    async fn embed_inputs(&self, inputs: &[String], kind: &str) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.client
            .embed(inputs)
            .await?
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                unit(v).ok_or_else(|| {
                    self.client.error(format!(
                        "the service returned a zero (or non-finite) vector for {kind} {i}; it cannot be normalised"
                    ))
                })
            })
            .collect()
    }
}

#[async_trait]
impl ImageEmbedder for OpenAiImageEmbedder {
    fn name(&self) -> String {
        format!("openai:{}@{}", self.client.model, self.base_url)
    }
    fn dims(&self) -> usize {
        self.client.dims
    }
    async fn embed_images(&self, images: &[Image]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let uris: Vec<String> = images.iter().map(data_uri).collect();
        self.embed_inputs(&uris, "image").await
    }
    async fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_inputs(texts, "text").await
    }
}
