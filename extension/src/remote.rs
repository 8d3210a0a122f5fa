//! Bindings across the nodes of a Citus cluster (docs/SCALING.md).
//!
//! On the coordinator `engram.bind` signs what it bound under a key derived
//! from the database's secret and the token's stored hash
//! (engram_core::binding_proof) and sets the proof as
//! `engram.remote_binding` with `SET LOCAL`, which Citus sends to every
//! worker the transaction reaches. There, row-level security (`_rls_owner`)
//! shows the proven owner's rows once `engram._remote_owner` has checked the
//! proof against the token and the secret, which no restricted role can
//! read. The proof is checked once per transaction and proof text; a cached
//! answer still honours its expiry.

use engram_core::binding_proof as proof;
use pgrx::prelude::*;
use std::cell::RefCell;

/// The proof of a binding of token `token_id` to `owner`, valid until
/// `expires` (unix seconds), signed with `key` (`_binding_key`).
#[pg_extern(immutable, strict, parallel_safe)]
fn _sign_binding(token_id: &str, owner: &str, internal: bool, expires: i64, key: &[u8]) -> String {
    let claim = proof::Claim {
        token_id: token_id.to_string(),
        owner: owner.to_string(),
        internal,
        expires,
    };
    proof::sign(&claim, key)
}

/// The key of token proofs: see engram_core::binding_proof::key.
#[pg_extern(immutable, strict, parallel_safe)]
fn _binding_key(secret: &[u8], token_hash: &[u8]) -> Vec<u8> {
    proof::key(secret, token_hash)
}

/// What a proof claims (`t` token id, `o` owner, `i` internal, `x` expiry),
/// or NULL when it is not a well-formed proof. Not yet checked: see
/// `_binding_proof_valid`.
#[pg_extern(immutable, strict, parallel_safe)]
fn _binding_claim(text: &str) -> Option<pgrx::JsonB> {
    let (claim, _) = proof::parse(text)?;
    // The token id goes into a uuid cast: refuse anything else here, so
    // that a bad proof yields no rows rather than an error.
    let uuid_like = claim.token_id.len() == 36
        && claim.token_id.chars().enumerate().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    uuid_like.then(|| {
        pgrx::JsonB(serde_json::json!({
            "t": claim.token_id, "o": claim.owner, "i": claim.internal, "x": claim.expires,
        }))
    })
}

/// Whether `text` carries a valid MAC under `key` (`_binding_key` of the
/// claimed token).
#[pg_extern(immutable, strict, parallel_safe)]
fn _binding_proof_valid(text: &str, key: &[u8]) -> bool {
    proof::parse(text).is_some_and(|(claim, tag)| proof::verify(&claim, &tag, key))
}

/// The last check: transaction start, proof, the owner it proved, and the
/// proof's expiry (unix seconds), which a cached answer still honours.
type Checked = (i64, String, Option<String>, i64);

thread_local! {
    static CHECKED: RefCell<Option<Checked>> = const { RefCell::new(None) };
}

/// Unix seconds now.
fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The owner that `engram.remote_binding` proves in this transaction, if any
/// (NULL for a binding with an internal context, which reads nothing
/// through row-level security).
pub fn owner() -> Option<String> {
    let text = crate::gucs::remote_binding()?;
    // SAFETY: reads the current transaction's start time.
    let xact = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    let cached = CHECKED.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|(at, p, _, _)| *at == xact && *p == text)
            .map(|(_, _, o, expires)| o.clone().filter(|_| *expires >= now_unix()))
    });
    if let Some(owner) = cached {
        return owner;
    }
    let owner = Spi::get_one_with_args::<String>("SELECT engram._remote_owner($1)", &[text.as_str().into()])
        .ok()
        .flatten();
    let expires = proof::parse(&text).map_or(0, |(claim, _)| claim.expires);
    CHECKED.with(|c| *c.borrow_mut() = Some((xact, text, owner.clone(), expires)));
    owner
}
