//! RFC 9457 problem details: every error of `/v1` (and of its `/api`
//! aliases) is `application/problem+json` with the SQLSTATE and hint the
//! database raised, and 503 carries `Retry-After`.

use crate::db::DbError;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

pub const CONTENT_TYPE: &str = "application/problem+json";

/// An error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// Always `about:blank`: the status and title say what kind of error it is.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The HTTP status's reason phrase.
    pub title: &'static str,
    pub status: u16,
    /// What went wrong and what to do.
    pub detail: String,
    /// The SQLSTATE the database raised, when it did (e.g. 22023: bad input, 42501: not allowed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sqlstate: Option<String>,
    /// The database's hint, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// With a conflict (409 from POST /v1/memories): the memories the new one conflicts with.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub conflicts: Option<Box<Value>>,
}

impl Problem {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Problem {
        Problem {
            kind: "about:blank",
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail: detail.into(),
            sqlstate: None,
            hint: None,
            conflicts: None,
        }
    }

    pub fn bad_request(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, detail)
    }

    /// Nothing of the caller's is there (P0002, as the database says it).
    pub fn not_found(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::NOT_FOUND, detail).with_sqlstate("P0002")
    }

    pub fn with_sqlstate(mut self, sqlstate: &str) -> Problem {
        self.sqlstate = Some(sqlstate.into());
        self
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut r = (status, body).into_response();
        let h = r.headers_mut();
        h.insert("content-type", HeaderValue::from_static(CONTENT_TYPE));
        if status == StatusCode::UNAUTHORIZED {
            h.insert("www-authenticate", HeaderValue::from_static("Bearer"));
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            h.insert("retry-after", HeaderValue::from_static("1"));
        }
        r
    }
}

/// The status of each SQLSTATE class is `DbError::status`.
impl From<DbError> for Problem {
    fn from(e: DbError) -> Problem {
        let mut p = Problem::new(e.status(), crate::limits::clip_quoted(&e.message));
        p.sqlstate = e.code;
        p.hint = e.hint;
        p
    }
}

/// A 4xx or 5xx answer that is not a problem yet (an axum rejection: a
/// body that is not JSON, a wrong method; the authentication layer's
/// `{"error": ...}`) as a problem with the same status and message.
pub async fn as_problem(response: Response) -> Response {
    let status = response.status();
    let is_problem = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(CONTENT_TYPE.as_bytes()));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let detail = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(o)) => o
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| text.to_string()),
        _ if text.trim().is_empty() => match status {
            StatusCode::METHOD_NOT_ALLOWED => "this route does not take this method; see /v1/openapi.json".into(),
            StatusCode::NOT_FOUND => "no such route; see /v1/openapi.json".into(),
            s => s.canonical_reason().unwrap_or("error").into(),
        },
        _ => text.trim().to_string(),
    };
    let mut answer = Problem::new(status, detail).into_response();
    for name in ["allow", "retry-after", "www-authenticate"] {
        if let Some(v) = parts.headers.get(name) {
            answer.headers_mut().insert(name, v.clone());
        }
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rejections_become_problems_keeping_status_and_message() {
        let plain = (StatusCode::UNPROCESSABLE_ENTITY, "missing field `query`").into_response();
        let r = as_problem(plain).await;
        assert_eq!(r.status(), 422);
        assert_eq!(r.headers()["content-type"], CONTENT_TYPE);
        let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["detail"], "missing field `query`");
        assert_eq!(v["title"], "Unprocessable Entity");
        assert_eq!(v["status"], 422);

        let denied = crate::caller::deny(StatusCode::SERVICE_UNAVAILABLE, "cannot check the token");
        let r = as_problem(denied).await;
        assert_eq!(r.headers()["retry-after"], "1");
        let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap()["detail"],
            "cannot check the token"
        );

        let ok = (StatusCode::OK, "fine").into_response();
        assert_eq!(
            as_problem(ok).await.headers().get("content-type").unwrap(),
            "text/plain; charset=utf-8"
        );
    }

    #[test]
    fn database_errors_carry_sqlstate_and_hint() {
        let p = Problem::from(DbError {
            code: Some("42501".into()),
            message: "not yours".into(),
            hint: Some("bind first".into()),
        });
        assert_eq!(
            (p.status, p.sqlstate.as_deref(), p.hint.as_deref()),
            (403, Some("42501"), Some("bind first"))
        );
    }
}
