//! The built-in model reproduces sentence-transformers' all-MiniLM-L6-v2.
//! Needs the model unpacked by scripts/setup (ENGRAM_MODEL_DIR, set by
//! scripts/test); it fails rather than skips when the model is missing.

use engram_embed::local::LocalEmbedder;
use engram_embed::{cosine, Embedder};
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("ENGRAM_MODEL_DIR")
            .unwrap_or_else(|_| format!("{}/../../.engram/models/all-MiniLM-L6-v2", env!("CARGO_MANIFEST_DIR"))),
    )
}

#[tokio::test]
async fn reference_cosines_match_sentence_transformers() {
    let model = LocalEmbedder::load(&model_dir()).expect("run scripts/setup to unpack the local model");
    assert_eq!(model.dims(), 384);
    let texts: Vec<String> = [
        "The weather is lovely today.",
        "It's so sunny outside!",
        "He drove to the stadium.",
    ]
    .map(String::from)
    .to_vec();
    let v = model.embed(&texts).await.unwrap();
    assert_eq!(v.len(), 3);
    for e in &v {
        assert_eq!(e.len(), 384);
        let norm: f32 = e.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "L2-normalised: {norm}");
    }
    // sentence-transformers' published similarities for these sentences
    for (a, b, expected) in [(0, 1, 0.6660), (0, 2, 0.1046), (1, 2, 0.1411)] {
        let got = cosine(&v[a], &v[b]);
        assert!(
            (got - expected).abs() < 0.002,
            "cos({a},{b}) = {got:.4}, expected {expected}"
        );
    }
    // batching does not change a sentence's vector (padding is masked out)
    let alone = model.embed(&texts[2..]).await.unwrap();
    assert!(cosine(&alone[0], &v[2]) > 0.9999);
}

#[test]
fn a_missing_model_says_how_to_get_it() {
    let err = LocalEmbedder::load(std::path::Path::new("/nonexistent"))
        .err()
        .expect("error");
    assert!(err.to_string().contains("scripts/setup"), "{err}");
}
