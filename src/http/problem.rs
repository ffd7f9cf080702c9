//! Errors as `application/problem+json` (RFC 9457); the status of every
//! error is chosen in exactly one `match` ([`ApiError::status`]).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::engine::Error as EngineError;
use crate::identity::Denied;
use crate::storage::StoreError;

/// Everything a handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// From the engine or the store.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Malformed request (query, header, path).
    #[error("{0}")]
    BadRequest(String),
    /// Unknown dataset or route.
    #[error("{0}")]
    NotFound(String),
    /// `Accept` names no format the endpoint serves.
    #[error("{0}")]
    NotAcceptable(String),
    /// The decoded response would exceed the limit.
    #[error("the response would be {requested} bytes, more than max_response_bytes = {limit} bytes; select a smaller region")]
    TooLarge {
        /// Requested size in bytes.
        requested: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// `Range` outside the object.
    #[error("range not satisfiable: the object has {size} bytes")]
    RangeNotSatisfiable {
        /// Object size.
        size: u64,
    },
    /// The request needs credentials and sent none.
    #[error("this request needs credentials: 'Authorization: Bearer <token or key>' or 'X-API-Key: <key>'")]
    Unauthorized,
    /// The bearer token is wrong, or its holder lacks the grant.
    #[error("the credentials sent do not grant this request")]
    Forbidden,
    /// A bearer token that failed verification, and why.
    #[error("the bearer token is not valid: {0}")]
    InvalidToken(&'static str),
    /// A bearer token whose issuer's keys cannot be fetched.
    #[error("the token's issuer cannot be reached to check it; try again shortly")]
    IssuerUnavailable,
    /// The caller made more requests than its rate limit allows.
    #[error("too many requests: the rate limit allows the next one in {0} s")]
    RateLimited(u64),
    /// The method is not served on this path.
    #[error("method not allowed on this path")]
    MethodNotAllowed,
    /// A write to a dataset that takes none (`Allow` names what it takes).
    #[error("dataset '{0}' is not writable (its config does not say writable = true); nothing was written")]
    ReadOnly(String, &'static str),
    /// A method this resource never takes, said why (`Allow` names what it takes).
    #[error("{0}")]
    NotAllowed(String, &'static str),
    /// Too much work in flight.
    #[error("the server is busy: {0}")]
    Overloaded(String),
    /// The request took longer than the request timeout.
    #[error("the request did not complete within {0} s")]
    Timeout(f64),
    /// The request target (path and query) is longer than the limit.
    #[error("the request target is {0} bytes, more than the limit of {1} bytes")]
    UriTooLong(usize, usize),
    /// The request headers are larger than the limit.
    #[error("the request headers are {0} bytes, more than the limit of {1} bytes")]
    HeadersTooLarge(usize, usize),
    /// A bug: a handler panicked.
    #[error("internal error")]
    Internal,
    /// A request refused before its handler ran, with that status.
    #[error("{}", if .1.is_empty() { "the request could not be read" } else { .1.as_str() })]
    Rejected(StatusCode, String),
}

impl From<Denied> for ApiError {
    fn from(denied: Denied) -> Self {
        match denied {
            Denied::NoCredentials => ApiError::Unauthorized,
            Denied::InvalidToken(why) => ApiError::InvalidToken(why),
            Denied::Forbidden => ApiError::Forbidden,
            Denied::IssuerUnavailable => ApiError::IssuerUnavailable,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Engine(EngineError::Store(e))
    }
}

impl ApiError {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        use EngineError as E;
        match self {
            ApiError::Engine(E::NotFound(_)) | ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Engine(E::InvalidRequest(_)) | ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Engine(E::Store(StoreError::InvalidKey(_) | StoreError::BadVersion(_))) => {
                StatusCode::BAD_REQUEST
            }
            ApiError::Engine(E::Store(StoreError::UnknownVersion(_))) => StatusCode::NOT_FOUND,
            ApiError::Engine(E::Store(StoreError::Gone(_))) => StatusCode::GONE,
            ApiError::Engine(E::Store(StoreError::Forbidden(_))) => StatusCode::FORBIDDEN,
            ApiError::Engine(E::Unsupported(_)) => StatusCode::NOT_IMPLEMENTED,
            ApiError::Engine(E::Conflict(_) | E::Store(StoreError::Conflict(_))) => StatusCode::CONFLICT,
            ApiError::Engine(E::PreconditionFailed(_)) => StatusCode::PRECONDITION_FAILED,
            ApiError::Engine(E::Corrupt { .. }) => StatusCode::BAD_GATEWAY,
            ApiError::Engine(E::Store(StoreError::Timeout(_))) | ApiError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Engine(E::Store(StoreError::RangeNotSatisfiable(_))) | ApiError::RangeNotSatisfiable { .. } => {
                StatusCode::RANGE_NOT_SATISFIABLE
            }
            ApiError::Engine(E::Store(_) | E::Overloaded(_)) | ApiError::Overloaded(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unauthorized | ApiError::InvalidToken(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden => StatusCode::FORBIDDEN,
            ApiError::IssuerUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::MethodNotAllowed | ApiError::ReadOnly(..) | ApiError::NotAllowed(..) => {
                StatusCode::METHOD_NOT_ALLOWED
            }
            ApiError::UriTooLong(..) => StatusCode::URI_TOO_LONG,
            ApiError::HeadersTooLarge(..) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ApiError::Engine(E::Internal(_)) | ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Rejected(status, _) => *status,
        }
    }

    fn kind(&self) -> &'static str {
        match self.status() {
            StatusCode::BAD_REQUEST => "invalid-request",
            StatusCode::UNAUTHORIZED => "unauthorized",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::NOT_FOUND => "not-found",
            StatusCode::METHOD_NOT_ALLOWED => "method-not-allowed",
            StatusCode::NOT_ACCEPTABLE => "not-acceptable",
            StatusCode::PAYLOAD_TOO_LARGE => "response-too-large",
            StatusCode::RANGE_NOT_SATISFIABLE => "range-not-satisfiable",
            StatusCode::URI_TOO_LONG => "uri-too-long",
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "headers-too-large",
            StatusCode::NOT_IMPLEMENTED => "unsupported",
            StatusCode::CONFLICT => "conflict",
            StatusCode::PRECONDITION_FAILED => "precondition-failed",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported-media-type",
            StatusCode::TOO_MANY_REQUESTS => "rate-limited",
            StatusCode::BAD_GATEWAY => "corrupt-data",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            StatusCode::GATEWAY_TIMEOUT => "timeout",
            _ => "internal",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = json!({
            "type": format!("https://zarr-serve.dev/problems/{}", self.kind()),
            "title": status.canonical_reason().unwrap_or("Error"),
            "status": status.as_u16(),
            "detail": self.to_string(),
        });
        let mut response = (status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        match &self {
            ApiError::Engine(EngineError::Store(_) | EngineError::Overloaded(_)) | ApiError::Overloaded(_)
                if status == StatusCode::SERVICE_UNAVAILABLE =>
            {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            ApiError::RangeNotSatisfiable { size }
            | ApiError::Engine(EngineError::Store(StoreError::RangeNotSatisfiable(size))) => {
                if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    headers.insert(header::CONTENT_RANGE, v);
                }
            }
            ApiError::Unauthorized => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::InvalidToken(why) => {
                let challenge = format!("Bearer error=\"invalid_token\", error_description=\"{why}\"");
                if let Ok(v) = HeaderValue::from_str(&challenge) {
                    headers.insert(header::WWW_AUTHENTICATE, v);
                }
            }
            ApiError::IssuerUnavailable => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            }
            ApiError::RateLimited(secs) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(*secs));
            }
            ApiError::ReadOnly(_, allow) | ApiError::NotAllowed(_, allow) => {
                headers.insert(header::ALLOW, HeaderValue::from_static(allow));
            }
            _ => {}
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each engine error variant has its own status, chosen by variant.
    #[test]
    fn engine_errors_map_by_variant() {
        let cases = [
            (EngineError::NotFound("x".into()), 404),
            (EngineError::InvalidRequest("x".into()), 400),
            (EngineError::Unsupported("x".into()), 501),
            (EngineError::corrupt("k", "x"), 502),
            (EngineError::Store(StoreError::Unavailable("x".into())), 503),
            (EngineError::Store(StoreError::Changed("k".into())), 503),
            (
                EngineError::Store(StoreError::Timeout(std::time::Duration::from_secs(1))),
                504,
            ),
            (EngineError::Store(StoreError::InvalidKey("x".into())), 400),
            (EngineError::Overloaded("x".into()), 503),
            (EngineError::Internal("a decoder panicked: x".into()), 500),
        ];
        for (error, status) in cases {
            let response = ApiError::from(error.clone()).into_response();
            assert_eq!(response.status().as_u16(), status, "{error:?}");
        }
    }
}
