//! The local CLIP provider against a tiny, randomly initialised checkpoint
//! that this test writes itself (config.json, model.safetensors and
//! tokenizer.json in Hugging Face's layout, into a fresh temp directory).
//!
//! Random weights say nothing about CLIP's quality: what is tested is the
//! plumbing — loading the three files, decoding and preprocessing images of
//! several formats and shapes, tokenising, vector shapes, normalisation,
//! batching, determinism across loads, and the errors for corrupt images and
//! missing files. Nothing is downloaded.

use candle_core::{DType, Device};
use candle_nn::{Init, VarBuilder, VarMap};
use candle_transformers::models::clip::text_model::{Activation, ClipTextConfig};
use candle_transformers::models::clip::vision_model::ClipVisionConfig;
use candle_transformers::models::clip::{ClipConfig, ClipModel};
use engram_embed::vision::clip::ClipEmbedder;
use engram_embed::vision::{Image, ImageEmbedder};
use image::{ImageFormat, Rgb, RgbImage};
use serde_json::json;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use tokenizers::models::wordlevel::WordLevel;
use tokenizers::pre_tokenizers::whitespace::Whitespace;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, Tokenizer};

const DIMS: usize = 16;
const VOCAB: u32 = 64;
const WORDS: [&str; 8] = ["a", "red", "square", "blue", "circle", "green", "cat", "photo"];

/// A temp directory, removed when the test ends.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "engram-clip-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tiny_config() -> ClipConfig {
    ClipConfig {
        text_config: ClipTextConfig {
            vocab_size: VOCAB as usize,
            embed_dim: 32,
            activation: Activation::QuickGelu,
            intermediate_size: 64,
            max_position_embeddings: 16,
            pad_with: None,
            num_hidden_layers: 2,
            num_attention_heads: 2,
            projection_dim: DIMS,
        },
        vision_config: ClipVisionConfig {
            embed_dim: 32,
            activation: Activation::QuickGelu,
            intermediate_size: 64,
            num_hidden_layers: 2,
            num_attention_heads: 2,
            projection_dim: DIMS,
            num_channels: 3,
            image_size: 32,
            patch_size: 8,
        },
        logit_scale_init_value: 2.6592,
        image_size: 32,
    }
}

/// The same config as HF's CLIPConfig writes it.
fn tiny_config_json() -> serde_json::Value {
    json!({
        "architectures": ["CLIPModel"],
        "model_type": "clip",
        "projection_dim": DIMS,
        "logit_scale_init_value": 2.6592,
        "text_config": {
            "model_type": "clip_text_model",
            "vocab_size": VOCAB,
            "hidden_size": 32,
            "intermediate_size": 64,
            "max_position_embeddings": 16,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "hidden_act": "quick_gelu"
        },
        "vision_config": {
            "model_type": "clip_vision_model",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
            "num_channels": 3,
            "hidden_act": "quick_gelu"
        }
    })
}

/// A word-level tokenizer in CLIP's manner: `<|startoftext|> words
/// <|endoftext|>`, the end token with the id given (CLIP's is the largest).
fn write_tokenizer(path: &Path, start_id: u32, end_id: u32) {
    let mut vocab = serde_json::Map::new();
    vocab.insert("[UNK]".into(), json!(0));
    for (i, word) in WORDS.iter().enumerate() {
        vocab.insert(word.to_string(), json!(i + 1));
    }
    for id in WORDS.len() as u32 + 1..VOCAB - 2 {
        vocab.insert(format!("w{id}"), json!(id));
    }
    vocab.insert("<|startoftext|>".into(), json!(start_id));
    vocab.insert("<|endoftext|>".into(), json!(end_id));
    let model: WordLevel = serde_json::from_value(json!({"vocab": vocab, "unk_token": "[UNK]"})).unwrap();
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_pre_tokenizer(Some(Whitespace {}));
    tokenizer.with_post_processor(Some(
        TemplateProcessing::builder()
            .try_single("<|startoftext|> $A <|endoftext|>")
            .unwrap()
            .special_tokens(vec![("<|startoftext|>", start_id), ("<|endoftext|>", end_id)])
            .build()
            .unwrap(),
    ));
    tokenizer
        .add_special_tokens([
            AddedToken::from("<|startoftext|>", true),
            AddedToken::from("<|endoftext|>", true),
        ])
        .unwrap();
    tokenizer.save(path, false).unwrap();
}

/// Writes a complete random checkpoint and returns its directory.
fn write_checkpoint(name: &str) -> TempDir {
    let dir = TempDir::new(name);
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let config = tiny_config();
    // candle only creates these two when the checkpoint has them: put them in
    vb.pp("vision_model.embeddings")
        .get_with_hints(32, "class_embedding", Init::Randn { mean: 0.0, stdev: 1.0 })
        .unwrap();
    vb.get_with_hints((), "logit_scale", Init::Const(2.6592)).unwrap();
    ClipModel::new(vb, &config).unwrap();
    varmap.save(dir.0.join("model.safetensors")).unwrap();
    std::fs::write(
        dir.0.join("config.json"),
        serde_json::to_string_pretty(&tiny_config_json()).unwrap(),
    )
    .unwrap();
    write_tokenizer(&dir.0.join("tokenizer.json"), VOCAB - 2, VOCAB - 1);
    dir
}

fn encode(image: RgbImage, format: ImageFormat, mime: &str) -> Image {
    let mut data = Vec::new();
    image.write_to(&mut Cursor::new(&mut data), format).unwrap();
    Image {
        mime: mime.into(),
        data,
    }
}

/// PNG and JPEG, square and not, larger and smaller than the model's 32 px.
fn test_images() -> Vec<Image> {
    vec![
        encode(
            RgbImage::from_pixel(40, 40, Rgb([220, 20, 20])),
            ImageFormat::Png,
            "image/png",
        ),
        encode(
            RgbImage::from_fn(64, 24, |x, y| Rgb([(x * 4) as u8, (y * 10) as u8, 200])),
            ImageFormat::Jpeg,
            "image/jpeg",
        ),
        encode(
            RgbImage::from_pixel(12, 30, Rgb([20, 200, 60])),
            ImageFormat::Png,
            "image/png",
        ),
        encode(
            RgbImage::from_fn(33, 33, |x, y| {
                if (x / 4 + y / 4) % 2 == 0 {
                    Rgb([0, 0, 0])
                } else {
                    Rgb([255, 255, 255])
                }
            }),
            ImageFormat::Jpeg,
            "image/jpeg",
        ),
    ]
}

fn assert_unit(vectors: &[Vec<f32>]) {
    for (i, v) in vectors.iter().enumerate() {
        assert_eq!(v.len(), DIMS, "vector {i}");
        assert!(v.iter().all(|x| x.is_finite()), "vector {i}: {v:?}");
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "vector {i} has norm {norm}");
    }
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn assert_same(a: &[f32], b: &[f32], what: &str) {
    assert!(max_diff(a, b) < 1e-5, "{what}: {a:?} vs {b:?}");
}

fn assert_all_differ(vectors: &[Vec<f32>], what: &str) {
    for i in 0..vectors.len() {
        for j in i + 1..vectors.len() {
            assert!(
                max_diff(&vectors[i], &vectors[j]) > 1e-3,
                "{what} {i} and {j} are the same"
            );
        }
    }
}

#[tokio::test]
async fn images_become_unit_vectors_whatever_the_batch() {
    let dir = write_checkpoint("images");
    let clip = ClipEmbedder::load(&dir.0).unwrap();
    assert_eq!(clip.dims(), DIMS);
    assert!(clip.name().starts_with("clip:engram-clip-images-"), "{}", clip.name());

    let images = test_images();
    let batch = clip.embed_images(&images).await.unwrap();
    assert_eq!(batch.len(), images.len());
    assert_unit(&batch);
    assert_all_differ(&batch, "images");
    for (i, image) in images.iter().enumerate() {
        let alone = clip.embed_images(std::slice::from_ref(image)).await.unwrap();
        assert_same(&alone[0], &batch[i], &format!("image {i} alone and in the batch"));
    }
    // more images than one forward pass takes, in order
    let many: Vec<Image> = (0..37).map(|i| images[i % images.len()].clone()).collect();
    let out = clip.embed_images(&many).await.unwrap();
    for (i, v) in out.iter().enumerate() {
        assert_same(v, &batch[i % images.len()], &format!("image {i} of 37"));
    }
    assert!(clip.embed_images(&[]).await.unwrap().is_empty());

    // deterministic: the same files give the same vectors after a reload
    let again = ClipEmbedder::load(&dir.0).unwrap();
    let reloaded = again.embed_images(&images).await.unwrap();
    for (i, (a, b)) in batch.iter().zip(&reloaded).enumerate() {
        assert_same(a, b, &format!("image {i} after reloading"));
    }
}

#[tokio::test]
async fn texts_share_the_space_and_batching_does_not_change_them() {
    let dir = write_checkpoint("texts");
    let clip = ClipEmbedder::load(&dir.0).unwrap();
    let texts: Vec<String> = [
        "a red square",
        "a photo of a cat",
        "blue",
        "",
        "unknown words only",
        // longer than the 16 positions: truncated, the end token kept
        "a red square a blue circle a green cat a photo a red square a blue circle a green cat",
    ]
    .map(String::from)
    .to_vec();
    let batch = clip.embed_texts(&texts).await.unwrap();
    assert_eq!(batch.len(), texts.len());
    assert_unit(&batch);
    assert_all_differ(&batch, "texts");
    for (i, text) in texts.iter().enumerate() {
        let alone = clip.embed_texts(std::slice::from_ref(text)).await.unwrap();
        assert_same(&alone[0], &batch[i], &format!("text {i} alone and padded in the batch"));
    }
    let images = clip.embed_images(&test_images()[..1]).await.unwrap();
    assert_eq!(images[0].len(), batch[0].len(), "texts and images share one space");
    assert!(clip.embed_texts(&[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn corrupt_images_are_named() {
    let dir = write_checkpoint("corrupt");
    let clip = ClipEmbedder::load(&dir.0).unwrap();
    let mut state = 0x2545_f491_u32;
    let noise: Vec<u8> = (0..64)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect();
    let mut images = test_images();
    images.insert(
        2,
        Image {
            mime: "image/png".into(),
            data: noise,
        },
    );
    let err = clip.embed_images(&images).await.unwrap_err().to_string();
    assert!(err.contains("image 2 (image/png, 64 bytes)"), "{err}");
    // a truncated PNG: the signature is right, the rest is missing
    let mut cut = test_images().remove(0);
    cut.data.truncate(cut.data.len() / 2);
    let err = clip.embed_images(&[cut]).await.unwrap_err().to_string();
    assert!(err.contains("image 0"), "{err}");
}

#[test]
fn missing_files_are_named() {
    for file in ["model.safetensors", "config.json", "tokenizer.json"] {
        let dir = write_checkpoint("missing");
        std::fs::remove_file(dir.0.join(file)).unwrap();
        let err = ClipEmbedder::load(&dir.0)
            .err()
            .expect("loads without a file")
            .to_string();
        assert!(err.contains(file) && err.contains("--image-model-dir"), "{err}");
    }
}

#[test]
fn a_tokenizer_whose_end_token_is_not_the_largest_id_is_refused() {
    let dir = write_checkpoint("eot");
    write_tokenizer(&dir.0.join("tokenizer.json"), VOCAB - 1, VOCAB - 2);
    let err = ClipEmbedder::load(&dir.0).err().expect("loads").to_string();
    assert!(err.contains("largest id"), "{err}");
}

#[test]
fn a_checkpoint_without_class_embedding_is_refused() {
    let dir = TempDir::new("class");
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    ClipModel::new(vb, &tiny_config()).unwrap();
    varmap.save(dir.0.join("model.safetensors")).unwrap();
    std::fs::write(dir.0.join("config.json"), tiny_config_json().to_string()).unwrap();
    write_tokenizer(&dir.0.join("tokenizer.json"), VOCAB - 2, VOCAB - 1);
    let err = ClipEmbedder::load(&dir.0).err().expect("loads").to_string();
    assert!(err.contains("class_embedding"), "{err}");
}
