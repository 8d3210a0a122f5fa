//! Latency percentiles and recall.

use std::time::Duration;

#[derive(Default)]
pub struct Samples {
    pub latencies: Vec<Duration>,
    pub recalls: Vec<f64>,
    pub rows: Vec<usize>,
}

impl Samples {
    pub fn push(&mut self, latency: Duration, recall: f64, rows: usize) {
        self.latencies.push(latency);
        self.recalls.push(recall);
        self.rows.push(rows);
    }

    fn percentile_ms(&self, p: f64) -> f64 {
        let mut v: Vec<f64> = self.latencies.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        if v.is_empty() {
            return f64::NAN;
        }
        let i = ((v.len() as f64 - 1.0) * p).round() as usize;
        v[i]
    }

    pub fn p50(&self) -> f64 {
        self.percentile_ms(0.5)
    }

    pub fn p95(&self) -> f64 {
        self.percentile_ms(0.95)
    }

    pub fn p99(&self) -> f64 {
        self.percentile_ms(0.99)
    }

    /// p50 of the first and of the second half of the samples: the two
    /// rounds of a measurement that pushed one round after the other.
    pub fn rounds_p50(&self) -> (f64, f64) {
        let half = self.latencies.len() / 2;
        let of = |d: &[Duration]| {
            Samples {
                latencies: d.to_vec(),
                ..Default::default()
            }
            .p50()
        };
        (of(&self.latencies[..half]), of(&self.latencies[half..]))
    }

    pub fn recall(&self) -> f64 {
        self.recalls.iter().sum::<f64>() / self.recalls.len().max(1) as f64
    }

    pub fn mean_rows(&self) -> f64 {
        self.rows.iter().sum::<usize>() as f64 / self.rows.len().max(1) as f64
    }
}

/// Share of `truth` found in `got` (recall@k with k = truth.len()).
pub fn recall<T: PartialEq>(got: &[T], truth: &[T]) -> f64 {
    if truth.is_empty() {
        return 1.0;
    }
    truth.iter().filter(|t| got.contains(t)).count() as f64 / truth.len() as f64
}
