//! Every error the front door itself produces (as opposed to a method's own errors, which live in
//! `simnode_api::RpcError`), with its HTTP status and JSON-RPC code fixed in one place.
//!
//! | HTTP | JSON-RPC code | message                                        | when                                                         |
//! |------|---------------|------------------------------------------------|--------------------------------------------------------------|
//! | 404  | -32600        | `not found: ...`                               | any path other than `POST /v3/<key>` / `GET /ws/v3/<key>` (upgrade) |
//! | 405  | -32600        | `method not allowed: ...`                      | `/v3/<key>` other than POST, `/health` other than GET or HEAD, `/ws/v3/<key>` other than GET; `Allow` names the right ones |
//! | 401  | -32001        | `project id required in the URL`               | `/v3/` or `/ws/v3/` without a key                            |
//! | 401  | -32001        | `invalid project id`                           | unknown key                                                  |
//! | 401  | -32001        | `project id revoked`                           | key revoked with `simnode keys revoke` (open WS connections: in-band, per message) |
//! | 403  | -32002        | `origin not allowed: ...`                      | a CORS preflight or WebSocket upgrade from an origin `--http.corsdomain` / `--ws.origins` do not list; a key with an origin list used from another origin or without one |
//! | 415  | -32600        | `unsupported content type: ...`                | HTTP POST without `Content-Type: application/json`           |
//! | 400  | -32600        | `bad request: name the host once, ...`         | an HTTP/1.1 request without a `Host` header, or any request with two (RFC 9112 §3.2) |
//! | 400  | -32600        | `bad WebSocket handshake: ...`                 | an upgrade whose `Sec-WebSocket-Key` is missing or not the base64 of 16 bytes |
//! | 426  | -32600        | `unsupported WebSocket version: ...`           | an upgrade without `Sec-WebSocket-Version: 13` (answered with that header) |
//! | 400  | -32600        | `malformed request body: ...`                  | a body that broke off or was framed wrong (a bad chunk, fewer bytes than `Content-Length`); the connection is closed |
//! | 413  | -32007        | `request body too large: ...`                  | body over `--rpc.max-request-size` (WS: same limit, per message, answered in-band) |
//! | 429  | -32005        | `project ID request rate exceeded`             | over the key's requests/s; `data: {allowed_rps, backoff_seconds}` (WS: in-band, no status) |
//! | 429  | -32005        | `daily request count exceeded, request rate limited` | over the key's daily quota; `data: {allowed_per_day, backoff_seconds}` |
//! | 503  | -32005        | `too many websocket connections`               | more than `--ws.max-connections` open sockets                |
//! | 503  | -32005        | `too many connections`                         | more than `--rpc.max-connections` HTTP requests being served and sockets open together; `Retry-After: 1` |
//! | 503  | -32603        | `key service unavailable`                      | `--keys-backend redis` and Redis does not answer (fail closed; `--redis.fail-open` serves cached keys with a per-replica limit instead). WS: in-band |
//! | 200  | -32601        | `the method X is not available on NETWORK`     | method switched off by the per-network policy                |
//! | 200  | -32002        | `the method X is not allowed for this key`     | outside the key's method list (`simnode keys methods`)       |
//! | 200  | -32601        | `Method not found`                             | unknown method (jsonrpsee)                                   |
//! | 200  | -32700        | `Parse error`                                  | body is not JSON (jsonrpsee)                                 |
//! | 200  | -32600        | `Invalid request`                              | JSON but not a JSON-RPC request, or an empty batch (jsonrpsee) |
//! | 200  | -32602        | `invalid argument N (field): reason`           | a parameter does not decode (named by `param_errors`; methods' own checks name it themselves) |
//! | 200  | -32600        | `subscriptions cannot be batched: ...` | `eth_subscribe` inside a WebSocket batch (jsonrpsee answers a subscription on the socket at once, so in a batch it would be answered twice) |
//! | 200  | -32600        | `batch too large`                              | batch over `--rpc.max-batch-size` (geth's: an array of this one error, the first call's id) |
//! | 200  | -32008        | `The response was too large`                   | answer over `--rpc.max-response-size`                        |

use std::time::Duration;

use http::StatusCode;
use jsonrpsee::{server::HttpResponse, types::ErrorObjectOwned};
use serde_json::json;

/// JSON-RPC code of authentication failures (the hosted service uses -32001 too).
pub const UNAUTHORIZED_CODE: i32 = -32001;
/// EIP-1474 "limit exceeded".
pub const LIMIT_EXCEEDED_CODE: i32 = -32005;
/// jsonrpsee's code for an oversized request, reused so that HTTP and WS agree.
pub const OVERSIZED_REQUEST_CODE: i32 = jsonrpsee::types::error::OVERSIZED_REQUEST_CODE;
pub const INVALID_REQUEST_CODE: i32 = jsonrpsee::types::error::INVALID_REQUEST_CODE;
pub const METHOD_NOT_FOUND_CODE: i32 = jsonrpsee::types::error::METHOD_NOT_FOUND_CODE;
/// A browser origin the operator's lists leave out (the code hosted providers answer
/// allowlist refusals with).
pub const NOT_ALLOWED_CODE: i32 = -32002;
/// The key service (Redis) cannot be reached: the request was not served, retrying may work.
pub const INTERNAL_ERROR_CODE: i32 = jsonrpsee::types::error::INTERNAL_ERROR_CODE;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrontDoorError {
    #[error("not found: {0}")]
    NotFound(&'static str),
    /// A path the node serves, asked with a method it does not take there (`allow`: those it
    /// takes, for the `Allow` header).
    #[error("method not allowed: {hint}")]
    MethodNotAllowed {
        hint: &'static str,
        allow: &'static str,
    },
    #[error("project id required in the URL")]
    MissingKey,
    #[error("invalid project id")]
    InvalidKey,
    #[error("project id revoked")]
    RevokedKey,
    #[error("unsupported content type: use Content-Type: application/json")]
    UnsupportedContentType,
    #[error("request body too large: the limit is {limit} bytes")]
    BodyTooLarge { limit: u32 },
    /// The body did not arrive within the read timeout after the headers.
    #[error("request body not received within {} s", after.as_secs())]
    BodyTimeout { after: Duration },
    /// An HTTP/1.1 request without a Host header, or any with two (RFC 9112 §3.2).
    #[error("bad request: name the host once, in one Host header")]
    BadHost,
    /// A WebSocket upgrade without a version this server speaks (13, RFC 6455).
    #[error("unsupported WebSocket version: use Sec-WebSocket-Version: 13")]
    WsVersion,
    /// A WebSocket upgrade whose handshake headers are wrong.
    #[error("bad WebSocket handshake: {0}")]
    BadWsHandshake(&'static str),
    /// The body broke off or was framed wrong (a bad chunk, fewer bytes than declared).
    #[error("malformed request body: {0}")]
    MalformedBody(String),
    #[error("project ID request rate exceeded")]
    RateLimited { allowed_rps: f64, backoff: Duration },
    #[error("daily request count exceeded, request rate limited")]
    QuotaExceeded {
        allowed_per_day: u64,
        backoff: Duration,
    },
    #[error("too many websocket connections")]
    TooManyWsConnections { max: usize },
    /// One key's share of `--ws.max-connections`.
    #[error("too many websocket connections for this key: at most {max} at once")]
    TooManyWsConnectionsForKey { max: usize },
    /// `--rpc.max-connections`: HTTP requests being served and WebSocket connections open.
    #[error("too many connections")]
    TooManyConnections { max: usize },
    /// One key's share of `--rpc.max-connections`.
    #[error("too many connections for this key: at most {max} at once")]
    TooManyConnectionsForKey { max: usize },
    #[error("the method {method} is not available on {network}")]
    MethodNotAvailable { method: String, network: String },
    /// A subscription method over HTTP, which cannot carry its notifications (geth's answer).
    #[error("notifications not supported")]
    NotificationsUnsupported,
    /// A subscription inside a WebSocket batch: its answer would go to the socket on its own
    /// and again inside the batch's array.
    #[error("subscriptions cannot be batched: send {0} as a request of its own")]
    SubscriptionInBatch(String),
    #[error("key service unavailable")]
    KeyBackendUnavailable,
    #[error("origin not allowed: {0}")]
    OriginNotAllowed(String),
    #[error("the method {0} is not allowed for this key")]
    MethodNotAllowedForKey(String),
}

impl FrontDoorError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::MissingKey | Self::InvalidKey | Self::RevokedKey => StatusCode::UNAUTHORIZED,
            Self::OriginNotAllowed(_) => StatusCode::FORBIDDEN,
            Self::UnsupportedContentType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            Self::MalformedBody(_) | Self::BadWsHandshake(_) | Self::BadHost => {
                StatusCode::BAD_REQUEST
            }
            Self::WsVersion => StatusCode::UPGRADE_REQUIRED,
            Self::RateLimited { .. }
            | Self::QuotaExceeded { .. }
            | Self::TooManyConnectionsForKey { .. }
            | Self::TooManyWsConnectionsForKey { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::TooManyWsConnections { .. }
            | Self::TooManyConnections { .. }
            | Self::KeyBackendUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            // Method-level errors travel inside a normal JSON-RPC answer.
            Self::MethodNotAvailable { .. }
            | Self::NotificationsUnsupported
            | Self::SubscriptionInBatch(_)
            | Self::MethodNotAllowedForKey(_) => StatusCode::OK,
        }
    }

    pub fn code(&self) -> i32 {
        match self {
            Self::NotFound(_)
            | Self::MethodNotAllowed { .. }
            | Self::UnsupportedContentType
            | Self::BodyTimeout { .. }
            | Self::MalformedBody(_)
            | Self::BadHost
            | Self::WsVersion
            | Self::BadWsHandshake(_)
            | Self::SubscriptionInBatch(_) => INVALID_REQUEST_CODE,
            Self::MissingKey | Self::InvalidKey | Self::RevokedKey => UNAUTHORIZED_CODE,
            Self::BodyTooLarge { .. } => OVERSIZED_REQUEST_CODE,
            Self::RateLimited { .. }
            | Self::QuotaExceeded { .. }
            | Self::TooManyWsConnections { .. }
            | Self::TooManyConnections { .. }
            | Self::TooManyConnectionsForKey { .. }
            | Self::TooManyWsConnectionsForKey { .. } => LIMIT_EXCEEDED_CODE,
            Self::MethodNotAvailable { .. } | Self::NotificationsUnsupported => {
                METHOD_NOT_FOUND_CODE
            }
            Self::KeyBackendUnavailable => INTERNAL_ERROR_CODE,
            Self::OriginNotAllowed(_) | Self::MethodNotAllowedForKey(_) => NOT_ALLOWED_CODE,
        }
    }

    /// Seconds a client should wait before retrying, for limit errors.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { backoff, .. } | Self::QuotaExceeded { backoff, .. } => {
                Some(*backoff)
            }
            Self::KeyBackendUnavailable
            | Self::TooManyConnections { .. }
            | Self::TooManyWsConnections { .. }
            | Self::TooManyConnectionsForKey { .. }
            | Self::TooManyWsConnectionsForKey { .. } => Some(Duration::from_secs(1)),
            _ => None,
        }
    }

    fn data(&self) -> Option<serde_json::Value> {
        match self {
            Self::RateLimited {
                allowed_rps,
                backoff,
            } => Some(json!({ "allowed_rps": allowed_rps, "backoff_seconds": round_ms(*backoff) })),
            Self::QuotaExceeded {
                allowed_per_day,
                backoff,
            } => Some(
                json!({ "allowed_per_day": allowed_per_day, "backoff_seconds": round_ms(*backoff) }),
            ),
            Self::TooManyWsConnections { max } | Self::TooManyConnections { max } => {
                Some(json!({ "max_connections": max }))
            }
            _ => None,
        }
    }

    pub fn to_error_object(&self) -> ErrorObjectOwned {
        ErrorObjectOwned::owned(self.code(), self.to_string(), self.data())
    }

    /// A complete HTTP response: the status above and a JSON-RPC error body with a null id
    /// (the request was not parsed, so there is no id to echo).
    pub fn to_http_response(&self) -> HttpResponse {
        let body =
            json!({ "jsonrpc": "2.0", "id": null, "error": self.to_error_object() }).to_string();
        let mut builder = http::Response::builder().status(self.status()).header(
            http::header::CONTENT_TYPE,
            "application/json; charset=utf-8",
        );
        if let Some(after) = self.retry_after() {
            builder = builder.header(http::header::RETRY_AFTER, retry_after_header(after));
        }
        if let Self::MethodNotAllowed { allow, .. } = self {
            builder = builder.header(http::header::ALLOW, *allow);
        }
        if let Self::WsVersion = self {
            builder = builder.header(http::header::SEC_WEBSOCKET_VERSION, "13");
        }
        // The connection cannot carry another request after a body that never arrived whole.
        if matches!(self, Self::BodyTimeout { .. } | Self::MalformedBody(_)) {
            builder = builder.header(http::header::CONNECTION, "close");
        }
        match builder.body(jsonrpsee::server::HttpBody::from(body)) {
            Ok(response) => response,
            // Status and headers above are all valid constants; keep a plain fallback anyway
            // rather than panicking inside the server.
            Err(_) => http::Response::new(jsonrpsee::server::HttpBody::from("internal error")),
        }
    }
}

/// `Retry-After` takes whole seconds; round up so a client that obeys it is never early.
pub fn retry_after_header(after: Duration) -> String {
    let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    secs.max(1).to_string()
}

fn round_ms(d: Duration) -> f64 {
    // Round up to the millisecond: a client waiting exactly this long finds a token.
    let ms = d.as_micros().div_ceil(1000) as f64;
    ms / 1000.0
}
