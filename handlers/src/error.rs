//! The one error type every route returns: a status, a JSON `{"error": ...}` body a
//! caller can act on, and a log line; internal details are logged, never answered.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use stormgate_shared::control_actions::ControlRejection;
use stormgate_shared::controls::ControlError;
use stormgate_shared::governor::{GovernorError, LedgerError};
use stormgate_shared::signals::SignalError;
use stormgate_shared::signals::collect::StatusError;
use stormgate_shared::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request or invocation payload could not be decoded; the message says why.
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    /// A dependency (Redis, Azure OpenAI) cannot be reached now: the host may retry.
    #[error("a dependency is unavailable")]
    Unavailable(String),
    /// Anything else: a bug or corrupt data. The detail goes to the log only.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn log(&self) {
        match self {
            ApiError::BadRequest(message) => tracing::warn!(error = %message, "rejected request"),
            ApiError::NotFound(message) => tracing::info!(error = %message, "not found"),
            ApiError::Unavailable(detail) => {
                tracing::error!(error = %detail, "dependency unavailable")
            }
            ApiError::Internal(detail) => tracing::error!(error = %detail, "internal error"),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(detail) => ApiError::Unavailable(detail),
            StoreError::Corrupt(detail) => {
                ApiError::Internal(format!("corrupt store data: {detail}"))
            }
        }
    }
}

impl From<serde_json::Error> for ApiError {
    /// Only for encoding our own answers: failing to do so is a bug, not bad input.
    fn from(e: serde_json::Error) -> Self {
        ApiError::Internal(format!("could not encode the answer: {e}"))
    }
}

impl From<SignalError> for ApiError {
    fn from(e: SignalError) -> Self {
        match e {
            SignalError::Unavailable(detail) => ApiError::Unavailable(detail),
            SignalError::Corrupt(detail) => {
                ApiError::Internal(format!("corrupt signals: {detail}"))
            }
        }
    }
}

impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::Unavailable(detail) => ApiError::Unavailable(detail),
            ControlError::Corrupt(detail) => {
                ApiError::Internal(format!("corrupt controls: {detail}"))
            }
        }
    }
}

impl From<StatusError> for ApiError {
    fn from(e: StatusError) -> Self {
        match e {
            StatusError::Store(e) => e.into(),
            StatusError::Signals(e) => e.into(),
            StatusError::Governor(GovernorError::Ledger(LedgerError::Unavailable(detail))) => {
                ApiError::Unavailable(detail)
            }
            StatusError::Governor(e) => ApiError::Internal(e.to_string()),
        }
    }
}

impl From<ControlRejection> for ApiError {
    fn from(e: ControlRejection) -> Self {
        match e {
            ControlRejection::Invalid(message) => ApiError::BadRequest(message),
            ControlRejection::NotFound(message) => ApiError::NotFound(message),
            ControlRejection::Unavailable(detail) => ApiError::Unavailable(detail),
            ControlRejection::Internal(detail) => ApiError::Internal(detail),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.log();
        (self.status(), Json(json!({ "error": self.to_string() }))).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn body_of(error: ApiError) -> (StatusCode, serde_json::Value) {
        let response = error.into_response();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn internal_details_are_never_answered() {
        let (status, body) = body_of(ApiError::Internal(
            "redis://:hunter2@cache:6380 said no".into(),
        ))
        .await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body, json!({"error": "internal error"}));
        let (status, body) = body_of(StoreError::Unavailable("hunter2".into()).into()).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!body.to_string().contains("hunter2"));
    }
}
