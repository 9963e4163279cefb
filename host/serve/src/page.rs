//! The operator's page (`GET /`): one self-contained file, served with a
//! Content-Security-Policy that lets only its own inline script and style
//! run (by their SHA-256), talk only to this server, load nothing else, and
//! never be framed. Everything it shows comes from callers and
//! capabilities and is inserted as text; the policy is the second line of
//! defence should that ever slip.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use std::sync::LazyLock;

const PAGE: &str = include_str!("operator.html");

static CSP: LazyLock<String> = LazyLock::new(|| policy(PAGE));

/// `'sha256-<base64>'` of the text between `<tag>` and `</tag>`, or
/// `'none'` when the page has no such element (nothing inline may run).
fn inline_source(page: &str, tag: &str) -> String {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let Some(start) = page.find(&open).map(|i| i + open.len()) else {
        return "'none'".to_owned();
    };
    let Some(len) = page[start..].find(&close) else {
        return "'none'".to_owned();
    };
    let digest = Sha256::digest(&page.as_bytes()[start..start + len]);
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

fn policy(page: &str) -> String {
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; img-src 'none'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        inline_source(page, "script"),
        inline_source(page, "style"),
    )
}

pub(crate) async fn operator_page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP.as_str()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_covers_the_one_script_and_the_one_style_and_nothing_else() {
        // One element of each: a second would be blocked by the policy.
        for tag in ["<script", "<style"] {
            assert_eq!(PAGE.matches(tag).count(), 1, "{tag}");
        }
        // No inline handlers or style attributes: the policy blocks them.
        for attr in [
            " style=\"",
            " onclick=",
            " onload=",
            " onerror=",
            " src=",
            " href=\"http",
        ] {
            assert!(!PAGE.contains(attr), "the page has {attr:?}");
        }
        let csp = policy(PAGE);
        assert!(csp.contains("script-src 'sha256-"), "{csp}");
        assert!(csp.contains("style-src 'sha256-"), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
        // The hash is of the exact text between the tags.
        assert_eq!(
            inline_source("<p><script>x()</script>", "script"),
            format!(
                "'sha256-{}'",
                base64::engine::general_purpose::STANDARD.encode(Sha256::digest(b"x()"))
            )
        );
        assert_eq!(inline_source("<p>nothing</p>", "script"), "'none'");
        assert_eq!(inline_source("<script>unterminated", "script"), "'none'");
    }
}
