//! Keyed memories (`engram.put`): the namespace and key that address one,
//! and how a namespace travels in a query string.
//!
//! A namespace is a path of labels, such as `["users", "u42", "prefs"]`.
//! In a URL's query string it is written dot-joined (`users.u42.prefs`),
//! so a label holds no `.`; labels are never empty, and a path is at most
//! [`MAX_DEPTH`] labels of [`MAX_LABEL_BYTES`] each, [`MAX_NAMESPACE_BYTES`]
//! in all.

use crate::error::{echo, Error, Result, Sqlstate};

pub const MAX_DEPTH: usize = 16;
pub const MAX_LABEL_BYTES: usize = 256;
pub const MAX_KEY_BYTES: usize = 1024;
/// The labels of a namespace together, in bytes: the namespace is an index
/// key (beside the owner), which a btree holds up to ~2.7 KB.
pub const MAX_NAMESPACE_BYTES: usize = 1024;

const NAMESPACE_HINT: &str = "pass a namespace such as [\"users\", \"u42\"]: 1 to 16 non-empty labels without '.'";

/// A namespace of a keyed memory, or the prefix or suffix of one
/// (`allow_empty`: an empty prefix names every namespace).
pub fn check_namespace(what: &str, labels: &[Option<&str>], allow_empty: bool) -> Result<()> {
    if labels.is_empty() && !allow_empty {
        return Err(Error::invalid(format!("{what} is empty"), NAMESPACE_HINT));
    }
    if labels.len() > MAX_DEPTH {
        return Err(Error::new(
            Sqlstate::ProgramLimitExceeded,
            format!("{what} has {} labels; at most {MAX_DEPTH}", labels.len()),
            NAMESPACE_HINT,
        ));
    }
    let total: usize = labels.iter().flatten().map(|l| l.len()).sum();
    if total > MAX_NAMESPACE_BYTES {
        return Err(Error::new(
            Sqlstate::ProgramLimitExceeded,
            format!("{what} holds {total} bytes of labels; at most {MAX_NAMESPACE_BYTES}"),
            NAMESPACE_HINT,
        ));
    }
    for label in labels {
        let Some(label) = label else {
            return Err(Error::new(
                Sqlstate::NullValueNotAllowed,
                format!("{what} holds a NULL label"),
                NAMESPACE_HINT,
            ));
        };
        if label.is_empty() || label.contains('.') || label.len() > MAX_LABEL_BYTES || has_control(label) {
            return Err(Error::invalid(
                format!(
                    "{what} label '{}' is empty, too long, or holds '.' or a control character",
                    echo(label)
                ),
                NAMESPACE_HINT,
            ));
        }
    }
    Ok(())
}

/// The key of a keyed memory: unique within its owner and namespace.
pub fn check_key(key: Option<&str>) -> Result<()> {
    match key {
        None => Err(Error::new(
            Sqlstate::NullValueNotAllowed,
            "key is missing",
            "pass key => the item's key, unique within its namespace",
        )),
        Some(k) if k.is_empty() || k.len() > MAX_KEY_BYTES || has_control(k) => Err(Error::invalid(
            format!(
                "key '{}' is empty, longer than {MAX_KEY_BYTES} bytes, or holds a control character",
                echo(k)
            ),
            "pass a printable key of 1 to 1024 bytes",
        )),
        Some(_) => Ok(()),
    }
}

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// A namespace from its dot-joined form (`a.b.c`); the empty string is the
/// empty namespace (no labels).
pub fn parse_dotted(text: &str) -> Vec<String> {
    if text.is_empty() {
        Vec::new()
    } else {
        text.split('.').map(str::to_string).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns<'a>(v: &[&'a str]) -> Vec<Option<&'a str>> {
        v.iter().map(|s| Some(*s)).collect()
    }

    #[test]
    fn namespaces_are_paths_of_plain_labels() {
        assert!(check_namespace("namespace", &ns(&["users", "u42"]), false).is_ok());
        assert!(check_namespace("namespace_prefix", &[], true).is_ok());
        assert!(check_namespace("namespace", &[], false).is_err());
        for bad in [&["a.b"][..], &[""], &["a\nb"]] {
            let e = check_namespace("namespace", &ns(bad), false).unwrap_err();
            assert_eq!(e.sqlstate, Sqlstate::InvalidParameterValue);
        }
        assert_eq!(
            check_namespace("namespace", &[Some("a"), None], false)
                .unwrap_err()
                .sqlstate,
            Sqlstate::NullValueNotAllowed
        );
        let deep: Vec<Option<&str>> = (0..=MAX_DEPTH).map(|_| Some("x")).collect();
        assert_eq!(
            check_namespace("namespace", &deep, false).unwrap_err().sqlstate,
            Sqlstate::ProgramLimitExceeded
        );
        let long = "x".repeat(MAX_LABEL_BYTES + 1);
        assert!(check_namespace("namespace", &[Some(long.as_str())], false).is_err());
        let label = "x".repeat(MAX_LABEL_BYTES);
        let wide: Vec<Option<&str>> = (0..5).map(|_| Some(label.as_str())).collect();
        assert_eq!(
            check_namespace("namespace", &wide, false).unwrap_err().sqlstate,
            Sqlstate::ProgramLimitExceeded
        );
    }

    #[test]
    fn keys_are_printable_and_bounded() {
        assert!(check_key(Some("pref:theme")).is_ok());
        assert!(check_key(Some("a.b/c d")).is_ok(), "keys may hold dots and spaces");
        assert_eq!(check_key(None).unwrap_err().sqlstate, Sqlstate::NullValueNotAllowed);
        assert!(check_key(Some("")).is_err());
        assert!(check_key(Some("a\u{0}b")).is_err());
        assert!(check_key(Some(&"k".repeat(MAX_KEY_BYTES + 1))).is_err());
    }

    #[test]
    fn dotted_namespaces_split_on_dots() {
        assert_eq!(parse_dotted("a.b.c"), vec!["a", "b", "c"]);
        assert_eq!(parse_dotted(""), Vec::<String>::new());
    }
}
