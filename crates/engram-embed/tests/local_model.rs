//! The built-in models reproduce sentence-transformers' all-MiniLM-L6-v2:
//! the f32 one (candle) to 0.002 of the published cosines, the int8 one
//! (ONNX Runtime, the default) to 0.01, and the int8 vectors point where
//! the f32 ones do. Needs the files unpacked by scripts/setup
//! (ENGRAM_MODEL_DIR and ENGRAM_ONNX_RUNTIME, set by scripts/lib.sh); it
//! fails rather than skips when they are missing.

use engram_embed::local::LocalEmbedder;
use engram_embed::onnx::OnnxEmbedder;
use engram_embed::{cosine, installed_model_dir as model_dir, Embedder};

fn reference_texts() -> Vec<String> {
    [
        "The weather is lovely today.",
        "It's so sunny outside!",
        "He drove to the stadium.",
    ]
    .map(String::from)
    .to_vec()
}

/// Checks unit length, sentence-transformers' published similarities for
/// the reference texts (to `tolerance`), and that batching does not change
/// a vector (padding is masked out).
async fn check_reference(model: &dyn Embedder, tolerance: f32) -> Vec<Vec<f32>> {
    assert_eq!(model.dims(), 384);
    let texts = reference_texts();
    let v = model.embed(&texts).await.unwrap();
    assert_eq!(v.len(), 3);
    for e in &v {
        assert_eq!(e.len(), 384);
        let norm: f32 = e.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "L2-normalised: {norm}");
    }
    for (a, b, expected) in [(0, 1, 0.6660), (0, 2, 0.1046), (1, 2, 0.1411)] {
        let got = cosine(&v[a], &v[b]);
        assert!(
            (got - expected).abs() < tolerance,
            "{}: cos({a},{b}) = {got:.4}, expected {expected} ± {tolerance}",
            model.name()
        );
    }
    let alone = model.embed(&texts[2..]).await.unwrap();
    assert!(cosine(&alone[0], &v[2]) > 0.9999);
    v
}

#[tokio::test]
async fn reference_cosines_match_sentence_transformers() {
    let model = LocalEmbedder::load(&model_dir()).expect("run scripts/setup to unpack the local model");
    check_reference(&model, 0.002).await;
}

#[tokio::test]
async fn the_int8_model_stays_within_001_of_the_reference() {
    let int8 = OnnxEmbedder::from_env().expect("run scripts/setup to unpack the int8 model and ONNX Runtime");
    check_reference(&int8, 0.01).await;
    // Sentence by sentence, the int8 vector points where the f32 one does,
    // and pairwise similarities move by less than 0.01 (conflict and
    // duplicate thresholds are cosines).
    let f32 = LocalEmbedder::load(&model_dir()).expect("run scripts/setup to unpack the local model");
    let mut texts: Vec<String> = [
        "The standup is at 9 every weekday in the small meeting room.",
        "Correction: the standup moved to 10 starting next Monday.",
        "Deploy failed with error E4021 after the migration timed out.",
        "Priya prefers tea over coffee in the afternoon.",
        "Ticket ENG-2291 tracks the flaky login test on CI.",
        "We agreed to ship the billing export before the end of the quarter.",
        "Tea.",
    ]
    .map(String::from)
    .to_vec();
    // Longer than the 256 tokens both models keep: cut at the same place.
    texts.push("The migration runbook has many steps and each one is checked twice. ".repeat(30));
    let a = int8.embed(&texts).await.unwrap();
    let b = f32.embed(&texts).await.unwrap();
    for i in 0..texts.len() {
        let same = cosine(&a[i], &b[i]);
        assert!(same > 0.99, "int8 vs f32 for {:?}: {same:.4}", texts[i]);
        for j in i + 1..texts.len() {
            let moved = (cosine(&a[i], &a[j]) - cosine(&b[i], &b[j])).abs();
            assert!(moved < 0.01, "pair ({i},{j}) moved by {moved:.4}");
        }
    }
    // Concurrent callers each get a session and the same answers.
    let int8 = std::sync::Arc::new(int8);
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let m = std::sync::Arc::clone(&int8);
            let t = texts.clone();
            tokio::spawn(async move { m.embed(&t).await.unwrap() })
        })
        .collect();
    for h in handles {
        let got = h.await.unwrap();
        assert!(got.iter().zip(&a).all(|(x, y)| cosine(x, y) > 0.9999));
    }
}

#[test]
fn a_missing_model_says_how_to_get_it() {
    let err = LocalEmbedder::load(std::path::Path::new("/nonexistent"))
        .err()
        .expect("error");
    assert!(err.to_string().contains("scripts/setup"), "{err}");
}

#[test]
fn a_missing_int8_model_or_runtime_says_how_to_get_it() {
    let err = OnnxEmbedder::load(
        std::path::Path::new("/nonexistent"),
        std::path::Path::new("/nonexistent.so"),
    )
    .err()
    .expect("error");
    assert!(err.to_string().contains("scripts/setup"), "{err}");
    let err = OnnxEmbedder::load(&model_dir(), std::path::Path::new("/nonexistent.so"))
        .err()
        .expect("error");
    assert!(err.to_string().contains("ONNX Runtime"), "{err}");
}
