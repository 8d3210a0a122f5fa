//! Keyset-pagination cursors for `engram.list`.
//!
//! A cursor names the sort column, the last row's sort value (as Postgres
//! text) and its id: `v1.<order_by>.<hex(value)>.<uuid>`. Hex keeps any value
//! text (timestamps, floats) free of the separator. The cursor is opaque to
//! callers but not secret: it only repeats values of rows they already saw.

use crate::error::{Error, Result};

const VERSION: &str = "v1";

pub fn encode(order_by: &str, value: &str, id: &str) -> String {
    let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{VERSION}.{order_by}.{hex}.{id}")
}

fn bad(hint: &str) -> Error {
    Error::invalid("malformed cursor", hint)
}

/// Returns `(value, id)` of the row after which the next page starts.
pub fn decode(cursor: &str, order_by: &str) -> Result<(String, String)> {
    let parts: Vec<&str> = cursor.split('.').collect();
    let [version, ord, hex, id] = parts.as_slice() else {
        return Err(bad("pass the next_cursor of a previous engram.list call unchanged"));
    };
    if *version != VERSION {
        return Err(bad("the cursor comes from another version; start again without after"));
    }
    if *ord != order_by {
        return Err(Error::invalid(
            format!(
                "the cursor was made for order_by '{}', not '{}'",
                crate::error::echo(ord),
                crate::error::echo(order_by)
            ),
            "keep order_by the same across pages, or start again without after",
        ));
    }
    // Only ASCII hex digits: slicing below is by byte, and a multi-byte
    // character would otherwise split mid-character (a panic, not an error).
    if hex.len() % 2 != 0
        || !hex.bytes().all(|b| b.is_ascii_hexdigit())
        || id.len() != 36
        || !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
    {
        return Err(bad("pass the next_cursor of a previous engram.list call unchanged"));
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect();
    let value = bytes
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| bad("pass the next_cursor of a previous engram.list call unchanged"))?;
    Ok((value, id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";

    #[test]
    fn round_trip() {
        let c = encode("created_at", "2026-11-22T10:00:00.123456Z", ID);
        assert_eq!(
            decode(&c, "created_at").unwrap(),
            ("2026-11-22T10:00:00.123456Z".to_string(), ID.to_string())
        );
        let c = encode("trust_score", "0.7", ID);
        assert_eq!(decode(&c, "trust_score").unwrap().0, "0.7");
    }

    #[test]
    fn rejects_tampering_and_mismatch() {
        let c = encode("created_at", "x", ID);
        assert!(decode(&c, "importance").is_err());
        assert!(decode("garbage", "created_at").is_err());
        assert!(decode(&format!("v1.created_at.zz.{ID}"), "created_at").is_err());
        assert!(decode("v2.created_at.78.x", "created_at").is_err());
    }

    #[test]
    fn multibyte_characters_are_an_error_not_a_panic() {
        for hex in ["é7", "7é", "ab€€", "日本"] {
            let c = format!("v1.created_at.{hex}.{ID}");
            assert!(decode(&c, "created_at").is_err(), "{hex}");
        }
        let id = "3f2504e0-4f89-41d3-9a0c-0305e82c33é";
        assert!(decode(&format!("v1.created_at.78.{id}"), "created_at").is_err());
    }
}
