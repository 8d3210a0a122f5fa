//! Filters over a memory's document: its `value` when it has one (a keyed
//! memory written by `put`), else its `metadata`. A filter is a JSON object
//! whose keys name top-level fields of the document; each field's condition
//! is either a plain value (equality) or an object of operators:
//!
//! ```json
//! {"project": "apollo", "priority": {"$gte": 2}, "status": {"$in": ["open", "blocked"]}}
//! ```
//!
//! * `$eq`, `$ne`: JSON equality (numbers by value: `1` equals `1.0`).
//!   `$ne` also matches a document without the field.
//! * `$gt`, `$gte`, `$lt`, `$lte`: numbers with numbers, strings with
//!   strings (by code point); a field of another type does not match.
//! * `$in`: one of the listed values.
//!
//! Every condition must hold. `equalities` gives the part of a filter that
//! JSON containment (`@>`) can serve from an index; `matches` decides.

use crate::error::{Error, Result};
use serde_json::{Map, Value};
use std::cmp::Ordering;

/// The operators a condition may use.
pub const OPERATORS: [&str; 7] = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in"];

/// At most this many fields in one filter, and values in one `$in`: a
/// filter is a query, not a data set.
pub const MAX_FIELDS: usize = 32;
pub const MAX_IN: usize = 1000;

const HINT: &str = "pass a JSON object such as {\"field\": \"value\", \"count\": {\"$gte\": 2}}; \
                    operators: $eq $ne $gt $gte $lt $lte $in";

/// Refuses a filter that is not an object of fields with known operators.
pub fn check(filter: &Value) -> Result<()> {
    let fields = filter
        .as_object()
        .ok_or_else(|| Error::invalid(format!("filter must be a JSON object, not {}", kind(filter)), HINT))?;
    if fields.len() > MAX_FIELDS {
        return Err(Error::new(
            crate::Sqlstate::ProgramLimitExceeded,
            format!("filter has {} fields; at most {MAX_FIELDS} are allowed", fields.len()),
            "narrow the filter, or filter the rest in the application",
        ));
    }
    for (field, condition) in fields {
        if field.is_empty() || field.starts_with('$') {
            return Err(Error::invalid(
                format!("filter field '{}' is not a field name", clip(field)),
                "name a top-level field of the document (value, else metadata); operators go inside a field's condition",
            ));
        }
        if let Some(ops) = operators(condition) {
            if ops.is_empty() {
                return Err(Error::invalid(
                    format!("filter field '{}' has an empty condition", clip(field)),
                    HINT,
                ));
            }
            for (op, operand) in ops {
                check_operator(field, op, operand)?;
            }
        }
    }
    Ok(())
}

fn check_operator(field: &str, op: &str, operand: &Value) -> Result<()> {
    match op {
        "$eq" | "$ne" => Ok(()),
        "$gt" | "$gte" | "$lt" | "$lte" if operand.is_number() || operand.is_string() => Ok(()),
        "$gt" | "$gte" | "$lt" | "$lte" => Err(Error::invalid(
            format!(
                "filter field '{}': {op} compares numbers or strings, not {}",
                clip(field),
                kind(operand)
            ),
            HINT,
        )),
        "$in" => match operand.as_array() {
            Some(values) if values.len() <= MAX_IN => Ok(()),
            Some(values) => Err(Error::new(
                crate::Sqlstate::ProgramLimitExceeded,
                format!(
                    "filter field '{}': $in lists {} values; at most {MAX_IN}",
                    clip(field),
                    values.len()
                ),
                "split the query",
            )),
            None => Err(Error::invalid(
                format!(
                    "filter field '{}': $in takes an array, not {}",
                    clip(field),
                    kind(operand)
                ),
                HINT,
            )),
        },
        _ => Err(Error::invalid(
            format!("filter field '{}': unknown operator '{}'", clip(field), clip(op)),
            HINT,
        )),
    }
}

/// A condition's operators, when it is an object whose keys all start with
/// `$`; `None` when the condition is a plain value (equality). An object
/// that mixes operators and fields is a plain value compared whole.
fn operators(condition: &Value) -> Option<&Map<String, Value>> {
    condition
        .as_object()
        .filter(|o| o.is_empty() || o.keys().all(|k| k.starts_with('$')))
}

/// Whether `document` satisfies every condition of `filter` (checked with
/// `check` first; an unknown operator never matches).
pub fn matches(document: &Value, filter: &Value) -> bool {
    let Some(fields) = filter.as_object() else {
        return false;
    };
    fields.iter().all(|(field, condition)| {
        let actual = document.get(field);
        match operators(condition) {
            None => actual.is_some_and(|a| equal(a, condition)),
            Some(ops) => !ops.is_empty() && ops.iter().all(|(op, operand)| holds(actual, op, operand)),
        }
    })
}

fn holds(actual: Option<&Value>, op: &str, operand: &Value) -> bool {
    match (op, actual) {
        ("$ne", None) => true,
        ("$ne", Some(a)) => !equal(a, operand),
        (_, None) => false,
        ("$eq", Some(a)) => equal(a, operand),
        ("$in", Some(a)) => operand.as_array().is_some_and(|vs| vs.iter().any(|v| equal(a, v))),
        ("$gt", Some(a)) => compare(a, operand) == Some(Ordering::Greater),
        ("$gte", Some(a)) => matches!(compare(a, operand), Some(Ordering::Greater | Ordering::Equal)),
        ("$lt", Some(a)) => compare(a, operand) == Some(Ordering::Less),
        ("$lte", Some(a)) => matches!(compare(a, operand), Some(Ordering::Less | Ordering::Equal)),
        _ => false,
    }
}

/// JSON equality, numbers by value.
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => compare(a, b) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (integer(x), integer(y)) {
            (Some(i), Some(j)) => Some(i.cmp(&j)),
            _ => x.as_f64()?.partial_cmp(&y.as_f64()?),
        },
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// An integer of JSON exactly (i64 or u64), for comparisons without
/// rounding; None for a number with a fraction or exponent.
fn integer(n: &serde_json::Number) -> Option<i128> {
    n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from))
}

/// The fields of `filter` that must equal a scalar value (plain or `$eq`),
/// as one object that a matching document contains (`document @>
/// equalities`): a GIN index on the documents serves it. `None` when the
/// filter has no such field. Arrays and objects are left to `matches`:
/// containment of those is not equality.
pub fn equalities(filter: &Value) -> Option<Value> {
    let mut out = Map::new();
    for (field, condition) in filter.as_object()? {
        let wanted = match operators(condition) {
            None => Some(condition),
            Some(ops) => ops.get("$eq"),
        };
        if let Some(v) = wanted.filter(|v| !v.is_array() && !v.is_object()) {
            out.insert(field.clone(), v.clone());
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_values_are_equalities() {
        let doc = json!({"project": "apollo", "n": 2, "tags": ["a", "b"]});
        assert!(matches(&doc, &json!({"project": "apollo"})));
        assert!(matches(&doc, &json!({"n": 2.0})));
        assert!(!matches(&doc, &json!({"project": "gemini"})));
        assert!(!matches(&doc, &json!({"missing": "x"})));
        assert!(matches(&doc, &json!({"tags": ["a", "b"]})));
        assert!(
            !matches(&doc, &json!({"tags": ["a"]})),
            "arrays compare whole, not by containment"
        );
        assert!(matches(&doc, &json!({})), "an empty filter keeps everything");
    }

    #[test]
    fn operators_compare_numbers_and_strings() {
        let doc = json!({"n": 5, "s": "m", "f": 1.5});
        assert!(matches(&doc, &json!({"n": {"$gt": 4, "$lte": 5}})));
        assert!(!matches(&doc, &json!({"n": {"$gt": 5}})));
        assert!(matches(&doc, &json!({"f": {"$gte": 1.5, "$lt": 2}})));
        assert!(matches(&doc, &json!({"s": {"$gt": "a", "$lt": "z"}})));
        assert!(
            !matches(&doc, &json!({"s": {"$gt": 1}})),
            "a string is not compared with a number"
        );
        assert!(!matches(&doc, &json!({"missing": {"$lt": 10}})));
        assert!(matches(&doc, &json!({"n": {"$in": [1, 5]}})));
        assert!(!matches(&doc, &json!({"n": {"$in": []}})));
        assert!(matches(&doc, &json!({"n": {"$eq": 5.0}})));
    }

    #[test]
    fn ne_matches_a_missing_field() {
        let doc = json!({"status": "open"});
        assert!(matches(&doc, &json!({"status": {"$ne": "closed"}})));
        assert!(!matches(&doc, &json!({"status": {"$ne": "open"}})));
        assert!(matches(&doc, &json!({"owner": {"$ne": "bob"}})));
    }

    #[test]
    fn large_integers_compare_exactly() {
        let doc = json!({"id": 9_007_199_254_740_993_i64, "big": u64::MAX});
        assert!(!matches(&doc, &json!({"id": 9_007_199_254_740_992_i64})));
        assert!(matches(&doc, &json!({"id": {"$gt": 9_007_199_254_740_992_i64}})));
        assert!(!matches(&doc, &json!({"big": u64::MAX - 1})));
        assert!(matches(&doc, &json!({"big": {"$gt": i64::MAX}})));
    }

    #[test]
    fn an_object_of_fields_is_a_value() {
        let doc = json!({"where": {"city": "Lyon"}});
        assert!(matches(&doc, &json!({"where": {"city": "Lyon"}})));
        assert!(!matches(&doc, &json!({"where": {"city": "Paris"}})));
        assert!(check(&json!({"where": {"city": "Lyon"}})).is_ok());
    }

    #[test]
    fn bad_filters_are_refused_with_a_hint() {
        for bad in [
            json!([1]),
            json!("x"),
            json!({"$or": []}),
            json!({"": 1}),
            json!({"n": {}}),
            json!({"n": {"$regex": "a"}}),
            json!({"n": {"$gt": [1]}}),
            json!({"n": {"$in": 3}}),
        ] {
            let e = check(&bad).expect_err(&bad.to_string());
            assert_eq!(e.sqlstate, crate::Sqlstate::InvalidParameterValue, "{bad}");
            assert!(!e.hint.is_empty());
        }
        let many: Map<String, Value> = (0..=MAX_FIELDS).map(|i| (format!("f{i}"), json!(1))).collect();
        assert_eq!(
            check(&Value::Object(many)).unwrap_err().sqlstate,
            crate::Sqlstate::ProgramLimitExceeded
        );
    }

    #[test]
    fn equalities_are_the_scalar_equal_fields() {
        let f = json!({"a": 1, "b": {"$eq": "x"}, "c": {"$gt": 2}, "d": [1], "e": {"$ne": 3}});
        assert_eq!(equalities(&f), Some(json!({"a": 1, "b": "x"})));
        assert_eq!(equalities(&json!({"c": {"$lt": 1}})), None);
        // Every document the filter matches contains its equalities.
        let doc = json!({"a": 1.0, "b": "x", "c": 3, "d": [1]});
        assert!(matches(&doc, &f));
    }
}
