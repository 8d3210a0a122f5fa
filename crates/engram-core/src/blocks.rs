//! Packed scope-list blocks (since 0.10.0).
//!
//! A scope list (an owner's memories, or those with one tag) is stored as
//! rows of up to [`capacity`] entries each, an entry being the memory id (16
//! bytes) followed by its int8-quantized embedding ([`crate::quant`]). One
//! row per ~18 entries (at 384 dimensions) instead of one index tuple per
//! entry removes most of Postgres' per-tuple cost from an exact scan of the
//! list; the scan itself is [`fold_block`], called once per block row by
//! the `engram._nearest` aggregate, which keeps the `k` nearest candidates.
//!
//! Candidates travel between calls (and out of the aggregate) as bytes:
//! per candidate its int8 distance (f32, little-endian) then its id, sorted
//! nearest first, ties by id.

use crate::quant;

/// Bytes of a memory id at the front of an entry.
pub const ID_BYTES: usize = 16;

/// Bytes of one encoded candidate: distance then id.
const CANDIDATE_BYTES: usize = 4 + ID_BYTES;

/// Entry bytes a block row may hold: with its other columns and tuple
/// header the row stays under the 8 KB page, so it is never TOASTed and a
/// scan reads it in place.
pub const BLOCK_PAYLOAD: usize = 7600;

/// Entries a block holds when each quantized vector is `qvec_len` bytes
/// (18 at 384 dimensions, 9 at 768, 4 at 1,536; at least 1).
pub fn capacity(qvec_len: usize) -> usize {
    (BLOCK_PAYLOAD / (ID_BYTES + qvec_len)).max(1)
}

/// One candidate: int8 distance and memory id.
pub type Candidate = (f32, [u8; ID_BYTES]);

fn ordered(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1))
}

/// The candidates in `bytes` (as [`encode`] wrote them).
pub fn decode(bytes: &[u8]) -> Vec<Candidate> {
    bytes
        .chunks_exact(CANDIDATE_BYTES)
        .map(|c| {
            let mut id = [0u8; ID_BYTES];
            id.copy_from_slice(&c[4..]);
            (f32::from_le_bytes([c[0], c[1], c[2], c[3]]), id)
        })
        .collect()
}

/// Candidates as bytes.
pub fn encode(candidates: &[Candidate]) -> Vec<u8> {
    let mut out = Vec::with_capacity(candidates.len() * CANDIDATE_BYTES);
    for (d, id) in candidates {
        out.extend_from_slice(&d.to_le_bytes());
        out.extend_from_slice(id);
    }
    out
}

/// The width of each of a block's `n` entries, or why the block is malformed.
fn entry_width(entries: &[u8], n: usize) -> Result<usize, String> {
    if n == 0 || !entries.len().is_multiple_of(n) || entries.len() / n <= ID_BYTES {
        return Err(format!(
            "a scope-list block of {} bytes cannot hold {n} entries; rebuild the lists (docs/ARCHITECTURE.md, \"Scope lists\")",
            entries.len()
        ));
    }
    Ok(entries.len() / n)
}

/// Folds one block of `n` entries into the running candidates `state`
/// (encoded, nearest first, at most `k`): the `k` nearest of both to the
/// quantized `query`, encoded.
pub fn fold_block(state: &[u8], entries: &[u8], n: usize, query: &[u8], k: usize) -> Result<Vec<u8>, String> {
    let width = entry_width(entries, n)?;
    if k == 0 {
        return Ok(Vec::new());
    }
    // Entries beyond the k-th kept distance cannot enter: once k are kept,
    // most blocks of a large list add nothing, and the state is returned
    // as it came, without decoding or sorting it (read in place: the k-th
    // candidate's distance).
    let mut worst = match state.get((k - 1) * CANDIDATE_BYTES..(k - 1) * CANDIDATE_BYTES + 4) {
        Some(b) => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => f32::INFINITY,
    };
    let mut added: Vec<Candidate> = Vec::new();
    for entry in entries.chunks_exact(width) {
        let d = quant::distance(&entry[ID_BYTES..], query);
        if d > worst {
            continue;
        }
        let mut id = [0u8; ID_BYTES];
        id.copy_from_slice(&entry[..ID_BYTES]);
        added.push((d, id));
        if added.len() >= 2 * k {
            added.sort_unstable_by(ordered);
            added.truncate(k);
            worst = worst.min(added[k - 1].0);
        }
    }
    if added.is_empty() {
        return Ok(state.to_vec());
    }
    let mut kept = decode(state);
    kept.append(&mut added);
    kept.sort_unstable_by(ordered);
    kept.truncate(k);
    Ok(encode(&kept))
}

/// The block `entries` (`n` of them) without the entry of memory `id`;
/// `None` when the block does not hold it.
pub fn without(entries: &[u8], n: usize, id: &[u8; ID_BYTES]) -> Result<Option<Vec<u8>>, String> {
    let width = entry_width(entries, n)?;
    let Some(at) = entries.chunks_exact(width).position(|e| &e[..ID_BYTES] == id) else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(entries.len() - width);
    out.extend_from_slice(&entries[..at * width]);
    out.extend_from_slice(&entries[(at + 1) * width..]);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{distance, quantize};

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

    fn id(i: usize) -> [u8; ID_BYTES] {
        let mut id = [0u8; ID_BYTES];
        id[..8].copy_from_slice(&(i as u64).to_be_bytes());
        id
    }

    fn entry(i: usize, v: &[f32]) -> Vec<u8> {
        let mut e = id(i).to_vec();
        e.extend(quantize(v));
        e
    }

    #[test]
    fn capacity_keeps_a_block_inside_one_page() {
        assert_eq!(capacity(388), 18);
        assert_eq!(capacity(772), 9);
        assert_eq!(capacity(1540), 4);
        assert_eq!(capacity(20_000), 1);
        for dims in [2, 384, 768, 1536, 3072] {
            assert!(capacity(dims + 4) * (ID_BYTES + dims + 4) <= BLOCK_PAYLOAD);
        }
    }

    #[test]
    fn folding_blocks_finds_the_k_nearest_of_the_whole_list() {
        let vs = vectors(1000, 64, 11);
        let query = quantize(&vectors(1, 64, 12)[0]);
        let per_block = capacity(68);
        for k in [1, 10, 40] {
            let mut state = Vec::new();
            for (b, chunk) in vs.chunks(per_block).enumerate() {
                let entries: Vec<u8> = chunk
                    .iter()
                    .enumerate()
                    .flat_map(|(j, v)| entry(b * per_block + j, v))
                    .collect();
                state = fold_block(&state, &entries, chunk.len(), &query, k).unwrap();
            }
            let got = decode(&state);
            let mut want: Vec<Candidate> = vs
                .iter()
                .enumerate()
                .map(|(i, v)| (distance(&quantize(v), &query), id(i)))
                .collect();
            want.sort_by(ordered);
            want.truncate(k);
            assert_eq!(got, want, "k={k}");
        }
    }

    #[test]
    fn a_short_list_returns_all_its_entries_in_order() {
        let vs = vectors(3, 16, 5);
        let query = quantize(&vs[1]);
        let entries: Vec<u8> = vs.iter().enumerate().flat_map(|(i, v)| entry(i, v)).collect();
        let got = decode(&fold_block(&[], &entries, 3, &query, 10).unwrap());
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].1, id(1));
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(fold_block(&[], &entries, 3, &query, 0).unwrap().is_empty());
    }

    #[test]
    fn encode_and_decode_are_inverse() {
        let c = vec![(0.25, id(7)), (1.5, id(2))];
        assert_eq!(decode(&encode(&c)), c);
    }

    #[test]
    fn removing_an_entry_keeps_the_others_in_place() {
        let vs = vectors(3, 8, 9);
        let entries: Vec<u8> = vs.iter().enumerate().flat_map(|(i, v)| entry(i, v)).collect();
        let rest = without(&entries, 3, &id(1)).unwrap().unwrap();
        let mut want = entry(0, &vs[0]);
        want.extend(entry(2, &vs[2]));
        assert_eq!(rest, want);
        assert_eq!(without(&entries, 3, &id(9)).unwrap(), None);
    }

    #[test]
    fn malformed_blocks_are_refused() {
        assert!(fold_block(&[], &[0; 30], 2, &[0; 4], 5).is_err());
        assert!(fold_block(&[], &[0; 32], 0, &[0; 4], 5).is_err());
        assert!(without(&[0; 16], 1, &id(0)).is_err());
    }
}
