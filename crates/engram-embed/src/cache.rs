//! A content-hash cache in front of any provider: identical content is
//! embedded once. Keys are SHA-256 digests of a scope and the text, so the
//! cache holds no text, and a caller that embeds within its own scope (the
//! adapter uses the owner) can never learn from a hit that another scope
//! embedded the same text. Bounded (FIFO eviction) so a long-running server cannot grow without
//! limit; sized for a working set, not for the whole database.

use crate::{EmbedError, Embedder};
use async_trait::async_trait;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

type Key = [u8; 32];

/// The vectors by key, and the keys in insertion order (for FIFO eviction).
#[derive(Default)]
struct Entries {
    map: HashMap<Key, Vec<f32>>,
    order: VecDeque<Key>,
}

pub struct Cached<E> {
    inner: E,
    capacity: usize,
    entries: Mutex<Entries>,
    hits: AtomicU64,
    misses: AtomicU64,
}

fn key(scope: &str, text: &str) -> Key {
    let mut h = Sha256::new();
    h.update(scope.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    h.finalize().into()
}

impl<E: Embedder> Cached<E> {
    pub fn new(inner: E, capacity: usize) -> Cached<E> {
        Cached {
            inner,
            capacity: capacity.max(1),
            entries: Mutex::new(Entries::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The provider itself, bypassing the cache (health checks must reach it).
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// (hits, misses) since start, for /metrics.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed))
    }

    fn lookup(&self, keys: &[Key]) -> Vec<Option<Vec<f32>>> {
        let guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        keys.iter().map(|k| guard.map.get(k).cloned()).collect()
    }

    fn store(&self, items: Vec<(Key, Vec<f32>)>) {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let Entries { map, order } = &mut *guard;
        for (k, v) in items {
            if map.insert(k, v).is_none() {
                order.push_back(k);
            }
            while map.len() > self.capacity {
                match order.pop_front() {
                    Some(old) => {
                        map.remove(&old);
                    }
                    None => break,
                }
            }
        }
    }
}

#[async_trait]
impl<E: Embedder> Embedder for Cached<E> {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn model(&self) -> String {
        self.inner.model()
    }

    fn dims(&self) -> usize {
        self.inner.dims()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_in("", texts).await
    }
}

impl<E: Embedder> Cached<E> {
    /// Embeds `texts`, sharing cached vectors only with calls of the same `scope`.
    pub async fn embed_in(&self, scope: &str, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let keys: Vec<Key> = texts.iter().map(|t| key(scope, t)).collect();
        let mut found = self.lookup(&keys);
        // Embed each distinct missing text once, even when repeated in the batch.
        let mut todo: Vec<(Key, String)> = Vec::new();
        for (i, f) in found.iter().enumerate() {
            if f.is_none() && !todo.iter().any(|(k, _)| *k == keys[i]) {
                todo.push((keys[i], texts[i].clone()));
            }
        }
        // a hit is a text served without embedding it (a repeat in the batch counts)
        self.hits
            .fetch_add((texts.len() - todo.len()) as u64, Ordering::Relaxed);
        self.misses.fetch_add(todo.len() as u64, Ordering::Relaxed);
        if !todo.is_empty() {
            let batch: Vec<String> = todo.iter().map(|(_, t)| t.clone()).collect();
            let vectors = self.inner.embed(&batch).await?;
            let fresh: Vec<(Key, Vec<f32>)> = todo.iter().map(|(k, _)| *k).zip(vectors).collect();
            for (i, f) in found.iter_mut().enumerate() {
                if f.is_none() {
                    *f = fresh.iter().find(|(k, _)| *k == keys[i]).map(|(_, v)| v.clone());
                }
            }
            self.store(fresh);
        }
        found
            .into_iter()
            .map(|v| v.ok_or_else(|| EmbedError::Model("provider returned too few vectors".into())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// A provider that records what it was asked to embed.
    struct Recorder(Arc<AtomicUsize>);

    #[async_trait]
    impl Embedder for Recorder {
        fn name(&self) -> String {
            "recorder".into()
        }
        fn dims(&self) -> usize {
            2
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
        }
    }

    #[tokio::test]
    async fn same_content_is_embedded_once() {
        let calls = Arc::new(AtomicUsize::new(0));
        let cached = Cached::new(Recorder(calls.clone()), 100);
        let a = cached
            .embed(&["tea".into(), "coffee".into(), "tea".into()])
            .await
            .unwrap();
        assert_eq!(a, vec![vec![3.0, 1.0], vec![6.0, 1.0], vec![3.0, 1.0]]);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let b = cached.embed(&["coffee".into()]).await.unwrap();
        assert_eq!(b, vec![vec![6.0, 1.0]]);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(cached.stats(), (2, 2));
    }

    #[tokio::test]
    async fn scopes_never_share_entries() {
        let calls = Arc::new(AtomicUsize::new(0));
        let cached = Cached::new(Recorder(calls.clone()), 100);
        cached.embed_in("alice", &["secret".into()]).await.unwrap();
        cached.embed_in("bob", &["secret".into()]).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2, "bob's call must not hit alice's entry");
        assert_eq!(cached.stats(), (0, 2));
        cached.embed_in("alice", &["secret".into()]).await.unwrap();
        assert_eq!(cached.stats(), (1, 2));
        // a scope cannot be forged by moving text across the separator
        cached.embed_in("alic", &["esecret".into()]).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn capacity_is_bounded() {
        let calls = Arc::new(AtomicUsize::new(0));
        let cached = Cached::new(Recorder(calls.clone()), 2);
        for t in ["a", "bb", "ccc"] {
            cached.embed(&[t.to_string()]).await.unwrap();
        }
        // "a" was evicted first
        cached.embed(&["a".into()]).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        cached.embed(&["ccc".into()]).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }
}
