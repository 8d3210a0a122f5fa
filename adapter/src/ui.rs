//! The memory dashboard: a static page at /ui whose script talks to /api
//! with the token the person enters (kept in the tab's sessionStorage, sent
//! as a bearer header, never a cookie, so no other site can act with it).
//! Its views have addresses in the URL's fragment (`/ui#/memory/<id>`), so
//! the server serves the same three files for all of them (docs/UI.md).
//! Stored text is only ever inserted as text (never as HTML), and the page
//! forbids inline and foreign scripts and styles, and framing.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/style.css");

const SECURITY: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; \
         form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("x-content-type-options", "nosniff"),
];

fn page(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    let mut r = ([(CONTENT_TYPE, content_type), (CACHE_CONTROL, "no-store")], body).into_response();
    for (k, v) in SECURITY {
        r.headers_mut().insert(k, v.parse().unwrap());
    }
    r
}

pub fn router() -> Router {
    Router::new()
        .route("/ui", get(|| async { page("text/html; charset=utf-8", INDEX) }))
        .route(
            "/ui/app.js",
            get(|| async { page("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/ui/style.css",
            get(|| async { page("text/css; charset=utf-8", STYLE) }),
        )
}
