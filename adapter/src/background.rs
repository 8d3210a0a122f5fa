//! Work done off the write path : embedding the backlog of
//! captured events and, with `--vision`, of stored images, and writing
//! session summaries when a summarizer is configured.
//!
//! `memory_capture` stores an event without an embedding and returns at
//! once; the rows without one are the queue (engram.embedding_backlog), so
//! nothing is lost when engram-mcp dies. This worker drains an owner's
//! backlog in batches, bound with that owner's token like any tool call:
//! it never reads another owner's rows. After a restart it learns of an
//! owner's leftover backlog on the owner's first call (`note`).
//!
//! Fairness: a job embeds one batch and, when more is left, queues the
//! owner again behind everyone else, so one owner's large backlog never
//! holds up another's. Summaries run at most `SUMMARIES_AT_ONCE` at a time,
//! and a session whose summary failed is not tried again for
//! `SUMMARY_RETRY_AFTER`.

use crate::caller::Caller;
use crate::db::{first, DbError, RowExt};
use crate::summarizer::Summarizer;
use crate::tools::Shared;
use pgvector::Vector;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use uuid::Uuid;

/// Rows embedded per round trip.
const BATCH: i32 = 32;

/// Summarizer requests in flight at once (each also holds a database
/// connection for its three calls).
const SUMMARIES_AT_ONCE: usize = 2;

/// How long a session whose summary failed waits before the next try.
const SUMMARY_RETRY_AFTER: Duration = Duration::from_secs(600);

/// A text the embedder refuses on its own is embedded from its first
/// characters instead (a hosted model's input limit, say).
const FALLBACK_CHARS: usize = 2000;

enum Job {
    /// Drain this caller's backlog.
    Embed(Caller),
    /// Embed this caller's images that have no embedding yet (--vision).
    EmbedImages(Caller),
    /// Summarize this caller's session, if a summary is still due.
    Summarize(Caller, String),
}

/// The handle tools use to hand work to the worker.
pub struct Background {
    tx: mpsc::UnboundedSender<Job>,
    /// Owners with an Embed job queued and not yet started: a burst of
    /// captures queues one job.
    queued: Mutex<HashSet<String>>,
    /// The same for EmbedImages jobs.
    queued_images: Mutex<HashSet<String>>,
    /// Whether images are embedded (--vision).
    vision: bool,
    /// Per owner, the images the embedder refused (not decodable, say):
    /// skipped by later batches of this process, so they cannot hold up
    /// the owner's other images.
    refused: Mutex<Bounded<String, Vec<String>>>,
    /// Owners whose backlog was drained at least once since start-up (the
    /// oldest forgotten past `MAX_SEEN`: such an owner's next call checks
    /// its backlog once more, which costs one query).
    seen: Mutex<Bounded<String, ()>>,
    /// (owner, session) pairs with a summary being written: captures past
    /// the threshold keep saying a summary is due until it is stored.
    summarizing: Arc<Mutex<HashSet<(String, String)>>>,
    /// When a session's last summary attempt failed.
    failed: Mutex<Bounded<(String, String), Instant>>,
    summarizer: bool,
}

/// The receiving end, for [`run`].
pub struct Worker {
    rx: mpsc::UnboundedReceiver<Job>,
    wait: Duration,
    summarizer: Option<Summarizer>,
}

impl Background {
    /// `wait`: how long the worker waits after the first capture of a burst
    /// before it embeds, so that one batch takes the whole burst.
    pub fn new(wait: Duration, summarizer: Option<Summarizer>, vision: bool) -> (Background, Worker) {
        let (tx, rx) = mpsc::unbounded_channel();
        let bg = Background {
            tx,
            queued: Mutex::new(HashSet::new()),
            queued_images: Mutex::new(HashSet::new()),
            vision,
            refused: Mutex::new(Bounded::new(MAX_REFUSED_OWNERS)),
            seen: Mutex::new(Bounded::new(MAX_SEEN)),
            summarizing: Default::default(),
            failed: Mutex::new(Bounded::new(MAX_FAILED)),
            summarizer: summarizer.is_some(),
        };
        (bg, Worker { rx, wait, summarizer })
    }

    /// Schedules embedding of the caller's backlog (after a capture that
    /// stored no embedding).
    pub fn embed(&self, c: &Caller) {
        if plain(c) {
            self.enqueue(&self.queued, c, Job::Embed);
        }
    }

    /// Sends `job` for the caller's owner unless one of its kind is queued
    /// and not yet started (`queued`): a burst of writes queues one job.
    fn enqueue(&self, queued: &Mutex<HashSet<String>>, c: &Caller, job: fn(Caller) -> Job) {
        let fresh = queued.lock().unwrap_or_else(|p| p.into_inner()).insert(c.owner.clone());
        if fresh {
            let _ = self.tx.send(job(c.clone()));
        }
    }

    /// The first call of an owner since start-up also drains what an earlier
    /// process left in the owner's backlog.
    pub fn note(&self, c: &Caller) {
        if !plain(c) {
            return;
        }
        let first = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(c.owner.clone(), ());
        if first {
            self.embed(c);
            self.embed_images(c);
        }
    }

    /// Schedules embedding of the caller's images without an embedding
    /// (after memory_image_put), when vision is on.
    pub fn embed_images(&self, c: &Caller) {
        if self.vision && plain(c) {
            self.enqueue(&self.queued_images, c, Job::EmbedImages);
        }
    }

    /// Whether engram-mcp writes summaries itself (--summarizer-url).
    pub fn summarizes(&self) -> bool {
        self.summarizer
    }

    /// Schedules a summary of the session (a capture said one is due).
    pub fn summarize(&self, c: &Caller, session: &str) {
        if self.summarizer && plain(c) {
            let key = (c.owner.clone(), session.to_string());
            let recently_failed = self
                .failed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .is_some_and(|at| at.elapsed() < SUMMARY_RETRY_AFTER);
            if recently_failed {
                return;
            }
            if self.summarizing.lock().unwrap_or_else(|p| p.into_inner()).insert(key) {
                let _ = self.tx.send(Job::Summarize(c.clone(), session.to_string()));
            }
        }
    }
}

/// Owners whose drained backlog the worker remembers (`Background::seen`).
const MAX_SEEN: usize = 100_000;

/// Owners whose refused images the worker remembers (each up to `MAX_REFUSED`).
const MAX_REFUSED_OWNERS: usize = 256;

/// Sessions whose failed summary the worker remembers (`SUMMARY_RETRY_AFTER`).
const MAX_FAILED: usize = 10_000;

/// A map that holds at most `cap` keys: inserting a new key into a full map
/// forgets the oldest one. What the worker remembers per owner or session
/// must not grow with every owner a platform token can name.
pub(crate) struct Bounded<K, V> {
    map: HashMap<K, V>,
    /// Keys, oldest first.
    order: VecDeque<K>,
    cap: usize,
}

impl<K: std::hash::Hash + Eq + Clone, V> Bounded<K, V> {
    pub fn new(cap: usize) -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    #[cfg(test)]
    pub fn size(&self) -> usize {
        self.map.len()
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    /// Sets `k`; returns whether it is new.
    pub fn insert(&mut self, k: K, v: V) -> bool {
        if let Some(old) = self.map.get_mut(&k) {
            *old = v;
            return false;
        }
        self.make_room();
        self.order.push_back(k.clone());
        self.map.insert(k, v);
        true
    }

    /// The value of `k`, inserted as `V::default()` when absent.
    pub fn get_or_default(&mut self, k: K) -> &mut V
    where
        V: Default,
    {
        if !self.map.contains_key(&k) {
            self.make_room();
            self.order.push_back(k.clone());
        }
        self.map.entry(k).or_default()
    }

    fn make_room(&mut self) {
        while self.map.len() >= self.cap {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.map.remove(&oldest);
                }
                None => break,
            }
        }
    }
}

/// Only calls without an internal context (ghost or agent headers) read
/// and write the owner's own memories, where captured events live.
fn plain(c: &Caller) -> bool {
    matches!(c.internal, Ok(None))
}

/// Runs the worker until the process ends: embedding jobs one at a time (a
/// single embedder is the bottleneck anyway), summaries concurrently.
pub async fn run(shared: Arc<Shared>, mut w: Worker) {
    let summarizer = w.summarizer.take().map(Arc::new);
    let slots = Arc::new(tokio::sync::Semaphore::new(SUMMARIES_AT_ONCE));
    while let Some(first) = w.rx.recv().await {
        // One wait per burst: the jobs queued meanwhile run after it too.
        tokio::time::sleep(w.wait).await;
        let mut jobs = vec![first];
        while let Ok(job) = w.rx.try_recv() {
            jobs.push(job);
        }
        for job in jobs {
            run_job(&shared, job, summarizer.clone(), slots.clone()).await;
        }
    }
}

async fn run_job(
    shared: &Arc<Shared>,
    job: Job,
    summarizer: Option<Arc<Summarizer>>,
    slots: Arc<tokio::sync::Semaphore>,
) {
    match job {
        Job::Embed(c) => {
            shared
                .background
                .seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(c.owner.clone(), ());
            let round = embed_batch(shared, &c);
            // The rows stay in the backlog on an error; the owner's next capture retries.
            embedding_round(&shared.background.queued, &c, "embedding backlog", round, || {
                shared.background.embed(&c)
            })
            .await;
        }
        Job::EmbedImages(c) => {
            let round = embed_images(shared, &c);
            // The images stay without an embedding on an error; the owner's next put retries.
            embedding_round(&shared.background.queued_images, &c, "image embedding", round, || {
                shared.background.embed_images(&c)
            })
            .await;
        }
        Job::Summarize(c, session) => {
            if let Some(s) = summarizer {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let result = match slots.acquire_owned().await {
                        Ok(_slot) => summarize(&shared, &s, &c, &session).await,
                        Err(_) => return,
                    };
                    let key = (c.owner.clone(), session.clone());
                    if result.is_err() {
                        shared
                            .background
                            .failed
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(key.clone(), Instant::now());
                    }
                    shared
                        .background
                        .summarizing
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&key);
                    match result {
                        Ok(true) => tracing::info!(owner = %c.owner, session = %session, "session summarized"),
                        Ok(false) => {}
                        Err(e) => tracing::warn!(owner = %c.owner, session = %session, error = %e,
                                                     "summary not written; memory_summarize can write it"),
                    }
                });
            }
        }
    }
}

/// One batch of an owner's embedding work (`round`: how many it stored, and
/// whether more may be left). The owner leaves `queued` first, so a write
/// during the round queues the next one; with more left it is queued again
/// (`requeue`), behind every owner queued meanwhile.
async fn embedding_round(
    queued: &Mutex<HashSet<String>>,
    c: &Caller,
    what: &str,
    round: impl std::future::Future<Output = Result<(usize, bool), String>>,
    requeue: impl FnOnce(),
) {
    queued.lock().unwrap_or_else(|p| p.into_inner()).remove(&c.owner);
    match round.await {
        Ok((n, more)) => {
            if n > 0 {
                tracing::info!(owner = %c.owner, embedded = n, more, "{what} batch");
            }
            if more {
                requeue();
            }
        }
        Err(e) => tracing::warn!(owner = %c.owner, error = %e, "{what}: will retry"),
    }
}

/// Embeds one batch of the caller's backlog; returns how many rows it set
/// and whether more may be left.
async fn embed_batch(shared: &Shared, c: &Caller) -> Result<(usize, bool), String> {
    let rows = shared
        .db
        .call(
            c,
            "SELECT id, content, previous FROM engram.embedding_backlog(lim => $1::integer)",
            &[&BATCH],
        )
        .await
        .map_err(|e: DbError| e.message)?;
    if rows.is_empty() {
        return Ok((0, false));
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.col(0)).collect::<Result<_, _>>()?;
    // With --turn-context, a conversation turn is embedded with the turn
    // before it (as remember does).
    let texts: Vec<String> = rows
        .iter()
        .map(|r| {
            let (content, previous): (String, Option<String>) = (r.col(1)?, r.col(2)?);
            let previous = previous.filter(|_| shared.turn_context);
            Ok(engram_core::conversation::contextual_text(
                &content,
                previous.as_deref(),
            ))
        })
        .collect::<Result<_, String>>()?;
    let vectors = match embed(shared, c, &texts).await {
        Ok(v) => v,
        // One text the embedder refuses must not block the rest for good:
        // embed them one by one, a refused one from its first characters.
        Err(_) => {
            let mut one_by_one = Vec::with_capacity(texts.len());
            for t in &texts {
                let v = match embed(shared, c, std::slice::from_ref(t)).await {
                    Ok(v) => v,
                    Err(_) => embed(shared, c, &[t.chars().take(FALLBACK_CHARS).collect()]).await?,
                };
                one_by_one.extend(v);
            }
            one_by_one
        }
    };
    let set = shared
        .db
        .call(
            c,
            "SELECT engram.set_embeddings(ids => $1::uuid[], embeddings => $2::vector[])",
            &[&ids, &vectors],
        )
        .await
        .map_err(|e| e.message)?;
    let n: i32 = first(&set)?.col(0)?;
    // A full batch of which nothing changed was embedded by another
    // process: stop rather than spin.
    Ok((n as usize, rows.len() == BATCH as usize && n > 0))
}

/// Images embedded per round trip (each row carries the image's bytes).
const IMAGE_BATCH: i32 = 8;

/// Refused images remembered per owner (beyond it, a full batch of refused
/// images ends that owner's round until the next put).
const MAX_REFUSED: usize = 1000;

/// Embeds one batch of the caller's images without an embedding; returns
/// how many it stored and whether more may be left. An image the embedder
/// refuses on its own (say, one it cannot decode) is logged and left
/// unembedded: it stays stored and retrievable, just not searchable.
async fn embed_images(shared: &Shared, c: &Caller) -> Result<(usize, bool), String> {
    let Some(vision) = shared.vision.as_deref() else {
        return Ok((0, false));
    };
    let skip: Vec<String> = shared
        .background
        .refused
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&c.owner)
        .cloned()
        .unwrap_or_default();
    let rows = shared
        .db
        .call(
            c,
            "SELECT sha256, mime, data FROM engram.image_backlog(lim => $1::integer, skip => $2::text[])",
            &[&IMAGE_BATCH, &skip],
        )
        .await
        .map_err(|e: DbError| e.message)?;
    if rows.is_empty() {
        return Ok((0, false));
    }
    let shas: Vec<String> = rows.iter().map(|r| r.col(0)).collect::<Result<_, _>>()?;
    let images: Vec<engram_embed::vision::Image> = rows
        .iter()
        .map(|r| {
            Ok(engram_embed::vision::Image {
                mime: r.col(1)?,
                data: r.col(2)?,
            })
        })
        .collect::<Result<_, String>>()?;
    let started = Instant::now();
    let batch = vision.embed_images(&images).await;
    shared.metrics.embedding(started.elapsed(), batch.is_ok());
    let mut newly_refused = 0;
    let vectors: Vec<Option<Vec<f32>>> = match batch {
        Ok(v) => v.into_iter().map(Some).collect(),
        // One by one: an image the embedder refuses on its own must not
        // block the rest.
        Err(batch_error) => {
            let mut one_by_one = Vec::with_capacity(images.len());
            let mut failed = Vec::new();
            for (image, sha) in images.iter().zip(&shas) {
                match vision.embed_images(std::slice::from_ref(image)).await {
                    Ok(mut v) => one_by_one.push(Some(v.remove(0))),
                    Err(e) => {
                        failed.push((sha.clone(), e.to_string()));
                        one_by_one.push(None);
                    }
                }
            }
            // All failed: either the embedder is down (they wait in the
            // backlog for a later round) or these images are bad (they must
            // not hold up the owner's newer ones). A text tells which.
            if failed.len() == images.len() && vision.embed_texts(&["engram probe".to_string()]).await.is_err() {
                return Err(format!("the image embedder is not answering: {batch_error}"));
            }
            // The embedder works: the failed images are refused for what
            // they are, and skipped by this process from now on.
            let mut refused = shared.background.refused.lock().unwrap_or_else(|p| p.into_inner());
            let list = refused.get_or_default(c.owner.clone());
            for (sha, e) in failed {
                tracing::warn!(owner = %c.owner, sha256 = %sha, error = %e, "image not embedded: the embedder refuses it");
                if list.len() < MAX_REFUSED {
                    list.push(sha);
                    newly_refused += 1;
                }
            }
            one_by_one
        }
    };
    let model = vision.name();
    let mut stored = 0;
    for (sha, v) in shas.iter().zip(vectors) {
        let Some(v) = v else { continue };
        shared
            .db
            .call(
                c,
                "SELECT engram.vision_embed(sha256 => $1, embedding => $2, model => $3)",
                &[sha, &Vector::from(v), &model],
            )
            .await
            .map_err(|e| e.message)?;
        stored += 1;
    }
    // More when this batch was full and settled something: refused images
    // are skipped from now on, so every round makes progress (no spinning).
    let progress = stored > 0 || newly_refused > 0;
    Ok((stored, rows.len() == IMAGE_BATCH as usize && progress))
}

async fn embed(shared: &Shared, c: &Caller, texts: &[String]) -> Result<Vec<Vector>, String> {
    let started = Instant::now();
    let vectors = shared.embedder.embed_in(&c.owner, texts).await;
    shared.metrics.embedding(started.elapsed(), vectors.is_ok());
    Ok(vectors
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(Vector::from)
        .collect())
}

/// Writes the session's summary if one is still due; returns whether it did.
async fn summarize(shared: &Shared, s: &Summarizer, c: &Caller, session: &str) -> Result<bool, String> {
    let due = shared
        .db
        .call(c, "SELECT engram.summary_due(session_id => $1::text)", &[&session])
        .await
        .map_err(|e| e.message)?;
    if !first(&due)?.col::<bool>(0)? {
        return Ok(false);
    }
    let rows = shared
        .db
        .call(
            c,
            "SELECT event_type, content, coalesce(tool_name, ''), success FROM engram.session_events(session_id => $1::text)",
            &[&session],
        )
        .await
        .map_err(|e| e.message)?;
    let events: Vec<crate::summarizer::Event> = rows
        .iter()
        .map(|r| {
            Ok(crate::summarizer::Event {
                event_type: r.col(0)?,
                content: r.col(1)?,
                tool_name: r.col(2)?,
                success: r.col(3)?,
            })
        })
        .collect::<Result<_, String>>()?;
    let summary = s.summarize(session, &events).await?;
    shared
        .db
        .call(
            c,
            "SELECT engram.summarize(session_id => $1::text, content => $2::text)",
            &[&session, &summary],
        )
        .await
        .map_err(|e| e.message)?;
    // The summary itself joins the backlog.
    shared.background.embed(c);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::Bounded;

    #[test]
    fn bounded_maps_forget_the_oldest_key() {
        let mut seen = Bounded::new(3);
        for owner in ["a", "b", "c"] {
            assert!(seen.insert(owner.to_string(), ()));
        }
        assert!(!seen.insert("a".to_string(), ()), "known keys are not new");
        assert!(seen.insert("d".to_string(), ()));
        assert_eq!(seen.size(), 3);
        assert!(seen.get(&"a".to_string()).is_none(), "the oldest went first");
        assert!(seen.get(&"d".to_string()).is_some());
        for i in 0..100_000 {
            seen.insert(format!("owner{i}"), ());
        }
        assert_eq!(seen.size(), 3, "a flood of owners stays within the cap");

        let mut refused: Bounded<String, Vec<String>> = Bounded::new(2);
        refused.get_or_default("x".into()).push("sha1".into());
        refused.get_or_default("x".into()).push("sha2".into());
        refused.get_or_default("y".into());
        refused.get_or_default("z".into());
        assert_eq!(refused.size(), 2);
        assert!(refused.get(&"x".to_string()).is_none());
        assert_eq!(refused.get(&"z".to_string()), Some(&vec![]));
    }
}
