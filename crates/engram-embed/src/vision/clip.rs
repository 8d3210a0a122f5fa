//! The built-in image embedder: a CLIP checkpoint in Hugging Face's layout,
//! run with candle on the CPU, fully offline.
//!
//! The directory holds `config.json` (a `CLIPConfig`: `text_config`,
//! `vision_config`, `projection_dim`), `model.safetensors` (HF tensor names,
//! e.g. `vision_model.embeddings.patch_embedding.weight`) and
//! `tokenizer.json` (HF tokenizers), as `openai/clip-vit-base-patch32` and
//! its kin ship them. Images are prepared as `CLIPImageProcessor` does
//! (RGB, bicubic resize of the shorter side, centre crop, CLIP's mean and
//! std), and both towers' projections are L2-normalised, so an image and a
//! text compare by dot product.
//!
//! candle's text tower takes a text's end as the position of its largest
//! token id, as OpenAI's CLIP does: the tokenizer must end every text with
//! its end-of-text token and that token must have the largest id in the
//! vocabulary (true of CLIP's BPE, where `<|endoftext|>` is 49407 of 49408).
//! [`ClipEmbedder::load`] checks this rather than return quietly wrong
//! vectors. Batches are padded with id 0 after the end token; the causal
//! mask keeps the end token from seeing them, so padding does not change a
//! text's vector.

use super::{Image, ImageEmbedder};
use crate::EmbedError;
use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::clip::text_model::{Activation, ClipTextConfig};
use candle_transformers::models::clip::vision_model::ClipVisionConfig;
use candle_transformers::models::clip::{div_l2_norm, ClipConfig, ClipModel};
use image::imageops::FilterType;
use image::{ImageFormat, ImageReader, RgbImage};
use serde::Deserialize;
use std::io::Cursor;
use std::path::Path;
use std::sync::Arc;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// The files a model directory must hold.
const FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];

/// CLIP's per-channel (RGB) pixel mean and standard deviation, on [0, 1],
/// written as OpenAI published them (f32 keeps about seven digits).
#[allow(clippy::excessive_precision)]
pub(crate) const MEAN: [f32; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
#[allow(clippy::excessive_precision)]
pub(crate) const STD: [f32; 3] = [0.268_629_54, 0.261_302_58, 0.275_777_11];

/// Images per forward pass: bounds memory (a 224-pixel image is 600 KB of
/// f32 before the transformer multiplies it) without losing much speed.
const IMAGE_BATCH: usize = 16;
/// Texts per forward pass.
const TEXT_BATCH: usize = 64;

/// Longest side : shorter side kept before resizing. Beyond it only the
/// centre is kept first, so a 1 x 100000 strip cannot make the resize
/// allocate gigabytes; the final square crop lies well inside what remains.
const MAX_ASPECT: u32 = 8;

pub struct ClipEmbedder {
    inner: Arc<Model>,
    name: String,
    /// Model runs at once: each holds decoded pixels and activations, so an
    /// unbounded number (one per concurrent call) could exhaust memory.
    running: Arc<tokio::sync::Semaphore>,
}

/// Model runs at once (see `ClipEmbedder::running`).
const RUNS_AT_ONCE: usize = 2;

/// Largest width or height decoded; larger images are refused before their
/// pixels are allocated (a screenshot of a 4K screen is 3840 wide).
const MAX_SIDE: u32 = 8192;

/// Most bytes one decode may allocate (an 8-bit RGBA image of about
/// 5,800 x 5,800 pixels); a small file claiming huge dimensions is refused.
const MAX_DECODE_BYTES: u64 = 128 * 1024 * 1024;

struct Model {
    clip: ClipModel,
    tokenizer: Tokenizer,
    image_size: u32,
    dims: usize,
    device: Device,
}

fn model_err(context: &str, e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model(format!("{context}: {e}"))
}

// ---- config.json ------------------------------------------------------------

/// The parts of HF's `CLIPConfig` candle needs. Missing fields take HF's
/// defaults (those of ViT-B/32), since `transformers` writes only the fields
/// that differ from them.
#[derive(Deserialize)]
struct HfConfig {
    #[serde(default)]
    model_type: Option<String>,
    text_config: HfTextConfig,
    vision_config: HfVisionConfig,
    #[serde(default = "default_projection_dim")]
    projection_dim: usize,
    #[serde(default = "default_logit_scale")]
    logit_scale_init_value: f32,
}

fn default_projection_dim() -> usize {
    512
}

fn default_logit_scale() -> f32 {
    2.6592
}

#[derive(Deserialize)]
#[serde(default)]
struct HfTextConfig {
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    max_position_embeddings: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    hidden_act: String,
}

impl Default for HfTextConfig {
    fn default() -> Self {
        HfTextConfig {
            vocab_size: 49408,
            hidden_size: 512,
            intermediate_size: 2048,
            max_position_embeddings: 77,
            num_hidden_layers: 12,
            num_attention_heads: 8,
            hidden_act: "quick_gelu".into(),
        }
    }
}

#[derive(Deserialize)]
#[serde(default)]
struct HfVisionConfig {
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    image_size: usize,
    patch_size: usize,
    num_channels: usize,
    hidden_act: String,
}

impl Default for HfVisionConfig {
    fn default() -> Self {
        HfVisionConfig {
            hidden_size: 768,
            intermediate_size: 3072,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            image_size: 224,
            patch_size: 32,
            num_channels: 3,
            hidden_act: "quick_gelu".into(),
        }
    }
}

/// Parses HF's config.json into candle's (which is not `Deserialize`),
/// refusing what candle's CLIP cannot run rather than run it wrongly.
fn parse_config(json: &str) -> Result<ClipConfig, String> {
    let c: HfConfig = serde_json::from_str(json).map_err(|e| e.to_string())?;
    if let Some(kind) = c.model_type.as_deref().filter(|k| *k != "clip") {
        return Err(format!("model_type is {kind:?}, not \"clip\""));
    }
    let (t, v) = (&c.text_config, &c.vision_config);
    for (tower, act) in [("text_config", &t.hidden_act), ("vision_config", &v.hidden_act)] {
        if act != "quick_gelu" {
            return Err(format!("{tower}.hidden_act is {act:?}; only quick_gelu is supported"));
        }
    }
    for (tower, hidden, heads) in [
        ("text_config", t.hidden_size, t.num_attention_heads),
        ("vision_config", v.hidden_size, v.num_attention_heads),
    ] {
        if heads == 0 || hidden % heads != 0 {
            return Err(format!(
                "{tower}.hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
            ));
        }
    }
    if v.patch_size == 0 || v.image_size < v.patch_size {
        return Err(format!(
            "vision_config.image_size {} and patch_size {} make no patches",
            v.image_size, v.patch_size
        ));
    }
    if v.num_channels != 3 {
        return Err(format!(
            "vision_config.num_channels is {}; images are embedded as RGB (3)",
            v.num_channels
        ));
    }
    if t.max_position_embeddings < 3 {
        return Err(format!(
            "text_config.max_position_embeddings {} leaves no room for text",
            t.max_position_embeddings
        ));
    }
    Ok(ClipConfig {
        text_config: ClipTextConfig {
            vocab_size: t.vocab_size,
            embed_dim: t.hidden_size,
            activation: Activation::QuickGelu,
            intermediate_size: t.intermediate_size,
            max_position_embeddings: t.max_position_embeddings,
            pad_with: None,
            num_hidden_layers: t.num_hidden_layers,
            num_attention_heads: t.num_attention_heads,
            projection_dim: c.projection_dim,
        },
        vision_config: ClipVisionConfig {
            embed_dim: v.hidden_size,
            activation: Activation::QuickGelu,
            intermediate_size: v.intermediate_size,
            num_hidden_layers: v.num_hidden_layers,
            num_attention_heads: v.num_attention_heads,
            projection_dim: c.projection_dim,
            num_channels: v.num_channels,
            image_size: v.image_size,
            patch_size: v.patch_size,
        },
        logit_scale_init_value: c.logit_scale_init_value,
        image_size: v.image_size,
    })
}

// ---- loading -------------------------------------------------------------------

impl ClipEmbedder {
    /// Loads a CLIP checkpoint from a directory holding config.json,
    /// model.safetensors and tokenizer.json (the weights are memory-mapped).
    pub fn load(dir: &Path) -> Result<ClipEmbedder, EmbedError> {
        if let Some(file) = FILES.into_iter().find(|f| !dir.join(f).is_file()) {
            return Err(EmbedError::Model(format!(
                "{} has no {file}; pass --image-model-dir a directory with {} (a Hugging Face CLIP checkpoint)",
                dir.display(),
                FILES.join(", ")
            )));
        }
        let config =
            std::fs::read_to_string(dir.join("config.json")).map_err(|e| model_err("reading config.json", e))?;
        let config = parse_config(&config).map_err(|e| model_err("config.json", e))?;
        let device = Device::Cpu;
        // SAFETY: the file is memory-mapped read-only; engram never writes
        // model files while running.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[dir.join("model.safetensors")], DType::F32, &device) }
            .map_err(|e| model_err("loading model.safetensors", e))?;
        // candle draws a missing class embedding at random, which would give
        // every start of engram a different image space.
        const CLASS_EMBEDDING: &str = "vision_model.embeddings.class_embedding";
        if !vb.contains_tensor(CLASS_EMBEDDING) {
            return Err(EmbedError::Model(format!(
                "model.safetensors has no {CLASS_EMBEDDING}; is it a Hugging Face CLIP checkpoint?"
            )));
        }
        let clip = ClipModel::new(vb, &config).map_err(|e| model_err("building CLIP from model.safetensors", e))?;
        let tokenizer = load_tokenizer(&dir.join("tokenizer.json"), &config.text_config)?;
        let name = std::fs::canonicalize(dir)
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| dir.display().to_string());
        Ok(ClipEmbedder {
            inner: Arc::new(Model {
                clip,
                tokenizer,
                image_size: config.image_size as u32,
                dims: config.text_config.projection_dim,
                device,
            }),
            name: format!("clip:{name}"),
            running: Arc::new(tokio::sync::Semaphore::new(RUNS_AT_ONCE)),
        })
    }

    /// Embeds images synchronously on the calling thread (CPU-bound).
    pub fn embed_images_blocking(&self, images: &[Image]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed_images(images)
    }

    /// Embeds texts synchronously on the calling thread (CPU-bound).
    pub fn embed_texts_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed_texts(texts)
    }
}

/// The tokenizer, checked to end texts with its largest id (see the module
/// doc), cutting texts at the model's positions and padding a batch with id
/// 0 to its longest text.
fn load_tokenizer(path: &Path, config: &ClipTextConfig) -> Result<Tokenizer, EmbedError> {
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| model_err("loading tokenizer.json", e))?;
    // probe without the file's own padding, which could hide the end token
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(None)
        .map_err(|e| model_err("configuring tokenizer.json", e))?;
    let probe = tokenizer.encode("", true).map_err(|e| model_err("tokenizer.json", e))?;
    let end = probe.get_ids().last().copied();
    let largest = tokenizer.get_vocab(true).into_values().max();
    let largest = match (end, largest) {
        (Some(end), Some(largest)) if end == largest => largest,
        _ => {
            let show = |id: Option<u32>| id.map_or("nothing".to_string(), |id| format!("id {id}"));
            return Err(EmbedError::Model(format!(
                "tokenizer.json must end every text with its end-of-text token, and give that token the \
                 largest id (CLIP finds a text's end by it); an empty text ends with {}, the largest is {}",
                show(end),
                show(largest)
            )));
        }
    };
    if largest as usize >= config.vocab_size {
        return Err(EmbedError::Model(format!(
            "tokenizer.json has ids up to {largest} but config.json's text_config.vocab_size is {}",
            config.vocab_size
        )));
    }
    let pad_token = tokenizer.id_to_token(0).unwrap_or_default();
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        pad_id: 0,
        pad_token,
        ..Default::default()
    }));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: config.max_position_embeddings,
            ..Default::default()
        }))
        .map_err(|e| model_err("configuring truncation", e))?;
    Ok(tokenizer)
}

// ---- images --------------------------------------------------------------------

/// The centre region `(left, top, width, height)` kept before resizing: the
/// whole image unless one side is over [`MAX_ASPECT`] times the other.
pub(crate) fn precrop(width: u32, height: u32) -> (u32, u32, u32, u32) {
    let short = width.min(height);
    let cap = short.saturating_mul(MAX_ASPECT);
    let (w, h) = (width.min(cap), height.min(cap));
    ((width - w) / 2, (height - h) / 2, w, h)
}

/// The size after scaling the shorter side to `size`, keeping the aspect
/// ratio; the longer side is rounded down, as `CLIPImageProcessor` does.
pub(crate) fn resized(width: u32, height: u32, size: u32) -> (u32, u32) {
    let scale = |long: u32, short: u32| ((u64::from(size) * u64::from(long)) / u64::from(short.max(1))) as u32;
    if width <= height {
        (size, scale(height, width).max(size))
    } else {
        (scale(width, height).max(size), size)
    }
}

/// The top-left corner of the centred `size` x `size` square.
pub(crate) fn centre_crop(width: u32, height: u32, size: u32) -> (u32, u32) {
    (width.saturating_sub(size) / 2, height.saturating_sub(size) / 2)
}

/// A channel value (0-255) as the model sees it: scaled to [0, 1], then
/// standardised with CLIP's mean and std.
pub(crate) fn normalise(value: u8, channel: usize) -> f32 {
    (f32::from(value) / 255.0 - MEAN[channel]) / STD[channel]
}

/// Decodes by content (the declared MIME type is only a fallback: it is
/// what the agent claimed, the bytes are what it sent).
fn decode(image: &Image) -> Result<image::DynamicImage, String> {
    let mut reader = ImageReader::new(Cursor::new(&image.data[..]))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    if reader.format().is_none() {
        match ImageFormat::from_mime_type(&image.mime) {
            Some(format) => reader.set_format(format),
            None => return Err("not a PNG, JPEG, GIF, WebP or BMP image".into()),
        }
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    reader.decode().map_err(|e| e.to_string())
}

/// An image as the model's `3 x size x size` input, channel-major (CHW).
pub(crate) fn preprocess(image: &Image, size: u32) -> Result<Vec<f32>, String> {
    let rgb = decode(image)?.into_rgb8();
    let (width, height) = rgb.dimensions();
    if width == 0 || height == 0 {
        return Err("the image has no pixels".into());
    }
    let (x, y, w, h) = precrop(width, height);
    let rgb: RgbImage = if (w, h) == (width, height) {
        rgb
    } else {
        image::imageops::crop_imm(&rgb, x, y, w, h).to_image()
    };
    let (rw, rh) = resized(w, h, size);
    let resized = image::imageops::resize(&rgb, rw, rh, FilterType::CatmullRom);
    let (left, top) = centre_crop(rw, rh, size);
    let square = image::imageops::crop_imm(&resized, left, top, size, size).to_image();
    let plane = (size * size) as usize;
    let mut out = vec![0f32; 3 * plane];
    for (i, pixel) in square.pixels().enumerate() {
        for c in 0..3 {
            out[c * plane + i] = normalise(pixel.0[c], c);
        }
    }
    Ok(out)
}

// ---- inference -----------------------------------------------------------------

/// Rows of `features`, each scaled to unit length.
fn unit_rows(features: &Tensor) -> Result<Vec<Vec<f32>>, EmbedError> {
    let rows = div_l2_norm(features)
        .and_then(|t| t.to_vec2::<f32>())
        .map_err(|e| model_err("normalising", e))?;
    if rows.iter().flatten().any(|x| !x.is_finite()) {
        return Err(EmbedError::Model(
            "the model produced a zero or non-finite vector; are the weights intact?".into(),
        ));
    }
    Ok(rows)
}

impl Model {
    fn embed_images(&self, images: &[Image]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let size = self.image_size as usize;
        let mut out = Vec::with_capacity(images.len());
        for (chunk_index, chunk) in images.chunks(IMAGE_BATCH).enumerate() {
            let mut pixels = Vec::with_capacity(chunk.len());
            for (j, image) in chunk.iter().enumerate() {
                let values = preprocess(image, self.image_size).map_err(|e| {
                    EmbedError::Model(format!(
                        "image {} ({}, {} bytes) could not be read: {e}",
                        chunk_index * IMAGE_BATCH + j,
                        image.mime,
                        image.data.len()
                    ))
                })?;
                pixels
                    .push(Tensor::from_vec(values, (3, size, size), &self.device).map_err(|e| model_err("pixels", e))?);
            }
            let batch = Tensor::stack(&pixels, 0).map_err(|e| model_err("stacking images", e))?;
            let features = self
                .clip
                .get_image_features(&batch)
                .map_err(|e| model_err("image forward pass", e))?;
            out.extend(unit_rows(&features)?);
        }
        Ok(out)
    }

    fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(TEXT_BATCH) {
            let encodings = self
                .tokenizer
                .encode_batch(chunk.to_vec(), true)
                .map_err(|e| model_err("tokenizing", e))?;
            let ids: Vec<Tensor> = encodings
                .iter()
                .map(|e| Tensor::new(e.get_ids(), &self.device))
                .collect::<Result<_, _>>()
                .map_err(|e| model_err("input ids", e))?;
            let ids = Tensor::stack(&ids, 0).map_err(|e| model_err("stacking ids", e))?;
            let features = self
                .clip
                .get_text_features(&ids)
                .map_err(|e| model_err("text forward pass", e))?;
            out.extend(unit_rows(&features)?);
        }
        Ok(out)
    }
}

#[async_trait]
impl ImageEmbedder for ClipEmbedder {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn dims(&self) -> usize {
        self.inner.dims
    }

    async fn embed_images(&self, images: &[Image]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let _run = self
            .running
            .acquire()
            .await
            .map_err(|e| EmbedError::Model(e.to_string()))?;
        crate::off_thread(&self.inner, images, |m, i| m.embed_images(i)).await
    }

    async fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let _run = self
            .running
            .acquire()
            .await
            .map_err(|e| EmbedError::Model(e.to_string()))?;
        crate::off_thread(&self.inner, texts, |m, t| m.embed_texts(t)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_beyond_the_decode_limits_are_refused_before_allocating() {
        // A 9000 x 1 PNG is a few hundred bytes; its width alone is refused.
        let mut png = Vec::new();
        image::RgbImage::new(MAX_SIDE + 808, 1)
            .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
            .unwrap();
        assert!(png.len() < 10_000, "{}", png.len());
        let wide = Image {
            mime: "image/png".into(),
            data: png,
        };
        let e = preprocess(&wide, 32).unwrap_err();
        assert!(e.to_lowercase().contains("limit"), "{e}");
    }

    #[test]
    fn shorter_side_is_scaled_and_longer_rounded_down() {
        assert_eq!(resized(640, 480, 224), (298, 224)); // 224 * 640 / 480 = 298.67
        assert_eq!(resized(480, 640, 224), (224, 298));
        assert_eq!(resized(100, 100, 224), (224, 224));
        assert_eq!(resized(1, 1, 32), (32, 32));
        assert_eq!(resized(225, 224, 224), (225, 224));
    }

    #[test]
    fn crop_is_centred() {
        assert_eq!(centre_crop(298, 224, 224), (37, 0));
        assert_eq!(centre_crop(224, 299, 224), (0, 37));
        assert_eq!(centre_crop(224, 224, 224), (0, 0));
    }

    #[test]
    fn extreme_strips_are_cut_before_resizing() {
        assert_eq!(precrop(640, 480), (0, 0, 640, 480));
        assert_eq!(precrop(80, 10), (0, 0, 80, 10)); // exactly MAX_ASPECT
        assert_eq!(precrop(100_000, 1), ((100_000 - 8) / 2, 0, 8, 1));
        assert_eq!(precrop(3, 1000), (0, (1000 - 24) / 2, 3, 24));
        let (_, _, w, h) = precrop(100_000, 1);
        assert_eq!(resized(w, h, 224), (1792, 224));
    }

    #[test]
    fn pixels_use_clips_mean_and_std() {
        // CLIPImageProcessor's image_mean and image_std
        let mean = [0.48145466f64, 0.4578275, 0.40821073];
        let std = [0.26862954f64, 0.26130258, 0.27577711];
        for c in 0..3 {
            assert!((f64::from(MEAN[c]) - mean[c]).abs() < 1e-7);
            assert!((f64::from(STD[c]) - std[c]).abs() < 1e-7);
        }
        for c in 0..3 {
            assert!((normalise(0, c) + MEAN[c] / STD[c]).abs() < 1e-6);
            assert!((normalise(255, c) - (1.0 - MEAN[c]) / STD[c]).abs() < 1e-6);
        }
        assert!((normalise(123, 0) - (123.0 / 255.0 - MEAN[0]) / STD[0]).abs() < 1e-6);
    }

    fn png(width: u32, height: u32, colour: [u8; 3]) -> Image {
        let mut data = Vec::new();
        RgbImage::from_pixel(width, height, image::Rgb(colour))
            .write_to(&mut Cursor::new(&mut data), ImageFormat::Png)
            .unwrap();
        Image {
            mime: "image/png".into(),
            data,
        }
    }

    #[test]
    fn a_solid_image_becomes_solid_chw_planes() {
        let pixels = preprocess(&png(40, 20, [255, 0, 128]), 8).unwrap();
        assert_eq!(pixels.len(), 3 * 8 * 8);
        for (c, value) in [255u8, 0, 128].into_iter().enumerate() {
            let plane = &pixels[c * 64..(c + 1) * 64];
            assert!(
                plane.iter().all(|x| (x - normalise(value, c)).abs() < 1e-5),
                "channel {c}"
            );
        }
    }

    #[test]
    fn content_beats_the_declared_mime_and_garbage_is_refused() {
        let mut image = png(4, 4, [1, 2, 3]);
        image.mime = "image/jpeg".into();
        assert!(preprocess(&image, 8).is_ok());
        let garbage = Image {
            mime: "application/octet-stream".into(),
            data: vec![1, 2, 3],
        };
        assert!(preprocess(&garbage, 8).unwrap_err().contains("not a PNG"));
    }

    #[test]
    fn hf_configs_parse_with_hf_defaults() {
        let c = parse_config(
            r#"{"model_type": "clip", "text_config": {}, "vision_config": {"patch_size": 16}, "projection_dim": 256}"#,
        )
        .unwrap();
        assert_eq!(c.text_config.vocab_size, 49408);
        assert_eq!(c.text_config.embed_dim, 512);
        assert_eq!(c.text_config.max_position_embeddings, 77);
        assert_eq!(c.vision_config.embed_dim, 768);
        assert_eq!(c.vision_config.patch_size, 16);
        assert_eq!(c.image_size, 224);
        assert_eq!(
            (c.text_config.projection_dim, c.vision_config.projection_dim),
            (256, 256)
        );
        assert!((c.logit_scale_init_value - 2.6592).abs() < 1e-6);
    }

    #[test]
    fn configs_candle_cannot_run_are_refused() {
        let gelu = r#"{"text_config": {}, "vision_config": {"hidden_act": "gelu"}}"#;
        assert!(parse_config(gelu).unwrap_err().contains("quick_gelu"));
        let bert = r#"{"model_type": "bert", "text_config": {}, "vision_config": {}}"#;
        assert!(parse_config(bert).unwrap_err().contains("bert"));
        let heads = r#"{"text_config": {"hidden_size": 30, "num_attention_heads": 4}, "vision_config": {}}"#;
        assert!(parse_config(heads).unwrap_err().contains("multiple"));
        assert!(parse_config(r#"{"hidden_size": 384}"#)
            .unwrap_err()
            .contains("text_config"));
    }
}
