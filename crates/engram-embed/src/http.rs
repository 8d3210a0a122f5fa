//! Embedding services over HTTP: OpenAI-compatible `POST {url}/v1/embeddings`
//! and Ollama `POST {url}/api/embed`. Both take `{model, input: [texts]}`;
//! they differ in the response shape. Requests are batched, time out, and are
//! retried with exponential backoff on connection errors, timeouts, 429 and
//! 5xx (never on other 4xx: those will not get better).

use crate::{check_dims, EmbedError, Embedder};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// How a request is sent and retried.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub timeout: Duration,
    pub retries: u32,
    pub backoff: Duration,
    pub batch_size: usize,
    pub api_key: Option<String>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            timeout: Duration::from_secs(30),
            retries: 3,
            backoff: Duration::from_millis(200),
            batch_size: 64,
            api_key: None,
        }
    }
}

/// The response shape a service speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    OpenAi,
    Ollama,
}

/// One embeddings endpoint: posts `{model, input: [strings]}` in batches and
/// checks what comes back. Shared with [`crate::vision::http`], whose inputs
/// are data URIs as well as texts.
pub(crate) struct Client {
    http: reqwest::Client,
    endpoint: String,
    pub(crate) model: String,
    pub(crate) dims: usize,
    options: HttpOptions,
    format: Format,
}

#[derive(Deserialize)]
struct OpenAiResponse {
    data: Vec<OpenAiItem>,
}

#[derive(Deserialize)]
struct OpenAiItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

#[derive(Deserialize)]
struct OllamaResponse {
    embeddings: Vec<Vec<f32>>,
}

impl Client {
    pub(crate) fn new(
        base_url: &str,
        path: &str,
        model: &str,
        dims: usize,
        options: HttpOptions,
        format: Format,
    ) -> Result<Client, EmbedError> {
        // Credentials in the URL would go out as Basic auth to whatever
        // answers; the key belongs in the api key option (a bearer token).
        if let Ok(u) = reqwest::Url::parse(base_url) {
            if !u.username().is_empty() || u.password().is_some() {
                return Err(EmbedError::Http {
                    url: "(a URL with credentials)".into(),
                    message: "the embedding service URL carries credentials (user:password@); remove them and \
                              pass the key as the API key (--embedder-api-key / --image-embedder-api-key)"
                        .into(),
                });
            }
        }
        // Redirects are not followed: a 307 would re-send the texts (and
        // the bearer key) to another host.
        let http = reqwest::Client::builder()
            .timeout(options.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| EmbedError::Http {
                url: base_url.into(),
                message: e.to_string(),
            })?;
        Ok(Client {
            http,
            endpoint: format!("{}{path}", base_url.trim_end_matches('/')),
            model: model.to_string(),
            dims,
            options,
            format,
        })
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> EmbedError {
        EmbedError::Http {
            url: self.endpoint.clone(),
            message: message.into(),
        }
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = json!({ "model": self.model, "input": texts });
        let mut attempt = 0;
        loop {
            let mut request = self.http.post(&self.endpoint).json(&body);
            if let Some(key) = &self.options.api_key {
                request = request.bearer_auth(key);
            }
            let outcome = match request.send().await {
                Ok(resp) if resp.status().is_success() => {
                    return self.parse(resp.text().await.map_err(|e| self.error(e.to_string()))?, texts.len());
                }
                Ok(resp) => {
                    let status = resp.status();
                    let text = resp.text().await.unwrap_or_default();
                    let retryable = status.as_u16() == 429 || status.is_server_error();
                    (
                        retryable,
                        format!("HTTP {status}: {}", text.chars().take(200).collect::<String>()),
                    )
                }
                Err(e) => (e.is_timeout() || e.is_connect() || e.is_request(), e.to_string()),
            };
            let (retryable, message) = outcome;
            if !retryable || attempt >= self.options.retries {
                return Err(self.error(format!("{message} (after {} attempts)", attempt + 1)));
            }
            let delay = self.options.backoff * 2u32.pow(attempt);
            tracing::warn!(endpoint = %self.endpoint, attempt, ?delay, %message, "embedding request failed; retrying");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    fn parse(&self, body: String, expected: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let vectors = match self.format {
            Format::OpenAi => {
                let mut r: OpenAiResponse =
                    serde_json::from_str(&body).map_err(|e| self.error(format!("unexpected response: {e}")))?;
                // the API may return items out of order; `index` says where each goes
                r.data.sort_by_key(|item| item.index.unwrap_or(0));
                r.data.into_iter().map(|item| item.embedding).collect::<Vec<_>>()
            }
            Format::Ollama => {
                serde_json::from_str::<OllamaResponse>(&body)
                    .map_err(|e| self.error(format!("unexpected response: {e}")))?
                    .embeddings
            }
        };
        if vectors.len() != expected {
            return Err(self.error(format!("{} vectors for {expected} inputs", vectors.len())));
        }
        check_dims(&vectors, self.dims)?;
        Ok(vectors)
    }

    /// One vector per input string, in order, posted `batch_size` at a time;
    /// each has the configured dimension.
    pub(crate) async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.options.batch_size.max(1)) {
            out.extend(self.embed_batch(chunk).await?);
        }
        Ok(out)
    }
}

/// An OpenAI-compatible embeddings API (`{url}/v1/embeddings`).
pub struct OpenAiEmbedder(Client);

impl OpenAiEmbedder {
    pub fn new(base_url: &str, model: &str, dims: usize, options: HttpOptions) -> Result<Self, EmbedError> {
        Client::new(base_url, "/v1/embeddings", model, dims, options, Format::OpenAi).map(OpenAiEmbedder)
    }
}

/// Ollama's embedding API (`{url}/api/embed`).
pub struct OllamaEmbedder(Client);

impl OllamaEmbedder {
    pub fn new(base_url: &str, model: &str, dims: usize, options: HttpOptions) -> Result<Self, EmbedError> {
        Client::new(base_url, "/api/embed", model, dims, options, Format::Ollama).map(OllamaEmbedder)
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn name(&self) -> String {
        format!("openai:{}", self.0.model)
    }
    fn dims(&self) -> usize {
        self.0.dims
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.0.embed(texts).await
    }
}

#[async_trait]
impl Embedder for OllamaEmbedder {
    fn name(&self) -> String {
        format!("ollama:{}", self.0.model)
    }
    fn dims(&self) -> usize {
        self.0.dims
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.0.embed(texts).await
    }
}

#[cfg(test)]
mod url_tests {
    use super::*;

    #[test]
    fn credentials_in_the_url_are_refused() {
        let new = |url: &str| Client::new(url, "/v1/embeddings", "m", 3, HttpOptions::default(), Format::OpenAi);
        let e = new("http://user:secret@127.0.0.1:9").err().unwrap().to_string();
        assert!(e.contains("credentials") && !e.contains("secret"), "{e}");
        assert!(new("http://127.0.0.1:9").is_ok());
    }
}
