//! `GET /api/console` (function key): the live storm console, one self-contained HTML page
//! (inline CSS, JavaScript and SVG; nothing from a CDN). Opened with a key in its URL
//! (`/api/console?code=<host key>`), it fetches `/api/status` and `/api/series` with the
//! same key every few seconds and draws the verdict, the signals, charts of the last hours
//! and the top of each queue; its controls post to `/api/controls` with the master key the
//! operator types in (kept in the page's memory only, never stored).
//!
//! The page is served with a content security policy that allows nothing but itself: its
//! own inline script and style, and requests to this origin.

use axum::http::header;
use axum::response::IntoResponse;

/// The page, compiled in.
pub const PAGE: &str = include_str!("console.html");

/// What the page may load and reach: only itself and this origin.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

pub async fn get() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        PAGE,
    )
}
