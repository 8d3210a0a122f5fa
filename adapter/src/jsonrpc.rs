//! A check in front of rmcp's POST /mcp: the body is read (within rmcp's own
//! size limit) and parsed once here, so that what is not a JSON-RPC message
//! gets a JSON-RPC error rather than rmcp's HTTP 415 in plain text:
//!
//! * -32700 (parse error): malformed JSON, invalid UTF-8, a lone surrogate
//!   (`"\ud800"`);
//! * -32600 (invalid request): a batch (an array; MCP has none since
//!   2025-06-18), a JSON value that is not an object, nesting deeper than
//!   [`MAX_DEPTH`], or an object that is not a JSON-RPC message.
//!
//! Both are HTTP 400 with `Content-Type: application/json`. A body that
//! passes goes on to rmcp unchanged.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// rmcp's limit on a request body (StreamableHttpServerConfig's default).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Deepest nesting of arrays and objects a message may have (serde_json
/// itself stops at 128).
pub const MAX_DEPTH: usize = 100;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;

/// A JSON-RPC error answer (HTTP 400, or `status`).
pub fn error(status: StatusCode, code: i64, message: &str, id: Value) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    (status, axum::Json(body)).into_response()
}

fn is_json(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
}

/// The deepest nesting of arrays and objects in `body`, counted outside
/// strings; it stops counting past `limit`.
pub fn depth(body: &[u8], limit: usize) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in body {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
                if deepest > limit {
                    return deepest;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// What a body is, as JSON-RPC sees it: Ok for a message rmcp can read,
/// else the error code and message to answer with (and the request's id
/// when it has a usable one).
pub fn classify(body: &[u8]) -> Result<(), (i64, String, Value)> {
    if depth(body, MAX_DEPTH) > MAX_DEPTH {
        return Err((
            INVALID_REQUEST,
            format!("Invalid Request: JSON nested deeper than {MAX_DEPTH} levels"),
            Value::Null,
        ));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        (
            PARSE_ERROR,
            format!(
                "Parse error: the body is not valid JSON in UTF-8 ({})",
                crate::limits::clip(&e.to_string())
            ),
            Value::Null,
        )
    })?;
    let id = match value.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    match &value {
        Value::Array(_) => {
            return Err((
                INVALID_REQUEST,
                "Invalid Request: batches (JSON arrays) are not supported; send one JSON-RPC message per request"
                    .into(),
                Value::Null,
            ))
        }
        Value::Object(_) => {}
        _ => {
            return Err((
                INVALID_REQUEST,
                "Invalid Request: a JSON-RPC message is a JSON object".into(),
                Value::Null,
            ))
        }
    }
    if let Err(e) = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(body) {
        return Err((
            INVALID_REQUEST,
            format!(
                "Invalid Request: not a JSON-RPC 2.0 request or notification that MCP knows ({})",
                crate::limits::clip(&e.to_string())
            ),
            id,
        ));
    }
    Ok(())
}

/// Whether `T` is anywhere in the error's chain of sources.
fn caused_by<T: std::error::Error + 'static>(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err.is::<T>() {
            return true;
        }
        next = err.source();
    }
    false
}

/// The middleware (on the /mcp routes only).
pub async fn check(req: Request, next: Next) -> Response {
    if req.method() != Method::POST || !is_json(&req) {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            let (status, message) = if caused_by::<http_body_util::LengthLimitError>(&e) {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("Invalid Request: the body is larger than {MAX_BODY_BYTES} bytes"),
                )
            } else if caused_by::<tower_http::timeout::TimeoutError>(&e) {
                (
                    StatusCode::REQUEST_TIMEOUT,
                    "Invalid Request: the body did not arrive within the body read timeout (--body-timeout-ms)".into(),
                )
            } else if caused_by::<crate::body_deadline::BodyDeadline>(&e) {
                (
                    StatusCode::REQUEST_TIMEOUT,
                    format!("Invalid Request: {}", crate::body_deadline::BodyDeadline),
                )
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    "Invalid Request: the body could not be read".into(),
                )
            };
            return error(status, INVALID_REQUEST, &message, Value::Null);
        }
    };
    if let Err((code, message, id)) = classify(&bytes) {
        return error(StatusCode::BAD_REQUEST, code, &message, id);
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &[u8]) -> Option<i64> {
        classify(body).err().map(|e| e.0)
    }

    #[test]
    fn bodies_that_are_not_messages_get_json_rpc_codes() {
        let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert_eq!(code(ping), None);
        assert_eq!(code(b"{not json"), Some(PARSE_ERROR));
        assert_eq!(code(b"\xff\xfe{}"), Some(PARSE_ERROR));
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\ud800"}}"#),
            Some(PARSE_ERROR)
        );
        assert_eq!(
            code(format!("[{}]", std::str::from_utf8(ping).unwrap()).as_bytes()),
            Some(INVALID_REQUEST)
        );
        assert_eq!(code(b"42"), Some(INVALID_REQUEST));
        assert_eq!(code(br#"{"hello":"world"}"#), Some(INVALID_REQUEST));
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        assert_eq!(code(deep.as_bytes()), Some(INVALID_REQUEST));
        let (_, _, id) = classify(br#"{"jsonrpc":"2.0","id":"a","method":7}"#).unwrap_err();
        assert_eq!(id, json!("a"));
    }

    #[test]
    fn depth_ignores_brackets_in_strings() {
        assert_eq!(depth(br#"{"a":"[[[[{{{{\"]]"}"#, 10), 1);
        assert_eq!(depth(br#"{"a":[{"b":[]}]}"#, 10), 4);
    }
}
