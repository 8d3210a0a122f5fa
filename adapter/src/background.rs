//! Work done off the write path (SPEC 9): embedding the backlog of
//! captured events, and writing session summaries when a summarizer is
//! configured.
//!
//! `memory_capture` stores an event without an embedding and returns at
//! once; the rows without one are the queue (engram.embedding_backlog), so
//! nothing is lost when engram-mcp dies. This worker drains an owner's
//! backlog in batches, bound with that owner's token like any tool call:
//! it never reads another owner's rows. After a restart it learns of an
//! owner's leftover backlog on the owner's first call (`note`).

use crate::caller::Caller;
use crate::db::DbError;
use crate::summarizer::Summarizer;
use crate::tools::Shared;
use pgvector::Vector;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use uuid::Uuid;

/// Rows embedded per round trip.
const BATCH: i32 = 32;

enum Job {
    /// Drain this caller's backlog.
    Embed(Caller),
    /// Summarize this caller's session, if a summary is still due.
    Summarize(Caller, String),
}

/// The handle tools use to hand work to the worker.
pub struct Background {
    tx: mpsc::UnboundedSender<Job>,
    /// Owners with an Embed job queued and not yet started: a burst of
    /// captures queues one job.
    queued: Mutex<HashSet<String>>,
    /// Owners whose backlog was drained at least once since start-up.
    seen: Mutex<HashSet<String>>,
    /// (owner, session) pairs with a summary being written: captures past
    /// the threshold keep saying a summary is due until it is stored.
    summarizing: Arc<Mutex<HashSet<(String, String)>>>,
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
    pub fn new(wait: Duration, summarizer: Option<Summarizer>) -> (Background, Worker) {
        let (tx, rx) = mpsc::unbounded_channel();
        let bg = Background {
            tx,
            queued: Mutex::new(HashSet::new()),
            seen: Mutex::new(HashSet::new()),
            summarizing: Default::default(),
            summarizer: summarizer.is_some(),
        };
        (bg, Worker { rx, wait, summarizer })
    }

    /// Schedules embedding of the caller's backlog (after a capture that
    /// stored no embedding).
    pub fn embed(&self, c: &Caller) {
        if !plain(c) {
            return;
        }
        let fresh = self
            .queued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(c.owner.clone());
        if fresh {
            let _ = self.tx.send(Job::Embed(c.clone()));
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
            .insert(c.owner.clone());
        if first {
            self.embed(c);
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
            if self.summarizing.lock().unwrap_or_else(|p| p.into_inner()).insert(key) {
                let _ = self.tx.send(Job::Summarize(c.clone(), session.to_string()));
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
    while let Some(first) = w.rx.recv().await {
        // One wait per burst: the jobs queued meanwhile run after it too.
        tokio::time::sleep(w.wait).await;
        let mut jobs = vec![first];
        while let Ok(job) = w.rx.try_recv() {
            jobs.push(job);
        }
        for job in jobs {
            run_job(&shared, job, summarizer.clone()).await;
        }
    }
}

async fn run_job(shared: &Arc<Shared>, job: Job, summarizer: Option<Arc<Summarizer>>) {
    match job {
        Job::Embed(c) => {
            shared
                .background
                .queued
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&c.owner);
            shared
                .background
                .seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(c.owner.clone());
            match drain(shared, &c).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(owner = %c.owner, embedded = n, "embedding backlog drained"),
                // The rows stay in the backlog; the owner's next capture retries.
                Err(e) => tracing::warn!(owner = %c.owner, error = %e, "embedding backlog: will retry"),
            }
        }
        Job::Summarize(c, session) => {
            if let Some(s) = summarizer {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let result = summarize(&shared, &s, &c, &session).await;
                    let key = (c.owner.clone(), session.clone());
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

/// Embeds the caller's backlog batch by batch; returns how many rows it set.
async fn drain(shared: &Shared, c: &Caller) -> Result<usize, String> {
    let mut total = 0;
    loop {
        let rows = shared
            .db
            .call(
                c,
                "SELECT id, content FROM engram.embedding_backlog(lim => $1::integer)",
                &[&BATCH],
            )
            .await
            .map_err(|e: DbError| e.message)?;
        if rows.is_empty() {
            return Ok(total);
        }
        let ids: Vec<Uuid> = rows.iter().map(|r| r.get(0)).collect();
        let texts: Vec<String> = rows.iter().map(|r| r.get(1)).collect();
        let started = std::time::Instant::now();
        let vectors = shared.embedder.embed_in(&c.owner, &texts).await;
        shared.metrics.embedding(started.elapsed(), vectors.is_ok());
        let vectors: Vec<Vector> = vectors
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(Vector::from)
            .collect();
        let set = shared
            .db
            .call(
                c,
                "SELECT engram.set_embeddings(ids => $1::uuid[], embeddings => $2::vector[])",
                &[&ids, &vectors],
            )
            .await
            .map_err(|e| e.message)?;
        let n: i32 = set[0].get(0);
        total += n as usize;
        if rows.len() < BATCH as usize {
            return Ok(total);
        }
        if n == 0 {
            // Nothing changed (another process embedded them): stop rather than spin.
            return Ok(total);
        }
    }
}

/// Writes the session's summary if one is still due; returns whether it did.
async fn summarize(shared: &Shared, s: &Summarizer, c: &Caller, session: &str) -> Result<bool, String> {
    let due = shared
        .db
        .call(c, "SELECT engram.summary_due(session_id => $1::text)", &[&session])
        .await
        .map_err(|e| e.message)?;
    if !due[0].get::<_, bool>(0) {
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
        .map(|r| crate::summarizer::Event {
            event_type: r.get(0),
            content: r.get(1),
            tool_name: r.get(2),
            success: r.get(3),
        })
        .collect();
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
