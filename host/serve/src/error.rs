//! Every error the HTTP API returns: a status code and a JSON body
//! `{"error": {"code", "message", "problems"?}}`; and the status of an
//! answer that rejects a task ([`rejection_status`]), chosen by its typed
//! reason, never by comparing strings.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hcp_contracts::message::RejectReason;
use serde_json::{Value, json};

/// The code of a 503 for a full disk (answered with `Retry-After: 5`).
const STORAGE_FULL: &str = "storage_full";

/// An API error.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    problems: Option<Value>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            problems: None,
        }
    }

    /// 400: the request is malformed.
    pub(crate) fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 400 with the problems of a document, each at its JSON pointer.
    pub(crate) fn invalid(message: impl Into<String>, problems: &[hcp_contracts::Problem]) -> Self {
        let mut e = Self::new(StatusCode::BAD_REQUEST, "invalid_message", message);
        e.problems = Some(
            problems
                .iter()
                .map(|p| json!({"pointer": p.pointer, "message": p.message}))
                .collect(),
        );
        e
    }

    /// 401: no or a wrong credential.
    pub(crate) fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403: authenticated, not allowed.
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 404.
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409: the request conflicts with the resource's state.
    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 413.
    /// 429 `too_many_streams`: the caller holds as many event streams as
    /// it may.
    pub(crate) fn too_many(message: impl Into<String>) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, "too_many_streams", message)
    }

    pub(crate) fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }

    /// 415.
    pub(crate) fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            message,
        )
    }

    /// 503: the host cannot do it now (e.g. its receipts cannot be
    /// recorded); nothing was done.
    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// 503: the request took too long.
    pub(crate) fn timeout() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "the request took too long",
        )
    }

    /// 405.
    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "method not allowed on this path",
        )
    }

    /// 500: a host fault. The message is logged; the caller sees a generic one.
    pub(crate) fn internal(error: &anyhow::Error) -> Self {
        tracing::error!("internal error: {error:#}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "the host failed; see its log",
        )
    }
}

/// The HTTP status of the answer to a task rejected for `reason`. A
/// rejection is an HCP answer like any other (200, the `task_rejected`
/// message as the body), except for a caller that is not authenticated:
/// that is a 401 error (with `WWW-Authenticate: Bearer`), as for any
/// request without a valid credential ([`ApiError::rejected`]); and for a
/// caller over its submission limits: 429, the `task_rejected` message as
/// the body, with `Retry-After`.
pub(crate) fn rejection_status(reason: RejectReason) -> StatusCode {
    match reason {
        RejectReason::Unauthorized => StatusCode::UNAUTHORIZED,
        RejectReason::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        RejectReason::Forbidden
        | RejectReason::InvalidInput
        | RejectReason::RiskTooHigh
        | RejectReason::ApprovalRejected
        | RejectReason::ApprovalExpired
        | RejectReason::ResourceUnavailable
        | RejectReason::CapabilityNotFound
        | RejectReason::InternalError => StatusCode::OK,
    }
}

impl ApiError {
    /// The error that answers a rejection instead of its `task_rejected`
    /// message, when [`rejection_status`] says it is one (a 401 whose code
    /// is the reason code and whose message is the reason's); `None` when
    /// the message itself is the answer.
    pub(crate) fn rejected(reason: RejectReason, message: &str) -> Option<Self> {
        match rejection_status(reason) {
            status @ StatusCode::UNAUTHORIZED => {
                Some(Self::new(status, reason.as_str(), message.to_owned()))
            }
            _ => None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"code": self.code, "message": self.message}});
        if let Some(p) = self.problems {
            body["error"]["problems"] = p;
        }
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.code == STORAGE_FULL {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(5u32));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<anyhow::Error> for ApiError {
    /// A write that failed for want of space is a 503 `storage_full` with
    /// its reason (nothing was admitted; the host recovers by itself once
    /// space returns); any other fault a 500.
    fn from(e: anyhow::Error) -> Self {
        match crate::store::durable::storage_full(&e) {
            Some(why) => {
                tracing::error!("storage full: {e:#}");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    STORAGE_FULL,
                    format!(
                        "the host's storage is full ({why}); the request was not carried out; \
                         try again once space is freed"
                    ),
                )
            }
            None => Self::internal(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unauthenticated_caller_is_answered_with_an_error() {
        for reason in RejectReason::ALL {
            let error = ApiError::rejected(reason, "why");
            if reason == RejectReason::Unauthorized {
                let e = error.expect("a 401");
                assert_eq!(
                    (e.status, e.code, e.message.as_str()),
                    (StatusCode::UNAUTHORIZED, "unauthorized", "why")
                );
            } else if reason == RejectReason::RateLimited {
                // Answered with its task_rejected message, as a 429.
                assert!(error.is_none());
                assert_eq!(rejection_status(reason), StatusCode::TOO_MANY_REQUESTS);
            } else {
                assert!(error.is_none(), "{reason}");
                assert_eq!(rejection_status(reason), StatusCode::OK);
            }
        }
    }
}
