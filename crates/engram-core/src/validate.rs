//! Input validation for every write and read. Limits are documented in
//! docs/SQL.md; each error says what was wrong and what to do instead.

use crate::error::{Error, Result, Sqlstate};

pub use crate::limits::{MAX_CONTENT_BYTES, MAX_DIMS, MAX_MERGE_IDS, MAX_METADATA_BYTES, MAX_TAGS, MAX_TAG_BYTES};

/// Deepest nesting of arrays and objects in a JSON argument (metadata,
/// tool input/output, preferences). Readers (the adapter's JSON decoder
/// among them) recurse per level.
pub const MAX_JSON_DEPTH: usize = 32;
/// Largest magnitude of a number in a JSON argument: jsonb keeps any
/// numeric (1e400 included), but readers decode numbers as f64.
pub const MAX_JSON_NUMBER: f64 = 1e300;

/// Characters that render as nothing: content made only of these and
/// whitespace is as empty as blank content.
fn is_invisible(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{00AD}')
}

/// True when `text` has no visible character (whitespace, zero-width
/// spaces and joiners, word joiners, byte order marks, soft hyphens).
pub fn is_blank(text: &str) -> bool {
    text.chars().all(is_invisible)
}

pub const KINDS: [&str; 3] = ["semantic", "episodic", "procedural"];
pub const STATUSES: [&str; 3] = ["active", "archived", "expired"];
pub const ORDER_BY: [&str; 5] = ["created_at", "updated_at", "trust_score", "importance", "access_count"];

fn one_of(what: &str, value: &str, allowed: &[&str]) -> Result<()> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(Error::invalid(
            format!("unknown {what} '{}'", crate::error::echo(value)),
            format!("use one of: {}", allowed.join(", ")),
        ))
    }
}

pub fn check_kind(kind: &str) -> Result<()> {
    one_of("kind", kind, &KINDS)
}

pub fn check_status(status: &str) -> Result<()> {
    one_of("status", status, &STATUSES)
}

pub fn check_order_by(order_by: &str) -> Result<()> {
    one_of("order_by", order_by, &ORDER_BY)
}

pub fn check_author_type(author_type: &str) -> Result<()> {
    one_of("author_type", author_type, &crate::scoring::AuthorType::ALL)
}

/// Content must be present, not blank, and at most [`MAX_CONTENT_BYTES`].
pub fn check_content(content: Option<&str>) -> Result<()> {
    let Some(content) = content else {
        return Err(Error::new(
            Sqlstate::NullValueNotAllowed,
            "content is required",
            "pass content => 'the text to remember'",
        ));
    };
    if is_blank(content) {
        return Err(Error::invalid(
            "content is empty (only whitespace or invisible characters)",
            "pass the text to remember",
        ));
    }
    if content.len() > MAX_CONTENT_BYTES {
        return Err(Error::new(
            Sqlstate::ProgramLimitExceeded,
            format!(
                "content is {} bytes; the limit is {MAX_CONTENT_BYTES} bytes (256 KiB)",
                content.len()
            ),
            "split the text into smaller memories or store a summary",
        ));
    }
    Ok(())
}

/// Tags are stored literally (quotes, semicolons and unicode are fine) but
/// must be non-blank, at most [`MAX_TAG_BYTES`] each and [`MAX_TAGS`] in all.
pub fn check_tags(tags: &[Option<&str>]) -> Result<()> {
    if tags.len() > MAX_TAGS {
        return Err(Error::new(
            Sqlstate::ProgramLimitExceeded,
            format!("{} tags given; the limit is {MAX_TAGS}", tags.len()),
            "use fewer, broader tags",
        ));
    }
    for tag in tags {
        let Some(tag) = tag else {
            return Err(Error::new(
                Sqlstate::NullValueNotAllowed,
                "tags contain NULL",
                "remove NULL elements from tags",
            ));
        };
        if tag.trim().is_empty() {
            return Err(Error::invalid("tags contain a blank tag", "remove empty tags"));
        }
        if tag.len() > MAX_TAG_BYTES {
            return Err(Error::new(
                Sqlstate::ProgramLimitExceeded,
                format!("a tag is {} bytes; the limit is {MAX_TAG_BYTES}", tag.len()),
                "shorten the tag",
            ));
        }
    }
    Ok(())
}

/// Metadata is a JSON object (`json_type` is the value's jsonb_typeof).
pub fn check_metadata(json_type: &str, text_len: usize) -> Result<()> {
    if json_type != "object" {
        return Err(Error::invalid(
            format!("metadata must be a JSON object, not {json_type}"),
            "pass metadata => '{\"key\": \"value\"}'::jsonb",
        ));
    }
    if text_len > MAX_METADATA_BYTES {
        return Err(Error::new(
            Sqlstate::ProgramLimitExceeded,
            format!("metadata is {text_len} bytes; the limit is {MAX_METADATA_BYTES}"),
            "store large payloads elsewhere and keep a reference in metadata",
        ));
    }
    Ok(())
}

/// A JSON argument's shape (`text` is the jsonb's text form): at most
/// [`MAX_JSON_DEPTH`] levels of arrays and objects, and every number finite
/// as an f64 with a magnitude of at most [`MAX_JSON_NUMBER`]. One pass over
/// the text, no recursion, so any depth is measured safely.
pub fn check_json(what: &str, text: &str) -> Result<()> {
    let bytes = text.as_bytes();
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return Err(Error::invalid(
                        format!("{what} nests deeper than {MAX_JSON_DEPTH} levels"),
                        format!("flatten {what} to at most {MAX_JSON_DEPTH} levels of arrays and objects"),
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len() && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                    i += 1;
                }
                let token = &text[start..i];
                let fits = token
                    .parse::<f64>()
                    .is_ok_and(|v| v.is_finite() && v.abs() <= MAX_JSON_NUMBER);
                if !fits {
                    let shown: String = token.chars().take(40).collect();
                    return Err(Error::invalid(
                        format!("{what} holds the number {shown}, outside the range of a double"),
                        format!("keep numbers in {what} within ±1e300, or store them as strings"),
                    ));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Embeddings must match the configured dimension, be finite and non-zero
/// (a zero vector has no direction, so its cosine distance is undefined).
pub fn check_embedding(values: &[f32], dims: i32, argument: &str) -> Result<()> {
    if values.len() != dims as usize {
        return Err(Error::new(
            Sqlstate::DataException,
            format!(
                "{argument} has {} dimensions; this database stores {dims}",
                values.len()
            ),
            format!(
                "embed with a {dims}-dimension model, or change the dimension with engram.configure(embedding_dims => {}) while no embeddings are stored",
                values.len()
            ),
        ));
    }
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(Error::new(
            Sqlstate::DataException,
            format!("{argument} has a NaN or infinite value at position {}", i + 1),
            "pass finite numbers only",
        ));
    }
    if values.iter().all(|v| *v == 0.0) {
        return Err(Error::new(
            Sqlstate::DataException,
            format!("{argument} is the zero vector"),
            "a zero vector has no direction; check the embedding model's output",
        ));
    }
    Ok(())
}

pub fn check_dims(dims: i32) -> Result<()> {
    if !(1..=MAX_DIMS).contains(&dims) {
        return Err(Error::invalid(
            format!("embedding_dims {dims} is out of range"),
            format!("use 1..{MAX_DIMS} (pgvector's HNSW limit)"),
        ));
    }
    Ok(())
}

/// `[0, 1]`, finite; `None` (an SQL NULL) is refused too.
pub fn check_unit_interval(name: &str, value: Option<f64>) -> Result<()> {
    let Some(value) = value.filter(|v| !v.is_nan()) else {
        return Err(Error::invalid(
            format!("{name} must be a number between 0 and 1"),
            format!("pass {name} between 0 and 1, or leave it out for the default"),
        ));
    };
    if !(0.0..=1.0).contains(&value) {
        return Err(Error::invalid(
            format!("{name} {value} is out of range"),
            format!("pass {name} between 0 and 1"),
        ));
    }
    Ok(())
}

pub fn check_merge_ids(count: usize, distinct: usize) -> Result<()> {
    if count < 1 {
        return Err(Error::invalid("ids is empty", "pass the ids of the memories to merge"));
    }
    if count > MAX_MERGE_IDS {
        return Err(Error::new(
            Sqlstate::ProgramLimitExceeded,
            format!("{count} ids given; the limit is {MAX_MERGE_IDS}"),
            "merge in smaller batches",
        ));
    }
    if distinct != count {
        return Err(Error::invalid("ids contains duplicates or NULL", "pass each id once"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_limits() {
        assert!(check_content(Some("tea")).is_ok());
        assert_eq!(check_content(None).unwrap_err().sqlstate, Sqlstate::NullValueNotAllowed);
        assert_eq!(
            check_content(Some(" \n")).unwrap_err().sqlstate,
            Sqlstate::InvalidParameterValue
        );
        let big = "x".repeat(MAX_CONTENT_BYTES + 1);
        assert_eq!(
            check_content(Some(&big)).unwrap_err().sqlstate,
            Sqlstate::ProgramLimitExceeded
        );
        assert!(check_content(Some(&"x".repeat(MAX_CONTENT_BYTES))).is_ok());
        // zero-width characters alone are as empty as whitespace
        for blank in ["\u{200B}\u{200C}\u{200D}", "\u{FEFF} \u{2060}", "\u{00AD}\t"] {
            assert!(check_content(Some(blank)).is_err(), "{blank:?}");
        }
        assert!(check_content(Some("\u{200B}tea")).is_ok());
    }

    #[test]
    fn json_shape() {
        assert!(check_json(
            "metadata",
            r#"{"a": [1, 2.5, -3e10, {"b": "]]]]{{{{ \" 1e999"}], "c": 1e300}"#
        )
        .is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_JSON_DEPTH + 1), "]".repeat(MAX_JSON_DEPTH + 1));
        let e = check_json("metadata", &deep).unwrap_err();
        assert!(e.message.contains("deeper"), "{e}");
        let ok = format!("{}{}", "[".repeat(MAX_JSON_DEPTH), "]".repeat(MAX_JSON_DEPTH));
        assert!(check_json("metadata", &ok).is_ok());
        // far deeper than any recursion limit: measured, not recursed
        let very = format!("{{\"a\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(check_json("metadata", &very).is_err());
        for n in ["1e400", "-1e301", "1".repeat(400).as_str()] {
            let e = check_json("metadata", &format!(r#"{{"n": {n}}}"#)).unwrap_err();
            assert!(e.message.contains("double"), "{n}: {e}");
        }
    }

    #[test]
    fn tags_are_literal_but_bounded() {
        assert!(check_tags(&[Some("it's; DROP TABLE x; --"), Some("日本語")]).is_ok());
        assert!(check_tags(&[None]).is_err());
        assert!(check_tags(&[Some("")]).is_err());
        let long = "t".repeat(MAX_TAG_BYTES + 1);
        assert!(check_tags(&[Some(&long)]).is_err());
        let many: Vec<Option<&str>> = (0..=MAX_TAGS).map(|_| Some("a")).collect();
        assert!(check_tags(&many).is_err());
    }

    #[test]
    fn enums() {
        assert!(check_kind("episodic").is_ok());
        let e = check_kind("poem").unwrap_err();
        assert!(e.hint.contains("semantic, episodic, procedural"));
        assert!(check_author_type("human").is_ok());
        assert!(check_author_type("robot").is_err());
        assert!(check_order_by("access_count").is_ok());
        assert!(check_order_by("id; drop").is_err());
        assert!(check_status("expired").is_ok());
    }

    #[test]
    fn embeddings() {
        assert!(check_embedding(&[0.1, 0.2, 0.3], 3, "embedding").is_ok());
        let e = check_embedding(&[0.1, 0.2], 3, "embedding").unwrap_err();
        assert!(e.message.contains("2 dimensions"));
        assert!(check_embedding(&[0.1, f32::NAN, 0.3], 3, "embedding").is_err());
        assert!(check_embedding(&[0.1, f32::INFINITY, 0.3], 3, "embedding").is_err());
        assert!(check_embedding(&[0.0, 0.0, 0.0], 3, "embedding").is_err());
    }

    #[test]
    fn metadata_and_ranges() {
        assert!(check_metadata("object", 10).is_ok());
        assert!(check_metadata("array", 10).is_err());
        assert!(check_metadata("object", MAX_METADATA_BYTES + 1).is_err());
        assert!(check_unit_interval("importance", Some(0.5)).is_ok());
        assert!(check_unit_interval("importance", Some(1.5)).is_err());
        let e = check_unit_interval("importance", None).unwrap_err();
        assert!(!e.message.contains("NaN"), "{e}");
        assert!(check_unit_interval("importance", Some(f64::NAN)).is_err());
        assert!(check_dims(384).is_ok());
        assert!(check_dims(0).is_err());
        assert!(check_merge_ids(2, 2).is_ok());
        assert!(check_merge_ids(2, 1).is_err());
        assert!(check_merge_ids(0, 0).is_err());
    }
}
