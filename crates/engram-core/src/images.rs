//! Rules for vision memories (docs/VISION.md): which images engram stores,
//! how they are named, and how memories point at them.
//!
//! An image is accepted when its declared MIME type is one of the raster
//! formats engram-mcp's local CLIP embedder can decode *and* its first bytes
//! are that format's signature. The signature check means a caller cannot
//! store arbitrary bytes (a script, an archive) under an image type, and
//! that the type stored is the type the bytes have. SVG is not accepted: it
//! is a document that can carry scripts, not pixels.

use crate::error::{Error, Result, Sqlstate};

/// Default of `engram.image_max_bytes`: 10 MiB.
pub const DEFAULT_MAX_BYTES: i32 = 10 * 1024 * 1024;

/// Upper bound of `engram.image_max_bytes` (a bytea value is at most 1 GiB;
/// a quarter of that is already far beyond a screenshot).
pub const MAX_MAX_BYTES: i32 = 256 * 1024 * 1024;

/// The metadata key a memory names its images under: an array of sha256 hex
/// strings. Each named image holds one reference while the memory exists.
pub const METADATA_KEY: &str = "images";

/// At most this many images per memory.
pub const MAX_IMAGES_PER_MEMORY: usize = 32;

/// Bytes of the signature check (the longest signature below is WebP's 12).
pub const HEAD_BYTES: usize = 12;

/// Whether an image's first bytes are one format's signature.
type Signature = fn(&[u8]) -> bool;

/// The accepted types, with their signatures.
const TYPES: [(&str, Signature); 5] = [
    ("image/png", |h| h.starts_with(b"\x89PNG\r\n\x1a\n")),
    ("image/jpeg", |h| h.starts_with(b"\xff\xd8\xff")),
    ("image/gif", |h| h.starts_with(b"GIF87a") || h.starts_with(b"GIF89a")),
    ("image/webp", |h| {
        h.len() >= 12 && h.starts_with(b"RIFF") && &h[8..12] == b"WEBP"
    }),
    ("image/bmp", |h| h.starts_with(b"BM")),
];

/// The accepted MIME types, for error messages and docs.
pub fn accepted_types() -> Vec<&'static str> {
    TYPES.iter().map(|(t, _)| *t).collect()
}

/// The canonical form of a declared MIME type: lower case, without
/// parameters (`image/PNG; q=1` -> `image/png`); `image/jpg` is `image/jpeg`.
pub fn normalize_mime(mime: &str) -> String {
    let bare = mime.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match bare.as_str() {
        "image/jpg" | "image/pjpeg" => "image/jpeg".into(),
        "image/x-ms-bmp" | "image/x-bmp" => "image/bmp".into(),
        _ => bare,
    }
}

/// Checks an image before it is stored: a declared type engram accepts,
/// bytes of that type (`head`: the first [`HEAD_BYTES`] bytes), and a size
/// within `max_bytes`. Returns the canonical MIME type to store.
pub fn check_image(mime: Option<&str>, head: &[u8], len: usize, max_bytes: usize) -> Result<String> {
    let Some(declared) = mime.filter(|m| !m.trim().is_empty()) else {
        return Err(Error::new(
            Sqlstate::NullValueNotAllowed,
            "mime is required",
            format!("pass the image's type, one of {}", accepted_types().join(", ")),
        ));
    };
    let mime = normalize_mime(declared);
    let Some((_, matches)) = TYPES.iter().find(|(t, _)| *t == mime) else {
        // Echoed bounded and escaped: it is the caller's text, bound for logs.
        let shown = crate::error::echo(declared);
        return Err(Error::invalid(
            format!("mime '{shown}' is not an image type engram stores"),
            format!(
                "send one of {} (convert other formats first)",
                accepted_types().join(", ")
            ),
        ));
    };
    if len == 0 {
        return Err(Error::new(
            Sqlstate::NullValueNotAllowed,
            "data is empty",
            "pass the image's bytes (over MCP: base64 in `data`)",
        ));
    }
    if len > max_bytes {
        return Err(Error::new(
            Sqlstate::ProgramLimitExceeded,
            format!("the image is {len} bytes; the limit is {max_bytes} (engram.image_max_bytes)"),
            "send a smaller or more compressed image, or ask the DBA to raise engram.image_max_bytes",
        ));
    }
    if !matches(head) {
        let actual = TYPES.iter().find(|(_, m)| m(head)).map(|(t, _)| *t);
        let hint = match actual {
            Some(t) => format!("the bytes are {t}; send them with mime '{t}'"),
            None => format!(
                "the bytes are not any of {}; send the image file's bytes unchanged",
                accepted_types().join(", ")
            ),
        };
        return Err(Error::invalid(format!("data is not a {mime} image"), hint));
    }
    Ok(mime)
}

/// Parses an image id: 64 hex digits (any case), returned in lower case.
pub fn parse_sha256(sha: Option<&str>) -> Result<String> {
    let Some(s) = sha else {
        return Err(Error::new(
            Sqlstate::NullValueNotAllowed,
            "sha256 is required",
            "pass the id engram.image_put returned (64 hex digits)",
        ));
    };
    let s = s.trim();
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::invalid(
            format!("'{}' is not an image id", s.chars().take(80).collect::<String>()),
            "pass the sha256 engram.image_put returned: 64 hex digits",
        ));
    }
    Ok(s.to_ascii_lowercase())
}

/// The images a memory's metadata names under [`METADATA_KEY`]: distinct,
/// lower case. Metadata without the key names none; a key that is not an
/// array of image ids is refused, so a typo does not silently hold nothing.
pub fn referenced(metadata: &serde_json::Value) -> Result<Vec<String>> {
    let Some(v) = metadata.get(METADATA_KEY) else {
        return Ok(Vec::new());
    };
    let hint = "metadata.images is a list of image ids from engram.image_put, e.g. {\"images\": [\"<sha256>\"]}";
    let Some(items) = v.as_array() else {
        return Err(Error::invalid("metadata.images is not an array", hint));
    };
    if items.len() > MAX_IMAGES_PER_MEMORY {
        return Err(Error::new(
            Sqlstate::ProgramLimitExceeded,
            format!(
                "metadata.images names {} images; the limit is {MAX_IMAGES_PER_MEMORY}",
                items.len()
            ),
            "split the images over several memories",
        ));
    }
    let ids = items
        .iter()
        .map(|item| {
            parse_sha256(item.as_str()).map_err(|e| Error::invalid(format!("metadata.images: {}", e.message), hint))
        })
        .collect::<Result<Vec<String>>>()?;
    Ok(sorted_distinct(ids))
}

/// Ids distinct and sorted: every writer takes the images' row locks in
/// one order.
fn sorted_distinct(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids.dedup();
    ids
}

/// The valid image ids among what stored metadata names, skipping anything
/// malformed: for giving references back, which must never block deleting
/// or updating a memory (metadata written before 0.6.0 was not checked).
pub fn referenced_leniently(metadata: &serde_json::Value) -> Vec<String> {
    let items = metadata.get(METADATA_KEY).and_then(|v| v.as_array());
    sorted_distinct(
        items
            .into_iter()
            .flatten()
            .filter_map(|item| parse_sha256(item.as_str()).ok())
            .collect(),
    )
}

/// How many results vision search returns for a requested `k` (1..50).
pub fn clamp_k(k: Option<i32>) -> i32 {
    k.unwrap_or(10).clamp(1, 50)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    const MAX: usize = 1000;

    #[test]
    fn accepted_images_get_their_canonical_type() {
        assert_eq!(check_image(Some("image/png"), PNG, 10, MAX).unwrap(), "image/png");
        assert_eq!(check_image(Some(" Image/PNG; x=1"), PNG, 10, MAX).unwrap(), "image/png");
        assert_eq!(
            check_image(Some("image/jpg"), b"\xff\xd8\xff\xe0", 10, MAX).unwrap(),
            "image/jpeg"
        );
        assert_eq!(
            check_image(Some("image/gif"), b"GIF89a....", 10, MAX).unwrap(),
            "image/gif"
        );
        assert_eq!(
            check_image(Some("image/webp"), b"RIFF\0\0\0\0WEBPVP8 ", 10, MAX).unwrap(),
            "image/webp"
        );
        assert_eq!(check_image(Some("image/bmp"), b"BM\0\0", 10, MAX).unwrap(), "image/bmp");
    }

    #[test]
    fn refusals_say_what_to_do() {
        let e = check_image(Some(&format!("text/html\n{}", "x".repeat(500))), PNG, 10, MAX).unwrap_err();
        assert!(e.message.len() < 200 && !e.message.contains('\n'), "{e}");
        assert_eq!(e.sqlstate, Sqlstate::InvalidParameterValue);
        assert!(e.hint.contains("image/png"), "{e}");
        let e = check_image(Some("image/svg+xml"), b"<svg", 10, MAX).unwrap_err();
        assert_eq!(e.sqlstate, Sqlstate::InvalidParameterValue);
        let e = check_image(None, PNG, 10, MAX).unwrap_err();
        assert_eq!(e.sqlstate, Sqlstate::NullValueNotAllowed);
        let e = check_image(Some("image/png"), PNG, MAX + 1, MAX).unwrap_err();
        assert_eq!(e.sqlstate, Sqlstate::ProgramLimitExceeded);
        assert!(e.message.contains("engram.image_max_bytes"), "{e}");
        let e = check_image(Some("image/png"), b"", 0, MAX).unwrap_err();
        assert_eq!(e.sqlstate, Sqlstate::NullValueNotAllowed);
    }

    #[test]
    fn bytes_must_be_the_declared_type() {
        let e = check_image(Some("image/jpeg"), PNG, 10, MAX).unwrap_err();
        assert!(e.hint.contains("mime 'image/png'"), "{e}");
        let e = check_image(Some("image/png"), b"#!/bin/sh\nrm -rf /", 10, MAX).unwrap_err();
        assert!(e.message.contains("not a image/png"), "{e}");
        assert!(check_image(Some("image/webp"), b"RIFF\0\0\0\0WAVE", 10, MAX).is_err());
    }

    #[test]
    fn image_ids() {
        let sha = "AB".repeat(32);
        assert_eq!(parse_sha256(Some(&sha)).unwrap(), "ab".repeat(32));
        assert!(parse_sha256(Some("abc")).is_err());
        assert!(parse_sha256(Some(&"g".repeat(64))).is_err());
        assert_eq!(parse_sha256(None).unwrap_err().sqlstate, Sqlstate::NullValueNotAllowed);
    }

    #[test]
    fn metadata_references() {
        let a = "a".repeat(64);
        let b = "B".repeat(64);
        assert!(referenced(&json!({})).unwrap().is_empty());
        assert_eq!(
            referenced(&json!({"images": [b, a, a.to_uppercase()]})).unwrap(),
            vec!["a".repeat(64), "b".repeat(64)],
            "distinct and sorted"
        );
        assert!(referenced(&json!({"images": "x"})).is_err());
        assert!(referenced(&json!({"images": ["x"]}))
            .unwrap_err()
            .message
            .contains("metadata.images"));
        assert!(referenced(&json!({"images": [1]})).is_err());
        assert_eq!(
            referenced_leniently(&json!({"images": [1, "x", a, a]})),
            vec!["a".repeat(64)]
        );
        assert!(referenced_leniently(&json!({"images": "x"})).is_empty());
        let many: Vec<String> = (0..33).map(|i| format!("{i:064x}")).collect();
        assert_eq!(
            referenced(&json!({ "images": many })).unwrap_err().sqlstate,
            Sqlstate::ProgramLimitExceeded
        );
    }

    #[test]
    fn k_is_clamped() {
        assert_eq!(clamp_k(None), 10);
        assert_eq!(clamp_k(Some(0)), 1);
        assert_eq!(clamp_k(Some(-5)), 1);
        assert_eq!(clamp_k(Some(500)), 50);
        assert_eq!(clamp_k(Some(7)), 7);
    }
}
