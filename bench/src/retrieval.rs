//! What the retrieval evaluations (conversations.rs) share: evidence
//! recall, the data's fields, and the Markdown table of their results.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

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
