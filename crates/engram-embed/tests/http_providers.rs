//! OpenAI-compatible and Ollama providers against a small real HTTP server
//! (axum on loopback) speaking each format: batching, ordering, retries with
//! backoff, timeouts, and refusal of wrong dimensions; and the CLIP image
//! provider, which sends images as data URIs and texts as strings to the same
//! OpenAI-compatible endpoint and normalises what comes back.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use engram_embed::http::{HttpOptions, OllamaEmbedder, OpenAiEmbedder};
use engram_embed::vision::http::OpenAiImageEmbedder;
use engram_embed::vision::{data_uri, Image, ImageEmbedder};
use engram_embed::Embedder;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Default)]
struct Behaviour {
    /// requests answered with 503 before the first success
    failures: AtomicUsize,
    /// answer after this delay (ms)
    delay_ms: AtomicUsize,
    /// dimension of returned vectors
    dims: AtomicUsize,
    requests: AtomicUsize,
    batch_sizes: std::sync::Mutex<Vec<usize>>,
    /// every input received, in order
    inputs: std::sync::Mutex<Vec<Value>>,
    /// answer with all-zero vectors
    zeros: AtomicBool,
}

fn vector_for(text: &str, dims: usize) -> Vec<f32> {
    (0..dims).map(|i| (text.len() + i) as f32).collect()
}

async fn handle(b: &Behaviour, body: &Value) -> Result<Vec<(usize, Vec<f32>)>, StatusCode> {
    b.requests.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(b.delay_ms.load(Ordering::SeqCst) as u64)).await;
    if b.failures.load(Ordering::SeqCst) > 0 {
        b.failures.fetch_sub(1, Ordering::SeqCst);
        return Err(StatusCode::SERVICE_UNAVAILABLE);
    }
    let inputs = body["input"].as_array().ok_or(StatusCode::BAD_REQUEST)?;
    b.batch_sizes.lock().unwrap().push(inputs.len());
    b.inputs.lock().unwrap().extend(inputs.iter().cloned());
    let dims = b.dims.load(Ordering::SeqCst);
    let zeros = b.zeros.load(Ordering::SeqCst);
    Ok(inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if zeros {
                (i, vec![0.0; dims])
            } else {
                (i, vector_for(t.as_str().unwrap_or(""), dims))
            }
        })
        .collect())
}

async fn openai(State(b): State<Arc<Behaviour>>, Json(body): Json<Value>) -> Result<Json<Value>, StatusCode> {
    let mut items: Vec<Value> = handle(&b, &body)
        .await?
        .into_iter()
        .map(|(i, v)| json!({"index": i, "embedding": v}))
        .collect();
    items.reverse(); // out of order on purpose: the client must sort by index
    Ok(Json(json!({"object": "list", "data": items, "model": body["model"]})))
}

async fn ollama(State(b): State<Arc<Behaviour>>, Json(body): Json<Value>) -> Result<Json<Value>, StatusCode> {
    let vectors: Vec<Vec<f32>> = handle(&b, &body).await?.into_iter().map(|(_, v)| v).collect();
    Ok(Json(json!({"model": body["model"], "embeddings": vectors})))
}

async fn server() -> (String, Arc<Behaviour>) {
    let b = Arc::new(Behaviour::default());
    b.dims.store(4, Ordering::SeqCst);
    let app = Router::new()
        .route("/v1/embeddings", post(openai))
        .route("/api/embed", post(ollama))
        .with_state(b.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), b)
}

fn options() -> HttpOptions {
    HttpOptions {
        timeout: Duration::from_millis(500),
        retries: 2,
        backoff: Duration::from_millis(10),
        batch_size: 3,
        api_key: Some("sk-test".into()),
    }
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| "x".repeat(i + 1)).collect()
}

#[tokio::test]
async fn both_formats_batch_and_keep_order() {
    let (url, b) = server().await;
    let openai = OpenAiEmbedder::new(&url, "text-embedding-3-small", 4, options()).unwrap();
    let ollama = OllamaEmbedder::new(&url, "nomic-embed-text", 4, options()).unwrap();
    for provider in [&openai as &dyn Embedder, &ollama] {
        let out = provider.embed(&texts(7)).await.unwrap();
        assert_eq!(out.len(), 7);
        for (i, v) in out.iter().enumerate() {
            assert_eq!(v, &vector_for(&"x".repeat(i + 1), 4), "{}: vector {i}", provider.name());
        }
    }
    // 7 inputs in batches of at most 3, for each provider
    assert_eq!(*b.batch_sizes.lock().unwrap(), vec![3, 3, 1, 3, 3, 1]);
}

#[tokio::test]
async fn transient_failures_are_retried_with_backoff() {
    let (url, b) = server().await;
    b.failures.store(2, Ordering::SeqCst);
    let ollama = OllamaEmbedder::new(&url, "m", 4, options()).unwrap();
    let out = ollama.embed(&texts(1)).await.unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(b.requests.load(Ordering::SeqCst), 3, "two 503s, then success");
    // more failures than retries: a clear error
    b.failures.store(10, Ordering::SeqCst);
    let err = ollama.embed(&texts(1)).await.unwrap_err().to_string();
    assert!(err.contains("503") && err.contains("3 attempts"), "{err}");
}

#[tokio::test]
async fn slow_services_time_out() {
    let (url, b) = server().await;
    b.delay_ms.store(2000, Ordering::SeqCst);
    let openai = OpenAiEmbedder::new(&url, "m", 4, options()).unwrap();
    let started = std::time::Instant::now();
    let err = openai.embed(&texts(1)).await.unwrap_err().to_string();
    assert!(err.contains("3 attempts"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "three 500 ms timeouts, not the 2 s replies"
    );
}

#[tokio::test]
async fn wrong_dimensions_and_unreachable_services_are_errors() {
    let (url, b) = server().await;
    b.dims.store(5, Ordering::SeqCst);
    let openai = OpenAiEmbedder::new(&url, "m", 4, options()).unwrap();
    let err = openai.embed(&texts(1)).await.unwrap_err().to_string();
    assert!(err.contains("5 dimensions, expected 4"), "{err}");
    let nowhere = OllamaEmbedder::new("http://127.0.0.1:9", "m", 4, options()).unwrap();
    assert!(nowhere.embed(&texts(1)).await.is_err());
}

fn image(mime: &str, data: &[u8]) -> Image {
    Image {
        mime: mime.into(),
        data: data.to_vec(),
    }
}

fn assert_unit_and_parallel(got: &[f32], raw: &[f32]) {
    let norm = got.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    assert!(
        (engram_embed::cosine(got, raw) - 1.0).abs() < 1e-5,
        "{got:?} is not along {raw:?}"
    );
}

#[tokio::test]
async fn images_go_as_data_uris_and_texts_as_strings() {
    let (url, b) = server().await;
    let clip = OpenAiImageEmbedder::new(&format!("{url}/"), "clip-vit-b-32", 4, options()).unwrap();
    assert_eq!(clip.name(), format!("openai:clip-vit-b-32@{url}"));
    assert_eq!(clip.dims(), 4);
    let images: Vec<Image> = (0..4u8)
        .map(|i| {
            image(
                if i % 2 == 0 { "image/png" } else { "image/jpeg" },
                &[0x89, b'P', b'N', b'G', i],
            )
        })
        .collect();
    let out = clip.embed_images(&images).await.unwrap();
    assert_eq!(out.len(), 4);
    let sent: Vec<String> = b
        .inputs
        .lock()
        .unwrap()
        .drain(..)
        .map(|v| v.as_str().expect("inputs are strings").to_string())
        .collect();
    assert_eq!(sent, images.iter().map(data_uri).collect::<Vec<_>>());
    assert_eq!(sent[0], "data:image/png;base64,iVBORwA=");
    assert!(sent[1].starts_with("data:image/jpeg;base64,"));
    for (v, uri) in out.iter().zip(&sent) {
        // the server's vectors are not unit length; the client's are
        assert_unit_and_parallel(v, &vector_for(uri, 4));
    }
    // 4 images in batches of at most 3
    assert_eq!(*b.batch_sizes.lock().unwrap(), vec![3, 1]);

    let texts = vec!["a red square".to_string(), "a cat".to_string()];
    let out = clip.embed_texts(&texts).await.unwrap();
    assert_eq!(*b.inputs.lock().unwrap(), vec![json!("a red square"), json!("a cat")]);
    for (v, text) in out.iter().zip(&texts) {
        assert_unit_and_parallel(v, &vector_for(text, 4));
    }
    assert!(clip.embed_images(&[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn image_vectors_are_checked() {
    let (url, b) = server().await;
    let clip = OpenAiImageEmbedder::new(&url, "clip", 4, options()).unwrap();
    b.dims.store(5, Ordering::SeqCst);
    let err = clip
        .embed_images(&[image("image/png", b"x")])
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("5 dimensions, expected 4"), "{err}");
    let err = clip.embed_texts(&["x".to_string()]).await.unwrap_err().to_string();
    assert!(err.contains("5 dimensions, expected 4"), "{err}");
    b.dims.store(4, Ordering::SeqCst);
    b.zeros.store(true, Ordering::SeqCst);
    let err = clip
        .embed_images(&[image("image/png", b"x"), image("image/png", b"y")])
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("zero") && err.contains("image 0"), "{err}");
}
