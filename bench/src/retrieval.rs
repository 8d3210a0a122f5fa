//! Retrieval quality on a multi-session chat (tests/data/retrieval.json):
//! every turn is stored through `engram.remember` as an episodic memory of
//! its session, embedded with the local model; each question is searched
//! three ways (full text alone, vectors alone, both fused) and scored by
//! the share of its evidence turns found in the top 5 and top 10.

use engram_embed::onnx::OnnxEmbedder;
use pgvector::Vector;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use tokio_postgres::Client;

const OWNER: &str = "bench-retrieval";

/// The three ways each question is searched.
pub const MODES: [&str; 3] = ["full text only", "vectors only", "hybrid (engram.search with both)"];

struct Question {
    text: String,
    evidence: Vec<String>,
    kind: String,
}

/// Share of `evidence` in the first `k` of `found`.
pub fn recall_at(found: &[String], evidence: &[String], k: usize) -> f64 {
    let top = &found[..found.len().min(k)];
    evidence.iter().filter(|e| top.contains(e)).count() as f64 / evidence.len().max(1) as f64
}

pub fn field<'a>(v: &'a Value, name: &str) -> &'a Value {
    v.get(name)
        .unwrap_or_else(|| panic!("retrieval data: missing '{name}' in {v}"))
}

/// A string field of the data; a missing or non-string one stops the run.
pub fn text(v: &Value, name: &str) -> String {
    field(v, name)
        .as_str()
        .unwrap_or_else(|| panic!("retrieval data: '{name}' is not a string"))
        .to_string()
}

fn read_data(data_path: &Path) -> Value {
    serde_json::from_slice(
        &std::fs::read(data_path).unwrap_or_else(|e| panic!("cannot read {}: {e}", data_path.display())),
    )
    .expect("retrieval data is not JSON")
}

/// Every turn's text (the embedder section compares precisions on them).
pub fn turn_texts(data_path: &Path) -> Vec<String> {
    let data = read_data(data_path);
    field(&data, "sessions")
        .as_array()
        .expect("sessions")
        .iter()
        .flat_map(|s| {
            field(s, "turns")
                .as_array()
                .expect("turns")
                .iter()
                .map(|t| text(t, "text"))
        })
        .collect()
}

/// Stores the chat (replacing an earlier run's) and returns the questions.
async fn load(c: &Client, model: &OnnxEmbedder, data: &Value) -> Vec<Question> {
    c.execute("DELETE FROM engram.memories WHERE owner = $1", &[&OWNER])
        .await
        .unwrap();
    let remember = c
        .prepare(
            "SELECT status FROM engram.remember(owner => $1, content => $2, embedding => $3, kind => 'episodic',
                 session_id => $4, metadata => jsonb_build_object('turn', $5::text, 'role', $6::text, 'date', $7::text),
                 occurred_at => $7::text::timestamptz)",
        )
        .await
        .unwrap();
    for session in field(data, "sessions").as_array().expect("sessions") {
        let (sid, date) = (text(session, "id"), text(session, "date"));
        let turns = field(session, "turns").as_array().expect("turns");
        let contents: Vec<String> = turns.iter().map(|t| text(t, "text")).collect();
        let vectors = model.embed_blocking(&contents).expect("embed turns");
        for ((turn, content), v) in turns.iter().zip(&contents).zip(vectors) {
            let status: String = c
                .query_one(
                    &remember,
                    &[
                        &OWNER,
                        content,
                        &Vector::from(v),
                        &sid,
                        &text(turn, "id"),
                        &text(turn, "role"),
                        &date,
                    ],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(status, "created", "turn {} was not stored", text(turn, "id"));
        }
    }
    field(data, "questions")
        .as_array()
        .expect("questions")
        .iter()
        .map(|q| Question {
            text: text(q, "question"),
            evidence: field(q, "evidence")
                .as_array()
                .expect("evidence")
                .iter()
                .map(|e| e.as_str().expect("evidence id").to_string())
                .collect(),
            kind: text(q, "type"),
        })
        .collect()
}

/// Prints recall@5 and recall@10 of full text, vectors and hybrid search,
/// overall and per question type.
pub async fn eval(c: &Client, model: &OnnxEmbedder, data_path: &Path) {
    let data = read_data(data_path);
    let questions = load(c, model, &data).await;
    // Each turn happened on its session's date (occurred_at) and the
    // questions are asked on `asked_on`: "in May", "last week" are read
    // against it (engram.time_window) and boost what happened then.
    let asked_on = data.get("asked_on").and_then(Value::as_str).map(str::to_string);
    let search = c
        .prepare(
            "SELECT metadata ->> 'turn' FROM engram.search(owner => $1, query_embedding => $2, query_text => $3, k => 10,
                 reference_time => $4::text::timestamptz)",
        )
        .await
        .unwrap();
    let mut table = RecallTable::new();
    for q in &questions {
        let v = Vector::from(
            model
                .embed_blocking(std::slice::from_ref(&q.text))
                .expect("embed question")
                .remove(0),
        );
        for (mode, emb, txt) in [
            (MODES[0], None, Some(q.text.as_str())),
            (MODES[1], Some(&v), None),
            (MODES[2], Some(&v), Some(q.text.as_str())),
        ] {
            let found: Vec<String> = c
                .query(&search, &[&OWNER, &emb, &txt, &asked_on])
                .await
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            let (r5, r10) = (recall_at(&found, &q.evidence, 5), recall_at(&found, &q.evidence, 10));
            for kind in ["all".to_string(), q.kind.clone()] {
                let e = table.entry(mode).or_default().entry(kind).or_insert((0.0, 0.0, 0));
                *e = (e.0 + r5, e.1 + r10, e.2 + 1);
            }
        }
    }
    let turns: usize = field(&data, "sessions")
        .as_array()
        .unwrap()
        .iter()
        .map(|s| field(s, "turns").as_array().unwrap().len())
        .sum();
    println!(
        "retrieval: {turns} chat turns in {} sessions, {} questions ({})",
        field(&data, "sessions").as_array().unwrap().len(),
        questions.len(),
        data_path.display()
    );
    println!();
    print_table(&table, &MODES, At::Ten);
}

/// Sums of recall per search mode and question type ("all" included):
/// (recall@5, recall@10, questions).
pub type RecallTable<'a> = BTreeMap<&'a str, BTreeMap<String, (f64, f64, usize)>>;

/// Which recall the per-type columns show.
#[derive(Clone, Copy)]
pub enum At {
    Five,
    Ten,
}

/// The Markdown table of a recall evaluation: recall@5 and @10 overall,
/// then one column per question type.
pub fn print_table(table: &RecallTable, modes: &[&str], at: At) {
    let kinds: Vec<String> = table
        .values()
        .next()
        .map(|m| m.keys().filter(|k| *k != "all").cloned().collect())
        .unwrap_or_default();
    let label = match at {
        At::Five => "@5",
        At::Ten => "@10",
    };
    print!("| search | recall@5 | recall@10 |");
    for k in &kinds {
        print!(" {k} {label} |");
    }
    println!();
    print!("|---|---:|---:|");
    for _ in &kinds {
        print!("---:|");
    }
    println!();
    for mode in modes {
        let Some(by) = table.get(mode) else { continue };
        let (r5, r10, n) = by["all"];
        print!("| {mode} | {:.3} | {:.3} |", r5 / n as f64, r10 / n as f64);
        for k in &kinds {
            let (r5, r10, n) = by[k];
            let r = match at {
                At::Five => r5,
                At::Ten => r10,
            };
            print!(" {:.3} ({n}) |", r / n as f64);
        }
        println!();
    }
}

#[cfg(test)]
mod tests {
    use super::recall_at;

    #[test]
    fn recall_counts_evidence_in_the_top_k() {
        let found: Vec<String> = ["a", "b", "c", "d", "e", "f"].iter().map(|s| s.to_string()).collect();
        let ev = vec!["b".to_string(), "f".to_string()];
        assert_eq!(recall_at(&found, &ev, 5), 0.5);
        assert_eq!(recall_at(&found, &ev, 10), 1.0);
        assert_eq!(recall_at(&[], &ev, 10), 0.0);
    }
}
