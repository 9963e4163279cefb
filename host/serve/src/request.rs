//! What handlers read from a request: who sends it (`Authorization: Bearer
//! <credential>`, checked against `callers.json` under the policy in
//! force), whether that is an operator, and its JSON body. A route that
//! needs a caller checks the credential from the request's head before its
//! handler (and so its body) is reached: [`known_caller_first`].

use super::error::ApiError;
use super::state::AppState;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use hcp_policy::Caller;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The credential of `Authorization: Bearer <credential>`.
pub(crate) fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer <credential>"))?;
    let value = value
        .to_str()
        .map_err(|_| ApiError::unauthorized("malformed Authorization header"))?;
    // The scheme's name is case-insensitive (RFC 9110, section 11.1).
    value
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case("bearer "))
        .and_then(|_| value.get(7..))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::unauthorized("the Authorization header must be Bearer <credential>")
        })
}

/// A route's path parameters, as [`axum::extract::Path`] reads them, but
/// refused as the API's other errors are: a JSON 400 `invalid_path` (a
/// segment that is not UTF-8 once decoded, say) instead of axum's plain
/// text.
pub(crate) struct PathArgs<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for PathArgs<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(args)) => Ok(Self(args)),
            Err(e) => Err(ApiError::bad_request("invalid_path", e.body_text())),
        }
    }
}

/// The caller of a request, under the policy in force.
pub(crate) fn caller(state: &AppState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    state
        .host
        .policy()
        .authenticate_bearer(bearer(headers)?)
        .cloned()
        .ok_or_else(|| ApiError::unauthorized("unknown credential"))
}

/// Middleware of every route that needs a caller: a credential that is no
/// caller's is answered 401 from the request's head, before the handler
/// runs. A handler's body extractor reads the whole body (up to
/// [`super::BODY_LIMIT`]) before the handler's own check: 400 connections
/// with a wrong token, each sending 1 MiB and stalling, took the server
/// from 87 to 505 MB. The body of a refused request is never read (hyper
/// closes the connection after the answer). The handler still finds its
/// caller itself ([`caller`], [`operator`]).
pub(crate) async fn known_caller_first(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    match caller(&state, request.headers()) {
        Ok(_) => next.run(request).await,
        Err(refused) => refused.into_response(),
    }
}

/// The caller of a request, who must be an operator (403 otherwise).
pub(crate) fn operator(state: &AppState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let c = caller(state, headers)?;
    if !c.is_operator() {
        return Err(ApiError::forbidden(format!("{} is not an operator", c.id)));
    }
    Ok(c)
}

/// The body as JSON: it must say `application/json` (415), fit
/// [`super::BODY_LIMIT`] (413) and parse (400).
pub(crate) fn json_body(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Value, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = content_type.split(';').next().unwrap_or("").trim();
    if !mime.eq_ignore_ascii_case("application/json") {
        return Err(ApiError::unsupported_media_type(format!(
            "the body must be application/json, not {:?}",
            content_type
        )));
    }
    let body = body.map_err(|e| match e {
        BytesRejection::FailedToBufferBody(b) if b.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::too_large(format!(
                "the body is larger than {} bytes",
                super::BODY_LIMIT
            ))
        }
        other => ApiError::bad_request("unreadable_body", other.body_text()),
    })?;
    serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request("invalid_json", format!("the body is not valid JSON: {e}"))
    })
}

/// The body as JSON ([`json_body`]) read as a `T`: a body of another
/// shape is a 400 with `code`, saying what was `expected`.
pub(crate) fn body_as<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    code: &'static str,
    expected: &str,
) -> Result<T, ApiError> {
    serde_json::from_value(json_body(headers, body)?)
        .map_err(|e| ApiError::bad_request(code, format!("expected {expected}: {e}")))
}

/// What an operator decides, in the body of a decision on an approval or
/// a HID proposal: `"approve"` or `"reject"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(crate) enum Decision {
    /// Go ahead.
    Approve,
    /// Do not.
    Reject,
}
