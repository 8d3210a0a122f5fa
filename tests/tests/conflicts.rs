//! Conflict detection measured on a labelled set, through
//! `engram.remember` with the real local model (all-MiniLM-L6-v2, unpacked
//! by scripts/setup): for each pair, the old fact is stored, then the new
//! one; a contradiction must come back as `conflict`, a compatible fact on
//! the same subject must not. Then every paraphrase is stored anyway
//! (force), which closes nothing, and every contradiction is stored naming
//! the old fact in `supersedes`, which closes exactly that one; the newer
//! fact must rank above the one it superseded for the pair's question.
//! Prints precision and recall per reason.
//!
//! The pairs are in tests/data/conflicts.json: `dev` pairs were used to
//! choose the rules in engram-core's `conflict`, `held_out` pairs were not.

use engram_embed::onnx::OnnxEmbedder;
use engram_embed::Embedder;
use engram_tests::*;
use serde_json::Value;
use std::collections::BTreeMap;

const LABELS: [&str; 3] = ["contradictions", "paraphrases", "compatible"];
const REASONS: [&str; 4] = ["similar", "correction", "changed_value", "negation"];

struct Outcome {
    split: String,
    label: &'static str,
    old: String,
    new: String,
    similarity: f64,
    reasons: Vec<String>,
}

/// The best hit for a query vector (text form) among an owner's memories: search
/// ranks its k nearest by score (trust, staleness), so ask for more than one.
async fn first_hit(db: &TestDb, owner: &str, query: &str) -> Uuid {
    db.admin
        .query_one(
            "SELECT id FROM engram.search(owner => $1, query_embedding => $2::text::vector, k => 10) LIMIT 1",
            &[&owner, &query],
        )
        .await
        .unwrap()
        .get(0)
}

async fn embed(model: &OnnxEmbedder, text: &str) -> String {
    vec_text(&model.embed(&[text.to_string()]).await.expect("embed").remove(0))
}

#[tokio::test]
async fn conflicts_on_the_labelled_set() {
    let data: Value = serde_json::from_str(include_str!("../data/conflicts.json")).unwrap();
    // The model engram-mcp uses by default (int8).
    let model = OnnxEmbedder::from_env().expect("run scripts/setup to unpack the local model");
    let db = TestDb::new(384).await;
    let remember = "SELECT status, id, conflicts FROM engram.remember(owner => $1, content => $2,
                        embedding => $3::text::vector, force => $4, supersedes => $5)";
    let none: Vec<Uuid> = Vec::new();
    let mut outcomes = Vec::new();
    // (newer first with superseding, newer first without it, pairs)
    let mut ranked = (0, 0, 0);
    let flagged_by = "SELECT flag_count, flag_reason, valid_to IS NOT NULL FROM engram.memories WHERE id = $1";
    for (split, sets) in data.as_object().unwrap().iter().filter(|(k, _)| *k != "about") {
        for label in LABELS {
            for (i, pair) in sets[label].as_array().unwrap().iter().enumerate() {
                let owner = format!("{split}-{label}-{i}");
                let (old, new) = (pair["old"].as_str().unwrap(), pair["new"].as_str().unwrap());
                let (old_vec, new_vec) = (embed(&model, old).await, embed(&model, new).await);
                let first = db
                    .admin
                    .query_one(remember, &[&owner, &old, &old_vec, &false, &none])
                    .await
                    .unwrap();
                assert_eq!(first.get::<_, String>(0), "created");
                let old_id: Uuid = first.get(1);
                let second = db
                    .admin
                    .query_one(remember, &[&owner, &new, &new_vec, &false, &none])
                    .await
                    .unwrap();
                let status: String = second.get(0);
                let conflicts: Option<Value> = second.get(2);
                let mine = conflicts
                    .iter()
                    .flat_map(|c| c.as_array().unwrap().iter())
                    .find(|c| c["id"].as_str() == Some(old_id.to_string().as_str()));
                let reasons: Vec<String> = mine
                    .map(|c| {
                        c["reasons"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|r| r.as_str().unwrap().to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                assert_eq!(
                    status == "conflict",
                    !reasons.is_empty(),
                    "{old} / {new}: {status} {conflicts:?}"
                );
                let similarity = db
                    .admin
                    .query_one(
                        "SELECT 1 - ($1::text::vector <=> $2::text::vector)",
                        &[&old_vec, &new_vec],
                    )
                    .await
                    .unwrap()
                    .get::<_, f64>(0);
                // Stored anyway with force, a memory closes nothing, whatever
                // the rules' reasons; named in supersedes (a contradiction),
                // the old fact is closed and flagged, and only it.
                // A missed contradiction was stored by the call above: the
                // recall floors below count it; nothing is left to supersede.
                if label != "compatible" && status == "conflict" {
                    let supersedes = if label == "contradictions" {
                        vec![old_id]
                    } else {
                        none.clone()
                    };
                    let forced = db
                        .admin
                        .query_one(remember, &[&owner, &new, &new_vec, &true, &supersedes])
                        .await
                        .unwrap();
                    let new_id: Uuid = forced.get(1);
                    let r = db.admin.query_one(flagged_by, &[&old_id]).await.unwrap();
                    let (flags, flag_reason, closed): (i32, Option<String>, bool) = (r.get(0), r.get(1), r.get(2));
                    let named = !supersedes.is_empty();
                    assert_eq!(flags, i32::from(named), "{old} / {new}: {reasons:?}");
                    assert_eq!(closed, named, "{old} / {new}: {reasons:?}");
                    if named {
                        assert_eq!(flag_reason, Some(format!("superseded by {new_id}")));
                    }
                    if label == "contradictions" {
                        let question = embed(&model, pair["question"].as_str().unwrap()).await;
                        ranked.2 += 1;
                        if first_hit(&db, &owner, &question).await == new_id {
                            ranked.0 += 1;
                        } else {
                            eprintln!("stale fact ranks first: {old:?} over {new:?} (reasons: {reasons:?})");
                        }
                        // The control: the same two facts as events, which
                        // never conflict, so nothing is superseded.
                        let control = format!("{owner}-control");
                        let episodic = "SELECT id FROM engram.remember(owner => $1, content => $2,
                                            embedding => $3::text::vector, kind => 'episodic')";
                        db.admin.query_one(episodic, &[&control, &old, &old_vec]).await.unwrap();
                        let control_new: Uuid = db
                            .admin
                            .query_one(episodic, &[&control, &new, &new_vec])
                            .await
                            .unwrap()
                            .get(0);
                        if first_hit(&db, &control, &question).await == control_new {
                            ranked.1 += 1;
                        }
                    }
                }
                outcomes.push(Outcome {
                    split: split.clone(),
                    label,
                    old: old.into(),
                    new: new.into(),
                    similarity,
                    reasons,
                });
            }
        }
    }

    // The report: every pair, then precision and recall per reason.
    eprintln!("\n| split | label | cosine | reasons | old → new |\n|---|---|---:|---|---|");
    for o in &outcomes {
        eprintln!(
            "| {} | {} | {:.2} | {} | {} → {} |",
            o.split,
            o.label,
            o.similarity,
            o.reasons.join(", "),
            o.old,
            o.new
        );
    }
    let count = |split: &str, label: &str, pred: &dyn Fn(&Outcome) -> bool| {
        outcomes
            .iter()
            .filter(|o| o.split == split && o.label == label && pred(o))
            .count()
    };
    eprintln!("\n| split | signal | contradictions found (recall) | flags that are contradictions (precision) | paraphrases flagged | compatible flagged |\n|---|---|---:|---:|---:|---:|");
    let mut by_split = BTreeMap::new();
    for split in ["dev", "held_out", "blind"] {
        let total = count(split, "contradictions", &|_| true);
        for signal in REASONS.iter().copied().chain(["any"]) {
            let hit = |o: &Outcome| {
                if signal == "any" {
                    !o.reasons.is_empty()
                } else {
                    o.reasons.iter().any(|r| r == signal)
                }
            };
            let (tp, para, compat) = (
                count(split, "contradictions", &hit),
                count(split, "paraphrases", &hit),
                count(split, "compatible", &hit),
            );
            // A paraphrase flagged is a near-duplicate: wanted, and not
            // counted against precision; a compatible fact flagged is.
            let precision = if tp + compat == 0 {
                1.0
            } else {
                tp as f64 / (tp + compat) as f64
            };
            eprintln!(
                "| {split} | {signal} | {tp}/{total} ({:.2}) | {precision:.2} | {para}/{} | {compat}/{} |",
                tp as f64 / total as f64,
                count(split, "paraphrases", &|_| true),
                count(split, "compatible", &|_| true)
            );
            if signal == "any" {
                by_split.insert(split, (tp, total, compat));
            }
        }
    }
    eprintln!(
        "\nnewer fact ranked first after a forced store: {}/{} (as events, without superseding: {}/{})",
        ranked.0, ranked.2, ranked.1, ranked.2
    );

    // The goals: at least 6 of 7 held-out contradictions flagged, and no
    // compatible fact on the same subject flagged in the dev and held-out pairs.
    let (tp, total, _) = by_split["held_out"];
    assert!(
        tp * 7 >= 6 * total,
        "held-out contradictions flagged: {tp}/{total}; the goal is at least 6 of 7"
    );
    for split in ["dev", "held_out"] {
        let (_, _, compat) = by_split[split];
        assert_eq!(compat, 0, "{split}: compatible facts on the same subject were flagged");
    }
    // The blind pairs, as first measured (docs/BENCHMARKS.md): all seven
    // contradictions, and one compatible pair flagged ("Windows 11" against
    // "32 GB": numbers of different units). Held here so that it cannot
    // get worse unnoticed; the goal (none) is not met on them.
    let (tp, total, compat) = by_split["blind"];
    assert!(
        tp * 7 >= 6 * total && compat <= 1,
        "blind: {tp}/{total} contradictions, {compat} compatible flagged"
    );
    assert!(
        ranked.0 * 10 >= ranked.2 * 9,
        "newer fact first in {}/{} cases",
        ranked.0,
        ranked.2
    );
}

/// What one set of categorised pairs measured: per category, (contradictions
/// caught, contradictions, compatible pairs flagged, compatible pairs); and
/// (newer fact first, contradictions) after each contradiction was stored
/// alongside its old fact.
struct PairScores {
    table: BTreeMap<String, (usize, usize, usize, usize)>,
    newer_first: (usize, usize),
    /// The reasons given for compatible pairs flagged, counted.
    false_reasons: BTreeMap<String, usize>,
}

impl PairScores {
    fn totals(&self) -> (usize, usize, usize, usize) {
        self.table
            .values()
            .fold((0, 0, 0, 0), |t, r| (t.0 + r.0, t.1 + r.1, t.2 + r.2, t.3 + r.3))
    }

    /// Prints the table; returns (share caught, share of compatible pairs flagged).
    fn print(&self, name: &str) -> (f64, f64) {
        eprintln!("\n{name}\n| category | contradictions caught | compatible flagged |\n|---|---:|---:|");
        for (category, r) in &self.table {
            eprintln!("| {category} | {}/{} | {}/{} |", r.0, r.1, r.2, r.3);
        }
        let t = self.totals();
        let (caught, flagged) = (t.0 as f64 / t.1.max(1) as f64, t.2 as f64 / t.3.max(1) as f64);
        eprintln!(
            "| all | {}/{} ({caught:.3}) | {}/{} ({flagged:.3}) |\nnewer fact first: {}/{}\n\
             reasons given for the compatible pairs flagged: {:?}",
            t.0, t.1, t.2, t.3, self.newer_first.0, self.newer_first.1, self.false_reasons
        );
        (caught, flagged)
    }
}

/// Stores each pair of `data` (contradictions and compatible pairs, each
/// with a category) in an owner of its own: the old fact, then the new one,
/// which must come back as a conflict exactly for the contradictions; then
/// each contradiction stored anyway (force), and its question asked by a
/// hybrid search: the newer fact should rank first. `show` prints each pair
/// the rules get wrong (never for a held-out set: nobody reads them).
async fn measure_pairs(db: &TestDb, model: &OnnxEmbedder, data: &Value, tag: &str, show: bool) -> PairScores {
    let remember = "SELECT status, id, conflicts FROM engram.remember(owner => $1, content => $2,
                        embedding => $3::text::vector, force => $4)";
    let mut scores = PairScores {
        table: BTreeMap::new(),
        newer_first: (0, 0),
        false_reasons: BTreeMap::new(),
    };
    for (label, is_conflict) in [("contradictions", true), ("compatible", false)] {
        for (i, pair) in data[label].as_array().unwrap().iter().enumerate() {
            let owner = format!("{tag}-{label}-{i}");
            let (old, new) = (pair["old"].as_str().unwrap(), pair["new"].as_str().unwrap());
            let (old_vec, new_vec) = (embed(model, old).await, embed(model, new).await);
            let first = db
                .admin
                .query_one(remember, &[&owner, &old, &old_vec, &false])
                .await
                .unwrap();
            assert_eq!(first.get::<_, String>(0), "created", "{old}");
            let old_id: Uuid = first.get(1);
            let second = db
                .admin
                .query_one(remember, &[&owner, &new, &new_vec, &false])
                .await
                .unwrap();
            let flagged = second.get::<_, String>(0) == "conflict";
            let row = scores
                .table
                .entry(pair["category"].as_str().unwrap_or("other").to_string())
                .or_default();
            if is_conflict {
                (row.0, row.1) = (row.0 + usize::from(flagged), row.1 + 1);
            } else {
                (row.2, row.3) = (row.2 + usize::from(flagged), row.3 + 1);
            }
            if flagged && !is_conflict {
                for r in second
                    .get::<_, Option<Value>>(2)
                    .iter()
                    .flat_map(|c| c[0]["reasons"].as_array().cloned().unwrap_or_default())
                {
                    *scores
                        .false_reasons
                        .entry(r.as_str().unwrap_or("").to_string())
                        .or_default() += 1;
                }
            }
            if show && flagged != is_conflict {
                let reasons = second.get::<_, Option<Value>>(2).map(|c| c[0]["reasons"].to_string());
                eprintln!(
                    "{tag} {label}: {} {old:?} → {new:?} {}",
                    if flagged { "flagged" } else { "missed" },
                    reasons.unwrap_or_default()
                );
            }
            if is_conflict {
                let stored = db
                    .admin
                    .query_one(remember, &[&owner, &new, &new_vec, &true])
                    .await
                    .unwrap();
                let new_id: Uuid = stored.get(1);
                let question = pair["question"].as_str().unwrap();
                let top: Vec<Uuid> = db
                    .admin
                    .query(
                        "SELECT id FROM engram.search(owner => $1, query_embedding => $2::text::vector,
                             query_text => $3, k => 10) WHERE id IN ($4, $5)",
                        &[&owner, &embed(model, question).await, &question, &old_id, &new_id],
                    )
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                scores.newer_first.1 += 1;
                if top.first() == Some(&new_id) {
                    scores.newer_first.0 += 1;
                } else if show {
                    eprintln!("{tag}: stale first: {old:?} over {new:?} for {question:?}");
                }
            }
        }
    }
    scores
}

/// tests/data/conflicts_dev.json (written for developing the rules; they
/// were tuned on it) and tests/data/conflicts_blind.json (written by a
/// helper session that never saw the rules, before the rules of 0.19.0
/// were written; its pairs are never printed, only its totals). The goals
/// on the held-out set are at least 85% of the contradictions caught, at
/// most 10% of the compatible pairs flagged, and the newer fact first in
/// at least 90% of the contradictions stored anyway; the rules of 0.19.0 do not meet them (docs/BENCHMARKS.md,
/// "Conflict detection"). The floors below hold them where they were
/// measured (35/54 caught, 22/61 flagged, 41/54 newer first), so that they
/// cannot get worse unnoticed; the development set's hold its figures.
#[tokio::test]
async fn conflicts_on_the_development_and_held_out_sets() {
    let model = OnnxEmbedder::from_env().expect("run scripts/setup to unpack the local model");
    let db = TestDb::new(384).await;
    let dev: Value = serde_json::from_str(include_str!("../data/conflicts_dev.json")).unwrap();
    let dev = measure_pairs(&db, &model, &dev, "dev", true).await;
    let dev_scores = dev.print("conflicts_dev.json (development)");
    let blind: Value = serde_json::from_str(include_str!("../data/conflicts_blind.json")).unwrap();
    let blind = measure_pairs(&db, &model, &blind, "held-out", false).await;
    let (caught, flagged) = blind.print("conflicts_blind.json (held out)");
    assert!(
        caught >= 0.62,
        "held-out contradictions caught: {caught:.3} (measured 0.648)"
    );
    assert!(
        flagged <= 0.40,
        "held-out compatible pairs flagged: {flagged:.3} (measured 0.361)"
    );
    let (first, ranked) = blind.newer_first;
    assert!(
        first * 100 >= ranked * 72,
        "held-out newer fact first in {first}/{ranked} (measured 41/54)"
    );
    let (caught, flagged) = dev_scores;
    assert!(
        caught >= 0.8 && flagged <= 0.1,
        "development set: {caught:.3} caught, {flagged:.3} flagged"
    );
    let (first, ranked) = dev.newer_first;
    assert!(
        first * 10 >= ranked * 9,
        "development set: newer fact first in {first}/{ranked}"
    );
}
