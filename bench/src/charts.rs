//! Search results kept per data size, and the SVG charts drawn from them:
//! p50 and recall@10 against scope selectivity (one line per size, raw
//! pgvector beside engram), and p50 against the number of rows.
//!
//! Each search run writes `search-<rows>.json` into the results folder
//! (`--results-dir`, default `.engram/bench`), replacing an earlier run of
//! the same size; the charts are drawn from every file there, so a 10k, a
//! 100k and a 1M run (each `scripts/bench --rows N`) make the size curve.

use plotters::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

/// One measured query kind: p50 in ms and mean recall@10.
#[derive(Clone, Copy)]
pub struct Point {
    pub p50: f64,
    pub recall: f64,
}

impl Point {
    /// The p50 and mean recall of a measurement's samples.
    pub fn of(s: &crate::stats::Samples) -> Point {
        Point {
            p50: s.p50(),
            recall: s.recall(),
        }
    }
}

/// A scope's two measurements: raw pgvector and engram.
pub struct Scope {
    /// Share of the rows in the scope (0.5 for 50%).
    pub share: f64,
    /// Raw pgvector with the scope as a WHERE clause, iterative scan relaxed_order.
    pub raw: Point,
    pub engram: Point,
}

/// One search run.
pub struct Run {
    pub rows: usize,
    pub raw_ef: i32,
    pub unfiltered: Point,
    pub scopes: Vec<Scope>,
}

fn point(p: Point) -> Value {
    json!({"p50_ms": p.p50, "recall": p.recall})
}

fn read_point(v: &Value) -> Option<Point> {
    Some(Point {
        p50: v["p50_ms"].as_f64()?,
        recall: v["recall"].as_f64()?,
    })
}

impl Run {
    fn to_json(&self) -> Value {
        json!({
            "rows": self.rows,
            "raw_ef_search": self.raw_ef,
            "raw_unfiltered": point(self.unfiltered),
            "scopes": self.scopes.iter().map(|s| json!({
                "share": s.share, "raw_relaxed": point(s.raw), "engram": point(s.engram)
            })).collect::<Vec<_>>(),
        })
    }

    fn from_json(v: &Value) -> Option<Run> {
        Some(Run {
            rows: v["rows"].as_u64()? as usize,
            raw_ef: v["raw_ef_search"].as_i64()? as i32,
            unfiltered: read_point(&v["raw_unfiltered"])?,
            scopes: v["scopes"]
                .as_array()?
                .iter()
                .map(|s| {
                    Some(Scope {
                        share: s["share"].as_f64()?,
                        raw: read_point(&s["raw_relaxed"])?,
                        engram: read_point(&s["engram"])?,
                    })
                })
                .collect::<Option<Vec<_>>>()?,
        })
    }
}

/// Saves `run` as `search-<rows>.json` in `dir`, then draws the charts of
/// every saved run into `dir/charts`; returns the chart files written.
pub fn save_and_draw(dir: &Path, run: &Run) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir.join("charts"))?;
    std::fs::write(
        dir.join(format!("search-{}.json", run.rows)),
        serde_json::to_string_pretty(&run.to_json())?,
    )?;
    let mut runs: Vec<Run> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("search-"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|t| serde_json::from_str::<Value>(&t).ok())
        .filter_map(|v| Run::from_json(&v))
        .collect();
    runs.sort_by_key(|r| r.rows);
    let out = dir.join("charts");
    let files = [
        out.join("search-p50-by-selectivity.svg"),
        out.join("search-recall-by-selectivity.svg"),
        out.join("search-p50-by-rows.svg"),
    ];
    by_selectivity(&runs, &files[0], "p50 ms", |p| p.p50).map_err(std::io::Error::other)?;
    by_selectivity(&runs, &files[1], "recall@10", |p| p.recall).map_err(std::io::Error::other)?;
    by_rows(&runs, &files[2]).map_err(std::io::Error::other)?;
    Ok(files.to_vec())
}

fn size_label(rows: usize) -> String {
    match rows {
        r if r >= 1_000_000 && r % 1_000_000 == 0 => format!("{}M", r / 1_000_000),
        r if r >= 1_000 && r % 1_000 == 0 => format!("{}k", r / 1_000),
        r => r.to_string(),
    }
}

const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

type Drawn = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A measure against scope selectivity (log axis, the scopes and 100% for
/// unfiltered raw HNSW): per size, engram solid, raw pgvector dashed.
fn by_selectivity(runs: &[Run], file: &Path, measure: &str, f: impl Fn(Point) -> f64) -> Drawn {
    let root = SVGBackend::new(file, (720, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    // A log axis for both: latencies span 100x between scopes, and recall
    // near 1 reads the same on it.
    let values: Vec<f64> = runs
        .iter()
        .flat_map(|r| {
            r.scopes
                .iter()
                .flat_map(|s| [f(s.raw), f(s.engram)])
                .chain([f(r.unfiltered)])
        })
        .filter(|v| *v > 0.0)
        .collect();
    let (lo, hi) = values
        .iter()
        .fold((f64::MAX, 0.0_f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    let (y_min, y_max) = if measure.starts_with("recall") {
        (lo.min(0.5) * 0.95, 1.05)
    } else {
        (lo.min(0.1) * 0.8, hi.max(1.0) * 1.5)
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("search {measure} by scope selectivity"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d((0.003_f64..1.5_f64).log_scale(), (y_min..y_max).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("share of the rows in the scope (100% = raw HNSW, no filter)")
        .y_desc(measure)
        .x_label_formatter(&|x| format!("{}%", x * 100.0))
        .draw()?;
    for (i, run) in runs.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut engram: Vec<(f64, f64)> = run.scopes.iter().map(|s| (s.share, f(s.engram))).collect();
        engram.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut raw: Vec<(f64, f64)> = run.scopes.iter().map(|s| (s.share, f(s.raw))).collect();
        raw.push((1.0, f(run.unfiltered)));
        raw.sort_by(|a, b| a.0.total_cmp(&b.0));
        let label = size_label(run.rows);
        chart
            .draw_series(LineSeries::new(engram.clone(), colour.stroke_width(2)))?
            .label(format!("engram.search, {label}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
        chart.draw_series(engram.iter().map(|p| Circle::new(*p, 3, colour.filled())))?;
        chart
            .draw_series(DashedLineSeries::new(raw.clone(), 6, 4, colour.stroke_width(1)))?
            .label(format!("raw pgvector (ef_search {}), {label}", run.raw_ef))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(1)));
        chart.draw_series(raw.iter().map(|p| Cross::new(*p, 3, colour)))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// p50 against rows (log axes): raw unfiltered HNSW and engram per scope.
fn by_rows(runs: &[Run], file: &Path) -> Drawn {
    let root = SVGBackend::new(file, (720, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let lo = runs.first().map_or(1_000.0, |r| r.rows as f64 / 2.0);
    let hi = runs.last().map_or(1e6, |r| r.rows as f64 * 2.0);
    let top = runs
        .iter()
        .flat_map(|r| r.scopes.iter().map(|s| s.engram.p50).chain([r.unfiltered.p50]))
        .fold(0.1_f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption("search p50 by rows", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d((lo..hi).log_scale(), (0.05_f64..top * 2.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("rows")
        .y_desc("p50 ms")
        .x_label_formatter(&|x| size_label(*x as usize))
        .draw()?;
    let raw: Vec<(f64, f64)> = runs.iter().map(|r| (r.rows as f64, r.unfiltered.p50)).collect();
    chart
        .draw_series(DashedLineSeries::new(raw.clone(), 6, 4, BLACK.stroke_width(2)))?
        .label("raw pgvector HNSW, no filter (ef_search reaching recall 0.95)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    chart.draw_series(raw.iter().map(|p| Cross::new(*p, 3, BLACK)))?;
    let shares: Vec<f64> = runs
        .first()
        .map_or(vec![], |r| r.scopes.iter().map(|s| s.share).collect());
    for (i, share) in shares.into_iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let line: Vec<(f64, f64)> = runs
            .iter()
            .filter_map(|r| {
                r.scopes
                    .iter()
                    .find(|s| s.share == share)
                    .map(|s| (r.rows as f64, s.engram.p50))
            })
            .collect();
        chart
            .draw_series(LineSeries::new(line.clone(), colour.stroke_width(2)))?
            .label(format!("engram.search, scope {}%", share * 100.0))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
        chart.draw_series(line.iter().map(|p| Circle::new(*p, 3, colour.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rows: usize, scale: f64) -> Run {
        let p = |p50: f64, recall: f64| Point {
            p50: p50 * scale,
            recall,
        };
        Run {
            rows,
            raw_ef: 40,
            unfiltered: p(0.6, 0.98),
            scopes: vec![
                Scope {
                    share: 0.5,
                    raw: p(0.4, 0.97),
                    engram: p(1.3, 0.99),
                },
                Scope {
                    share: 0.05,
                    raw: p(3.5, 0.77),
                    engram: p(1.2, 1.0),
                },
                Scope {
                    share: 0.005,
                    raw: p(0.45, 1.0),
                    engram: p(0.8, 1.0),
                },
            ],
        }
    }

    #[test]
    fn runs_round_trip_and_every_chart_is_drawn() {
        let dir = std::env::temp_dir().join(format!("engram-bench-charts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        save_and_draw(&dir, &run(10_000, 0.5)).unwrap();
        let files = save_and_draw(&dir, &run(100_000, 1.0)).unwrap();
        let back = Run::from_json(
            &serde_json::from_str(&std::fs::read_to_string(dir.join("search-100000.json")).unwrap()).unwrap(),
        )
        .unwrap();
        assert_eq!(back.scopes.len(), 3);
        assert_eq!(back.scopes[1].engram.p50, 1.2);
        for (i, f) in files.iter().enumerate() {
            let svg = std::fs::read_to_string(f).unwrap();
            assert!(svg.starts_with("<svg"), "{}", f.display());
            if i < 2 {
                // both sizes are in the legend of the selectivity charts
                assert!(
                    svg.contains("engram.search, 10k") && svg.contains("engram.search, 100k"),
                    "{}",
                    f.display()
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
