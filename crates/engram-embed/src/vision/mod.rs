//! Image embedders, for memories that are images (screenshots, diagrams,
//! photos) rather than text.
//!
//! An image memory is found by a text query, so a provider must put images
//! and texts in one space: [`ImageEmbedder`] has both `embed_images` and
//! `embed_texts`, and the two only make sense together (a CLIP model's image
//! and text towers). The sentence [`crate::Embedder`] cannot serve here: its
//! text space is not the image space, and its vectors have another length.
//!
//! * [`clip::ClipEmbedder`]: a Hugging Face CLIP checkpoint run locally with
//!   candle (offline, CPU).
//! * [`http::OpenAiImageEmbedder`]: an OpenAI-compatible `/v1/embeddings`
//!   CLIP service; images travel as data URIs ([`data_uri`]), texts as plain
//!   strings, in the same request shape.
//!
//! Every vector either returns is L2-normalised, so cosine similarity is a
//! dot product and vectors from the two towers compare directly.

pub mod clip;
pub mod http;

use crate::EmbedError;
use async_trait::async_trait;
use base64::Engine;

/// An image as the agent sent it: encoded bytes and their MIME type.
#[derive(Clone, PartialEq, Eq)]
pub struct Image {
    /// e.g. `image/png`, `image/jpeg`
    pub mime: String,
    /// The encoded file (PNG, JPEG, ...), not pixels.
    pub data: Vec<u8>,
}

/// Debug shows the size, not the bytes: images end up in logs via errors.
impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("mime", &self.mime)
            .field("bytes", &self.data.len())
            .finish()
    }
}

/// A source of image embeddings, with texts in the same space.
#[async_trait]
pub trait ImageEmbedder: Send + Sync {
    /// A short description for logs and `/health`
    /// (e.g. `openai:clip-vit-b-32@http://localhost:8000`, `clip:clip-vit-base-patch32`).
    fn name(&self) -> String;
    /// The dimension of every vector this provider returns.
    fn dims(&self) -> usize;
    /// One L2-normalised vector per image, in order.
    async fn embed_images(&self, images: &[Image]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Texts in the same space as the images (text -> image search). L2-normalised.
    async fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// A boxed provider is a provider (the adapter picks one at start-up).
#[async_trait]
impl ImageEmbedder for Box<dyn ImageEmbedder> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn dims(&self) -> usize {
        (**self).dims()
    }
    async fn embed_images(&self, images: &[Image]) -> Result<Vec<Vec<f32>>, EmbedError> {
        (**self).embed_images(images).await
    }
    async fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        (**self).embed_texts(texts).await
    }
}

/// The image as an RFC 2397 data URI: `data:image/png;base64,iVBOR...`
/// (standard alphabet, padded), as CLIP services take images in `input`.
pub fn data_uri(image: &Image) -> String {
    format!(
        "data:{};base64,{}",
        image.mime,
        base64::engine::general_purpose::STANDARD.encode(&image.data)
    )
}

/// `v` scaled to unit length, or `None` when it has no direction (zero) or
/// holds NaN/infinity: such a vector would match nothing, or everything.
pub(crate) fn unit(mut v: Vec<f32>) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return None;
    }
    for x in &mut v {
        *x = (f64::from(*x) / norm) as f32;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_uris_carry_mime_and_base64() {
        let png = Image {
            mime: "image/png".into(),
            data: b"\x89PNG".to_vec(),
        };
        assert_eq!(data_uri(&png), "data:image/png;base64,iVBORw==");
        let empty = Image {
            mime: "image/jpeg".into(),
            data: Vec::new(),
        };
        assert_eq!(data_uri(&empty), "data:image/jpeg;base64,");
    }

    #[test]
    fn debug_hides_the_bytes() {
        let image = Image {
            mime: "image/png".into(),
            data: vec![7; 1000],
        };
        assert_eq!(format!("{image:?}"), r#"Image { mime: "image/png", bytes: 1000 }"#);
    }

    #[test]
    fn unit_normalises_and_refuses_zero() {
        let v = unit(vec![3.0, 4.0]).unwrap();
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        assert!(unit(vec![0.0, 0.0]).is_none());
        assert!(unit(vec![f32::NAN, 1.0]).is_none());
        assert!(unit(Vec::new()).is_none());
    }
}
