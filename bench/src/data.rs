//! Synthetic embeddings with the structure of real ones: a Gaussian mixture.
//! Uniform random vectors in 384 dimensions have no meaningful neighbours
//! (every pair is nearly orthogonal), which defeats every ANN index and
//! measures nothing.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

pub struct Mixture {
    centroids: Vec<Vec<f32>>,
    noise: Normal<f32>,
    rng: StdRng,
}

fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

impl Mixture {
    /// `centroids` random unit vectors; samples are a centroid plus
    /// N(0, sigma²) per dimension, normalised.
    pub fn new(seed: u64, dims: usize, centroids: usize, sigma: f32) -> Mixture {
        let mut rng = StdRng::seed_from_u64(seed);
        let unit = Normal::new(0.0f32, 1.0).unwrap();
        let centroids = (0..centroids)
            .map(|_| normalise((0..dims).map(|_| unit.sample(&mut rng)).collect()))
            .collect();
        Mixture {
            centroids,
            noise: Normal::new(0.0, sigma).unwrap(),
            rng,
        }
    }

    /// The same centroids with an independent noise stream.
    pub fn reseed(mut self, seed: u64) -> Mixture {
        self.rng = StdRng::seed_from_u64(seed);
        self
    }

    pub fn sample(&mut self) -> Vec<f32> {
        let c = self.rng.gen_range(0..self.centroids.len());
        let v = self.centroids[c]
            .iter()
            .map(|x| x + self.noise.sample(&mut self.rng))
            .collect();
        normalise(v)
    }

    pub fn uniform(&mut self) -> f64 {
        self.rng.gen()
    }
}

/// pgvector's text form.
pub fn vec_text(v: &[f32]) -> String {
    let mut s = String::with_capacity(v.len() * 10);
    s.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("{x:.6}"));
    }
    s.push(']');
    s
}

/// The scope tags of a row: `s50`, `s5`, `s05` for 50%, 5% and 0.5% of
/// rows, drawn independently of the clusters.
pub fn scope_tags(u: f64) -> Vec<&'static str> {
    let mut t = Vec::new();
    if u < 0.5 {
        t.push("s50");
    }
    if u < 0.05 {
        t.push("s5");
    }
    if u < 0.005 {
        t.push("s05");
    }
    t
}
