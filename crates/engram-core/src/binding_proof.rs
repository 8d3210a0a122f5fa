//! The proof of a binding that travels to the other nodes of a Citus cluster.
//!
//! `engram.bind` runs on the coordinator and sets transaction-local settings
//! there; row-level security on a worker's shards sees none of them. So on a
//! distributed database `bind` also sends the workers (Citus propagates a
//! `SET LOCAL` to every node the transaction reaches) a proof of what it
//! bound: the token's id, the owner, whether the binding has an internal
//! context, an expiry, and an HMAC-SHA256 of those under a key derived from
//! the token's stored hash and the database's secret (`key`). A worker looks the token up
//! (tokens are a reference table, on every node), checks it is still usable,
//! recomputes the MAC and only then shows the owner's rows. Forging a proof
//! needs the secret, which only the extension's owner reads; a proof names
//! one owner and expires.

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

/// What a proof claims, before its MAC is checked against the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub token_id: String,
    pub owner: String,
    /// A ghost or agent conversation: row-level security shows nothing.
    pub internal: bool,
    /// Unix seconds after which the proof is void.
    pub expires: i64,
}

impl Claim {
    /// The text the MAC covers: every field, `|`-separated. The owner goes
    /// last, so a `|` inside it cannot shift another field.
    pub fn message(&self) -> String {
        format!(
            "engram-binding-v1|{}|{}|{}|{}",
            self.token_id, self.internal, self.expires, self.owner
        )
    }
}

/// The key a token's proofs are signed with: an HMAC of the token's stored
/// hash under the database's secret (engram.node_secret), so that knowing the
/// token, or a copy of engram.tokens, is not enough to sign one.
pub fn key(secret: &[u8], token_hash: &[u8]) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes a key of any length");
    m.update(b"engram-binding-key-v1|");
    m.update(token_hash);
    m.finalize().into_bytes().to_vec()
}

/// HMAC-SHA256 of `message` under `key`.
pub fn mac(key: &[u8], message: &str) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    m.update(message.as_bytes());
    m.finalize().into_bytes().to_vec()
}

/// The proof text (JSON) of `claim`, signed with `key` (the token's hash).
pub fn sign(claim: &Claim, key: &[u8]) -> String {
    let tag: String = mac(key, &claim.message()).iter().map(|b| format!("{b:02x}")).collect();
    json!({
        "t": claim.token_id,
        "o": claim.owner,
        "i": claim.internal,
        "x": claim.expires,
        "m": tag,
    })
    .to_string()
}

/// The claim and MAC of a proof text, or None when it is not one.
pub fn parse(proof: &str) -> Option<(Claim, Vec<u8>)> {
    let v: Value = serde_json::from_str(proof).ok()?;
    let claim = Claim {
        token_id: v.get("t")?.as_str()?.to_string(),
        owner: v.get("o")?.as_str()?.to_string(),
        internal: v.get("i")?.as_bool()?,
        expires: v.get("x")?.as_i64()?,
    };
    let hex = v.get("m")?.as_str()?;
    if hex.len() != 64 || claim.owner.is_empty() {
        return None;
    }
    let tag = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((claim, tag))
}

/// Whether `tag` is the MAC of `claim` under `key`, compared in constant time.
pub fn verify(claim: &Claim, tag: &[u8], key: &[u8]) -> bool {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    m.update(claim.message().as_bytes());
    m.verify_slice(tag).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> Claim {
        Claim {
            token_id: "7f0c6a52-2f0e-4a55-9d0e-0d5c1f3c9a11".into(),
            owner: "alice".into(),
            internal: false,
            expires: 1_800_000_000,
        }
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231_case_2() {
        let tag = mac(b"Jefe", "what do ya want for nothing?");
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn a_signed_proof_parses_and_verifies_under_its_key_only() {
        let key = [7u8; 32];
        let proof = sign(&claim(), &key);
        let (parsed, tag) = parse(&proof).expect("parses");
        assert_eq!(parsed, claim());
        assert!(verify(&parsed, &tag, &key));
        assert!(!verify(&parsed, &tag, &[8u8; 32]), "another token's hash");
    }

    #[test]
    fn the_key_needs_the_secret_and_the_token() {
        let k = key(b"secret", &[1u8; 32]);
        assert_eq!(k.len(), 32);
        assert_ne!(k, key(b"other secret", &[1u8; 32]));
        assert_ne!(k, key(b"secret", &[2u8; 32]));
        assert_ne!(k, vec![1u8; 32], "not the token's hash itself");
    }

    #[test]
    fn changing_any_field_breaks_the_mac() {
        let key = [7u8; 32];
        let (_, tag) = parse(&sign(&claim(), &key)).unwrap();
        let mut other = claim();
        other.owner = "bob".into();
        assert!(!verify(&other, &tag, &key));
        let mut other = claim();
        other.internal = true;
        assert!(!verify(&other, &tag, &key));
        let mut other = claim();
        other.expires += 1;
        assert!(!verify(&other, &tag, &key));
        let mut other = claim();
        other.token_id = "00000000-0000-0000-0000-000000000000".into();
        assert!(!verify(&other, &tag, &key));
    }

    #[test]
    fn malformed_proofs_are_refused() {
        for bad in [
            "",
            "not json",
            "{}",
            r#"{"t":"x","o":"alice","i":false,"x":1,"m":"zz"}"#,
            r#"{"t":"x","o":"","i":false,"x":1,"m":"00000000000000000000000000000000000000000000000000000000000000aa"}"#,
            r#"{"t":"x","o":"alice","i":"no","x":1,"m":"00000000000000000000000000000000000000000000000000000000000000aa"}"#,
            r#"{"t":"x","o":"alice","i":false,"x":1,"m":"é0000000000000000000000000000000000000000000000000000000000000a"}"#,
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
