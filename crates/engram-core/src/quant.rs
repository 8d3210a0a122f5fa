//! int8 quantization of embeddings for engram's scope lists.
//!
//! A scoped search reads the candidates of one scope list (all of an
//! owner's memories, or those carrying one tag) from a covering index, where
//! each entry holds its memory's embedding quantized to one signed byte per
//! dimension: 384 bytes instead of 1,536, contiguous per list, so an exact
//! scan of 5,000 candidates reads a few hundred index pages instead of one
//! heap page per memory. The approximate distances only choose which rows to
//! rerank: the final order always comes from the full-precision embedding.
//!
//! Layout of a quantized vector: the scale as little-endian f32 (4 bytes),
//! then one i8 per dimension. The vector is normalised first (cosine
//! distance ignores length), then `q[i] = round(u[i] / scale)` with
//! `scale = max |u[i]| / 127`, so the largest component uses the full range.

/// Bytes in front of the components.
const HEADER: usize = 4;

/// The quantized form of `v`: `4 + v.len()` bytes. A zero (or non-finite)
/// vector quantizes to scale 0, whose distance to anything is 1.
pub fn quantize(v: &[f32]) -> Vec<u8> {
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    let max = v.iter().map(|x| (f64::from(*x) / norm).abs()).fold(0.0, f64::max);
    let scale = if norm.is_finite() && norm > 0.0 && max.is_finite() && max > 0.0 {
        max / 127.0
    } else {
        0.0
    };
    let mut out = Vec::with_capacity(HEADER + v.len());
    out.extend_from_slice(&(scale as f32).to_le_bytes());
    for x in v {
        let q = if scale > 0.0 {
            (f64::from(*x) / norm / scale).round().clamp(-127.0, 127.0)
        } else {
            0.0
        };
        out.push(q as i8 as u8);
    }
    out
}

fn scale_of(q: &[u8]) -> f32 {
    match q.get(..HEADER) {
        Some(b) => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => 0.0,
    }
}

/// Sum of products of two i8 sequences. On x86-64 with AVX2 (checked once
/// at run time) the same loop is compiled for 256-bit registers; elsewhere
/// for the target's baseline (SSE2 on x86-64).
fn dot_i8(a: &[u8], b: &[u8]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { dot_i8_avx2(a, b) };
    }
    dot_i8_lanes(a, b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_i8_avx2(a: &[u8], b: &[u8]) -> i32 {
    dot_i8_lanes(a, b)
}

/// The portable loop: fixed-width blocks of i32 lanes, which the compiler
/// vectorises (pmaddwd on x86-64). Inlined into each caller so that it is
/// compiled with that caller's target features.
#[inline(always)]
fn dot_i8_lanes(a: &[u8], b: &[u8]) -> i32 {
    const LANES: usize = 16;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0i32; LANES];
    let mut chunks_a = a.chunks_exact(LANES);
    let mut chunks_b = b.chunks_exact(LANES);
    for (ca, cb) in (&mut chunks_a).zip(&mut chunks_b) {
        for i in 0..LANES {
            acc[i] += i32::from(ca[i] as i8) * i32::from(cb[i] as i8);
        }
    }
    let tail: i32 = chunks_a
        .remainder()
        .iter()
        .zip(chunks_b.remainder())
        .map(|(x, y)| i32::from(*x as i8) * i32::from(*y as i8))
        .sum();
    acc.iter().sum::<i32>() + tail
}

/// Approximate cosine distance (1 − cosine) of two quantized vectors, in
/// [0, 2]. Vectors of different dimensions, or a malformed one, are at
/// distance 2 (never preferred).
pub fn distance(a: &[u8], b: &[u8]) -> f32 {
    if a.len() != b.len() || a.len() < HEADER {
        return 2.0;
    }
    let (sa, sb) = (scale_of(a), scale_of(b));
    let cos = dot_i8(&a[HEADER..], &b[HEADER..]) as f32 * sa * sb;
    (1.0 - cos).clamp(0.0, 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine_distance(a: &[f32], b: &[f32]) -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
        1.0 - dot / (na * nb)
    }

    /// Deterministic pseudo-random vectors (xorshift), no dependency.
    fn vectors(n: usize, dims: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut s = seed;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f32 / (1u64 << 53) as f32 - 0.5
        };
        (0..n).map(|_| (0..dims).map(|_| next()).collect()).collect()
    }

    #[test]
    fn layout_is_scale_then_one_byte_per_dimension() {
        let q = quantize(&[3.0, -4.0]);
        assert_eq!(q.len(), 6);
        // normalised: [0.6, -0.8]; scale 0.8 / 127; -0.8 -> -127, 0.6 -> 95
        assert_eq!(q[4] as i8, 95);
        assert_eq!(q[5] as i8, -127);
        assert!((scale_of(&q) - 0.8 / 127.0).abs() < 1e-7);
    }

    #[test]
    fn distance_tracks_cosine_distance_closely() {
        let vs = vectors(200, 384, 0x5eed);
        let qs: Vec<Vec<u8>> = vs.iter().map(|v| quantize(v)).collect();
        let mut worst = 0.0f32;
        for i in 0..vs.len() {
            for j in (i + 1)..vs.len() {
                let err = (distance(&qs[i], &qs[j]) - cosine_distance(&vs[i], &vs[j])).abs();
                worst = worst.max(err);
            }
        }
        assert!(worst < 0.01, "largest error {worst}");
    }

    #[test]
    fn length_does_not_matter_and_self_distance_is_near_zero() {
        let v = vectors(1, 64, 7).remove(0);
        let doubled: Vec<f32> = v.iter().map(|x| x * 2.0).collect();
        assert_eq!(quantize(&v), quantize(&doubled));
        assert!(distance(&quantize(&v), &quantize(&v)) < 0.002);
        let opposite: Vec<f32> = v.iter().map(|x| -x).collect();
        assert!(distance(&quantize(&v), &quantize(&opposite)) > 1.99);
    }

    #[test]
    fn degenerate_inputs_never_rank_first() {
        let zero = quantize(&[0.0; 8]);
        let one = quantize(&[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(distance(&zero, &one), 1.0);
        assert_eq!(distance(&one, &quantize(&[1.0, 0.0])), 2.0);
        assert_eq!(distance(&[1, 2], &[1, 2]), 2.0);
        assert_eq!(quantize(&[f32::NAN, 1.0])[4], 0);
    }

    #[test]
    fn odd_dimensions_use_the_tail() {
        let v = vectors(2, 37, 99);
        let err = (distance(&quantize(&v[0]), &quantize(&v[1])) - cosine_distance(&v[0], &v[1])).abs();
        assert!(err < 0.01, "error {err}");
    }
}
