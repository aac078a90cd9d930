//! The HTTP side of the front door, a tower layer in front of jsonrpsee: routes by path,
//! authenticates the key, checks what can be checked before the body is read, reads an HTTP
//! body (up to the size limit) and puts right the request ids jsonrpsee cannot carry
//! ([`super::ids`]), and turns a rate-limited answer into HTTP 429.
//!
//! jsonrpsee serves every path alike, so this layer is what makes `/v3/<key>` and `/ws/v3/<key>`
//! the only doors (beside `/health`, answered here without a key). It also answers browsers'
//! CORS preflights and adds the CORS headers ([`super::cors`]) and gzips answers for clients
//! that take it ([`super::compression`]).
//!
//! The key reaches methods as [`ApiKeyId`](simnode_api::ApiKeyId) in the request extensions;
//! the [`AuthedKey`] beside it carries the key's limiter and access lists to the RPC
//! middleware, which does the per-call accounting for HTTP and WebSocket alike (only it can see
//! batch items and WS messages).

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use bytes::Bytes;
use http::{header, Method, Request};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use jsonrpsee::{
    core::BoxError,
    server::{HttpBody, HttpResponse},
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{
    backend::KeyBackend,
    compression, cors,
    error::{retry_after_header, FrontDoorError},
    health, ids,
    keys::KeyEntry,
    metrics, raw_result, workers,
};
use simnode_api::{
    access::CallerAccess,
    raw_answer::RawAnswerSlot,
    shares::{Share, Shares},
    ApiKeyId,
};

/// The authenticated key of a request (HTTP request or WS connection).
#[derive(Debug, Clone)]
pub struct AuthedKey(pub Arc<KeyEntry>);

/// How a request arrived; the RPC middleware labels metrics with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Http,
    Ws,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Ws => "ws",
        }
    }
}

/// Put on a method response by the RPC middleware when the request was refused for its key's
/// rate or quota (or the key was revoked meanwhile); this layer then answers with the error's
/// status (429 with `Retry-After` for limits).
#[derive(Debug, Clone)]
pub struct LimitedMarker(pub FrontDoorError);

/// Put on the answer to a notification (or a batch of only notifications) by the RPC middleware:
/// JSON-RPC says there is no answer, but jsonrpsee writes `null`; this layer sends an empty body.
#[derive(Debug, Clone, Copy)]
pub struct NoAnswer;

/// A node-wide limit (`--rpc.max-connections`, `--ws.max-connections`) and how much of it each
/// key holds: one key takes at most three quarters, so that one customer holding connections
/// open cannot shut out the others.
#[derive(Debug)]
struct KeyShares {
    slots: Arc<Semaphore>,
    max: usize,
    per_key: usize,
    held: Shares<ApiKeyId>,
}

/// Which limit refused a slot: the node's, or the key's share of it.
enum Refused {
    Node { max: usize },
    Key { max: usize },
}

impl KeyShares {
    fn new(max: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max,
            per_key: (max * 3 / 4).max(1),
            held: Shares::default(),
        }
    }

    /// A slot for `key`, given back when dropped.
    fn take(&self, key: &ApiKeyId) -> Result<ConnectionSlot, Refused> {
        let share = self
            .held
            .take(key, 1, self.per_key)
            .map_err(|_| Refused::Key { max: self.per_key })?;
        let permit = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refused::Node { max: self.max })?;
        Ok(ConnectionSlot {
            _permit: permit,
            _share: share,
        })
    }
}

/// A slot of a [`KeyShares`] limit: the node-wide permit and one of its key's share.
#[derive(Debug)]
struct ConnectionSlot {
    _permit: OwnedSemaphorePermit,
    _share: Share<ApiKeyId>,
}

/// Held in the extensions of a WebSocket connection for as long as jsonrpsee keeps the
/// connection's extensions, which is the connection's lifetime: dropping it frees the slot.
#[derive(Debug)]
struct WsSlot {
    /// Its share of `--ws.max-connections`.
    _permit: ConnectionSlot,
    /// Its share of `--rpc.max-connections`.
    _connection: ConnectionSlot,
    /// The socket stays on this RPC thread after the upgrade: it still counts there.
    _worker: Option<workers::ConnectionSlot>,
}

impl WsSlot {
    fn new(permit: ConnectionSlot, connection: ConnectionSlot) -> Self {
        ::metrics::gauge!(metrics::WS_CONNECTIONS).increment(1.0);
        Self {
            _permit: permit,
            _connection: connection,
            _worker: workers::hold_connection(),
        }
    }
}

impl Drop for WsSlot {
    fn drop(&mut self) {
        ::metrics::gauge!(metrics::WS_CONNECTIONS).decrement(1.0);
    }
}

#[derive(Debug)]
pub struct FrontDoorConfig {
    pub keys: KeyBackend,
    /// What `/health` reports on; without it the path is not served.
    pub health: Option<health::HealthSource>,
    /// Browser origins: CORS answers over HTTP, allowed WebSocket upgrades.
    pub cors: cors::Origins,
    pub ws_origins: cors::Origins,
    /// gzip answers for clients that accept it.
    pub compression: bool,
    pub max_request_body_size: u32,
    /// The largest answer (`--rpc.max-response-size`), for results methods leave as text.
    pub max_response_body_size: usize,
    pub max_ws_connections: usize,
    /// Most HTTP requests being served and WebSocket connections open, together.
    pub max_connections: usize,
    /// How long a request's body may take to arrive once its headers have (`--http.read-timeout`):
    /// a client that declares a body and sends it no further would otherwise hold a connection
    /// slot for as long as it keeps the socket open.
    pub body_read_timeout: std::time::Duration,
}

#[derive(Debug, Clone)]
pub struct FrontDoorLayer {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    keys: KeyBackend,
    health: Option<health::HealthSource>,
    cors: cors::Origins,
    ws_origins: cors::Origins,
    compression: bool,
    max_request_body_size: u32,
    max_response_body_size: usize,
    /// `--ws.max-connections`.
    ws_connections: KeyShares,
    /// `--rpc.max-connections`.
    connections: KeyShares,
    body_read_timeout: std::time::Duration,
}

impl Shared {
    /// A slot of `--rpc.max-connections` for a request of `key`.
    fn take_connection(&self, key: &ApiKeyId) -> Result<ConnectionSlot, FrontDoorError> {
        self.connections.take(key).map_err(|refused| match refused {
            Refused::Node { max } => FrontDoorError::TooManyConnections { max },
            Refused::Key { max } => FrontDoorError::TooManyConnectionsForKey { max },
        })
    }

    /// A slot of `--ws.max-connections` for a WebSocket of `key`.
    fn take_ws_connection(&self, key: &ApiKeyId) -> Result<ConnectionSlot, FrontDoorError> {
        self.ws_connections
            .take(key)
            .map_err(|refused| match refused {
                Refused::Node { max } => FrontDoorError::TooManyWsConnections { max },
                Refused::Key { max } => FrontDoorError::TooManyWsConnectionsForKey { max },
            })
    }
}

impl FrontDoorLayer {
    pub fn new(config: FrontDoorConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                keys: config.keys,
                health: config.health,
                cors: config.cors,
                ws_origins: config.ws_origins,
                compression: config.compression,
                max_request_body_size: config.max_request_body_size,
                max_response_body_size: config.max_response_body_size,
                ws_connections: KeyShares::new(config.max_ws_connections),
                connections: KeyShares::new(config.max_connections),
                body_read_timeout: config.body_read_timeout,
            }),
        }
    }
}

impl<S> tower::Layer<S> for FrontDoorLayer {
    type Service = FrontDoor<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FrontDoor {
            inner,
            shared: self.shared.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct FrontDoor<S> {
    inner: S,
    shared: Arc<Shared>,
}

/// Where a request is going, decided from method, path and upgrade headers only.
#[derive(Debug, PartialEq, Eq)]
enum Route<'a> {
    Rpc {
        key: &'a str,
        transport: Transport,
    },
    /// `GET` or `HEAD /health` (see [`super::health`]).
    Health,
    MissingKey,
    NotFound(&'static str),
    /// A served path asked with a method it does not take (see [`FrontDoorError::MethodNotAllowed`]).
    WrongMethod {
        hint: &'static str,
        allow: &'static str,
    },
}

fn route<'a>(method: &Method, path: &'a str, upgrade: bool) -> Route<'a> {
    if path == "/health" {
        return match (method == Method::GET || method == Method::HEAD, upgrade) {
            (true, false) => Route::Health,
            (false, false) => Route::WrongMethod {
                hint: "/health takes GET or HEAD requests",
                allow: "GET, HEAD",
            },
            (_, true) => Route::NotFound("/health takes GET or HEAD requests"),
        };
    }
    let (rest, transport) = if let Some(rest) = path.strip_prefix("/ws/v3") {
        (rest, Transport::Ws)
    } else if let Some(rest) = path.strip_prefix("/v3") {
        (rest, Transport::Http)
    } else {
        return Route::NotFound("use POST /v3/<key> or a WebSocket at /ws/v3/<key>");
    };
    match transport {
        Transport::Http if upgrade => {
            return Route::NotFound(
                "/v3/<key> takes POST requests; WebSockets connect to /ws/v3/<key>",
            )
        }
        Transport::Http if method != Method::POST => {
            return Route::WrongMethod {
                hint: "/v3/<key> takes POST requests; WebSockets connect to /ws/v3/<key>",
                allow: "POST",
            }
        }
        Transport::Ws if method != Method::GET => {
            return Route::WrongMethod {
                hint:
                    "/ws/v3/<key> takes WebSocket upgrade requests; HTTP clients POST to /v3/<key>",
                allow: "GET",
            }
        }
        Transport::Ws if !upgrade => {
            return Route::NotFound(
                "/ws/v3/<key> takes WebSocket upgrade requests; HTTP clients POST to /v3/<key>",
            )
        }
        _ => {}
    }
    let key = match rest {
        "" | "/" => return Route::MissingKey,
        _ => match rest.strip_prefix('/') {
            Some(key) => key,
            None => return Route::NotFound("use POST /v3/<key> or a WebSocket at /ws/v3/<key>"),
        },
    };
    if key.contains('/') {
        return Route::NotFound("use POST /v3/<key> or a WebSocket at /ws/v3/<key>");
    }
    Route::Rpc { key, transport }
}

fn is_upgrade<B>(req: &Request<B>) -> bool {
    let has_token = |name: header::HeaderName, token: &str| {
        req.headers().get_all(name).iter().any(|value| {
            value.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|part| part.trim().eq_ignore_ascii_case(token))
            })
        })
    };
    has_token(header::CONNECTION, "upgrade") && has_token(header::UPGRADE, "websocket")
}

/// Why a WebSocket upgrade cannot be accepted (RFC 6455 §4.2.1), if it cannot: jsonrpsee
/// answers these 200 with a line of text.
fn bad_handshake<B>(req: &Request<B>) -> Option<FrontDoorError> {
    let version = req.headers().get(header::SEC_WEBSOCKET_VERSION);
    if version.is_none_or(|v| v.as_bytes() != b"13") {
        return Some(FrontDoorError::WsVersion);
    }
    use base64::{engine::general_purpose::STANDARD, Engine as _};
    let key = req.headers().get(header::SEC_WEBSOCKET_KEY);
    let nonce = key.and_then(|k| STANDARD.decode(k.as_bytes()).ok());
    if nonce.is_none_or(|n| n.len() != 16) {
        return Some(FrontDoorError::BadWsHandshake(
            "Sec-WebSocket-Key must be the base64 of 16 bytes",
        ));
    }
    None
}

/// Whether the request says its body is JSON: geth's media types (`application/json`,
/// `application/json-rpc`, `application/jsonrequest`), any case, with any parameters (a charset,
/// quoted or not). Checked here so that a wrong one gets a JSON body; jsonrpsee, which accepts
/// fewer spellings, is then handed plain `application/json`.
fn is_json<B>(req: &Request<B>) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let mime = v.split(';').next().unwrap_or("").trim();
            [
                "application/json",
                "application/json-rpc",
                "application/jsonrequest",
            ]
            .iter()
            .any(|accepted| mime.eq_ignore_ascii_case(accepted))
        })
}

fn content_length<B>(req: &Request<B>) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<HttpResponse, BoxError>> + Send>>;

fn reject(err: FrontDoorError) -> BoxFuture {
    tracing::debug!(target: "simnode::rpc", status = err.status().as_u16(), %err, "request refused at the front door");
    metrics::http_response(err.status().as_u16());
    let response = err.to_http_response();
    Box::pin(async move { Ok(response) })
}

/// Why a request body could not be read.
enum BodyError {
    TooLarge,
    Stream(BoxError),
}

/// The whole body, at most `limit` bytes of it.
async fn read_body<B>(body: B, limit: u32) -> Result<Bytes, BodyError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    match Limited::new(body, limit as usize).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.is::<LengthLimitError>() => Err(BodyError::TooLarge),
        Err(err) => Err(BodyError::Stream(err)),
    }
}

/// Whether a body holds a batch (a JSON array) rather than a single request.
fn is_batch(body: &[u8]) -> bool {
    body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// Sends `body` on with the request's head and, for a rewritten body, puts the client's ids
/// back into the answer; with a `slot` (single requests), the answer carries the text its
/// method left there (see [`raw_result`]).
async fn dispatch<S>(
    inner: &mut S,
    mut parts: http::request::Parts,
    body: Bytes,
    rewrite: Option<&ids::Rewrite>,
    slot: Option<RawAnswerSlot>,
) -> Result<HttpResponse, BoxError>
where
    S: tower::Service<Request<HttpBody>, Response = HttpResponse, Error = BoxError>,
{
    if let Some(slot) = &slot {
        parts.extensions.insert(slot.clone());
    }
    let mut response = inner
        .call(Request::from_parts(parts, HttpBody::new(Full::new(body))))
        .await?;
    if let Some(slot) = &slot {
        response = raw_result::fill(response, slot).await?;
    }
    let Some(rewrite) = rewrite else {
        return Ok(response);
    };
    let (mut parts, body) = response.into_parts();
    let answer = body.collect().await?.to_bytes();
    let answer = rewrite.restore(&String::from_utf8_lossy(&answer));
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(HttpResponse::from_parts(parts, HttpBody::from(answer)))
}

/// Put on a request sent on a second time whose first dispatch was already counted against its
/// key: the RPC middleware does not count it again.
#[derive(Debug, Clone, Copy)]
pub struct AlreadyCharged;

/// The head of an HTTP request sent on a second time: what jsonrpsee and the RPC middleware
/// read of the first one (`charged`: the first dispatch counted against the key's limits).
fn resend_head(
    uri: http::Uri,
    key: Option<AuthedKey>,
    charged: bool,
) -> Result<http::request::Parts, http::Error> {
    let mut head = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(())?
        .into_parts()
        .0;
    if let Some(key) = key {
        head.extensions.insert(key.0.id.clone());
        head.extensions.insert(key);
    }
    head.extensions.insert(Transport::Http);
    if charged {
        head.extensions.insert(AlreadyCharged);
    }
    Ok(head)
}

/// Sends a read HTTP body on to jsonrpsee, putting right the request ids it would drop (see
/// `ids`): a batch is checked before it goes on, a single request only if it came back
/// unanswered.
async fn serve_body<S>(
    inner: &mut S,
    parts: http::request::Parts,
    body: Bytes,
    max_response_bytes: usize,
) -> Result<HttpResponse, BoxError>
where
    S: tower::Service<Request<HttpBody>, Response = HttpResponse, Error = BoxError>,
{
    if is_batch(&body) {
        let rewrite = ids::fix_batch(&body);
        let sent = rewrite
            .as_ref()
            .map_or_else(|| body.clone(), |r| Bytes::from(r.body.clone()));
        return dispatch(inner, parts, sent, rewrite.as_ref(), None).await;
    }
    // What a second dispatch needs of the head, kept without cloning it (an ordinary request
    // never needs it).
    let (uri, key) = (
        parts.uri.clone(),
        parts.extensions.get::<AuthedKey>().cloned(),
    );
    // A single request's method may leave its result as text (see `raw_result`).
    let slot = || Some(RawAnswerSlot::new(max_response_bytes));
    let response = dispatch(inner, parts, body.clone(), None, slot()).await?;
    if response.extensions().get::<NoAnswer>().is_none() {
        return Ok(response);
    }
    // Refused for its rate the first time: charged (and refused) again; otherwise it was
    // counted once already.
    let charged = response.extensions().get::<LimitedMarker>().is_none();
    let Some(rewrite) = ids::fix_single(&body) else {
        // A notification: run as a call, its answer dropped (jsonrpsee would not run it).
        if let (true, Some(call)) = (charged, ids::notification_as_call(&body)) {
            let head = resend_head(uri, key, true)?;
            std::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
            dispatch(inner, head, Bytes::from(call), None, None).await?;
        }
        return Ok(response);
    };
    let head = resend_head(uri, key, charged)?;
    let sent = Bytes::from(rewrite.body.clone());
    std::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
    dispatch(inner, head, sent, Some(&rewrite), slot()).await
}

impl<S, B> tower::Service<Request<B>> for FrontDoor<S>
where
    S: tower::Service<Request<HttpBody>, Response = HttpResponse, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = HttpResponse;
    type Error = BoxError;
    type Future = BoxFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // RFC 9112 §3.2: an HTTP/1.1 request names its host once; hyper takes it without.
        let hosts = req.headers().get_all(header::HOST).iter().count();
        if hosts > 1 || (hosts == 0 && req.version() == http::Version::HTTP_11) {
            return reject(FrontDoorError::BadHost);
        }
        // Only browsers send an Origin, and only some clients take gzip; the rest (and every
        // load generator) take the direct path.
        let origin = req.headers().get(header::ORIGIN).cloned();
        let upgrade = is_upgrade(&req);
        let gzip = self.shared.compression && !upgrade && compression::accepts_gzip(req.headers());
        if origin.is_none() && !gzip {
            return self.serve(req, upgrade);
        }
        if let Some(origin) = &origin {
            if upgrade {
                if !self.shared.ws_origins.allows(origin) {
                    return reject(FrontDoorError::OriginNotAllowed(origin_text(origin)));
                }
                return self.serve(req, upgrade);
            }
            if req.method() == Method::OPTIONS && is_preflight_path(req.uri().path()) {
                return match cors::preflight(&self.shared.cors, origin, req.headers()) {
                    Some(response) => {
                        metrics::http_response(response.status().as_u16());
                        Box::pin(async move { Ok(response) })
                    }
                    None => reject(FrontDoorError::OriginNotAllowed(origin_text(origin))),
                };
            }
        }
        let shared = self.shared.clone();
        let answer = self.serve(req, upgrade);
        Box::pin(async move {
            let mut response = answer.await?;
            if let Some(origin) = &origin {
                cors::add_headers(&shared.cors, origin, response.headers_mut());
            }
            if gzip {
                response = compression::gzip(response).await?;
            }
            Ok(response)
        })
    }
}

/// An `Origin` header as text for an error message.
fn origin_text(origin: &http::HeaderValue) -> String {
    String::from_utf8_lossy(origin.as_bytes()).into_owned()
}

/// Paths a browser may preflight: the HTTP endpoint and `/health`.
fn is_preflight_path(path: &str) -> bool {
    path == "/health" || path.starts_with("/v3/")
}

impl<S> FrontDoor<S>
where
    S: tower::Service<Request<HttpBody>, Response = HttpResponse, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    /// Routes, authenticates and serves a request (everything but the browser and gzip
    /// additions of [`tower::Service::call`]); `upgrade`: it asks for a WebSocket.
    fn serve<B>(&mut self, mut req: Request<B>, upgrade: bool) -> BoxFuture
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let path = req.uri().path().to_string();
        let (key, transport) = match route(req.method(), &path, upgrade) {
            Route::Rpc { key, transport } => (key, transport),
            Route::Health => {
                let Some(health::HealthSource(chain)) = self.shared.health.clone() else {
                    return reject(FrontDoorError::NotFound(
                        "use POST /v3/<key> or a WebSocket at /ws/v3/<key>",
                    ));
                };
                let method = req.method().clone();
                let query = req.uri().query().map(str::to_owned);
                let keys = self.shared.keys.clone();
                return Box::pin(async move {
                    let key_service = keys.refusing_requests().await;
                    let response = health::answer(
                        chain.as_ref(),
                        key_service.as_deref(),
                        &method,
                        query.as_deref(),
                    );
                    metrics::http_response(response.status().as_u16());
                    Ok(response)
                });
            }
            Route::MissingKey => return reject(FrontDoorError::MissingKey),
            Route::NotFound(hint) => return reject(FrontDoorError::NotFound(hint)),
            Route::WrongMethod { hint, allow } => {
                return reject(FrontDoorError::MethodNotAllowed { hint, allow })
            }
        };
        let key = key.to_string();

        // The inner service was polled ready; swap in a fresh clone for the next call (the tower
        // idiom for services that are cheap to clone).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        Box::pin(async move {
            // The embedded backend answers at once; Redis may need a round trip.
            let entry = match shared.keys.authenticate(&key).await {
                Ok(entry) => entry,
                Err(err) => return reject(err).await,
            };
            let origin = req.headers().get(header::ORIGIN);
            if !entry.access().admits_origin(origin) {
                let named = origin.map_or_else(
                    || "none sent; this key takes requests from its listed origins only".into(),
                    origin_text,
                );
                return reject(FrontDoorError::OriginNotAllowed(named)).await;
            }

            let entry_id = entry.id.clone();
            req.extensions_mut().insert(entry.id.clone());
            // Subscriptions push past the per-request checks: they ask this before each push,
            // so a key revoked while its WebSocket stays open stops receiving.
            let watched = entry.clone();
            req.extensions_mut()
                .insert(CallerAccess::new(move || !watched.is_revoked()));
            req.extensions_mut().insert(AuthedKey(entry));
            req.extensions_mut().insert(transport);

            let connection = match shared.take_connection(&entry_id) {
                Ok(slot) => slot,
                Err(err) => return reject(err).await,
            };
            let mut response = match transport {
                Transport::Http => {
                    let _serving = connection;
                    if !is_json(&req) {
                        return reject(FrontDoorError::UnsupportedContentType).await;
                    }
                    req.headers_mut().insert(
                        header::CONTENT_TYPE,
                        http::HeaderValue::from_static("application/json"),
                    );
                    // Refuse a declared oversize body before reading it.
                    let limit = shared.max_request_body_size;
                    if content_length(&req).is_some_and(|len| len > u64::from(limit)) {
                        return reject(FrontDoorError::BodyTooLarge { limit }).await;
                    }
                    let (parts, body) = req.into_parts();
                    let after = shared.body_read_timeout;
                    let read = tokio::time::timeout(after, read_body(body, limit));
                    let body = match read.await {
                        Ok(Ok(body)) => body,
                        Ok(Err(BodyError::TooLarge)) => {
                            return reject(FrontDoorError::BodyTooLarge { limit }).await
                        }
                        Ok(Err(BodyError::Stream(err))) => {
                            let why = FrontDoorError::MalformedBody(err.to_string());
                            return reject(why).await;
                        }
                        Err(_) => return reject(FrontDoorError::BodyTimeout { after }).await,
                    };
                    serve_body(&mut inner, parts, body, shared.max_response_body_size).await?
                }
                Transport::Ws => {
                    if let Some(refusal) = bad_handshake(&req) {
                        return reject(refusal).await;
                    }
                    let permit = match shared.take_ws_connection(&entry_id) {
                        Ok(slot) => slot,
                        Err(err) => return reject(err).await,
                    };
                    req.extensions_mut()
                        .insert(Arc::new(WsSlot::new(permit, connection)));
                    inner.call(req.map(HttpBody::new)).await?
                }
            };
            if let Some(LimitedMarker(err)) = response.extensions_mut().remove::<LimitedMarker>() {
                *response.status_mut() = err.status();
                if let Some(after) = err.retry_after() {
                    if let Ok(value) = http::HeaderValue::from_str(&retry_after_header(after)) {
                        response.headers_mut().insert(header::RETRY_AFTER, value);
                    }
                }
            }
            if response.extensions_mut().remove::<NoAnswer>().is_some() {
                *response.body_mut() = jsonrpsee::server::HttpBody::empty();
                response.headers_mut().remove(header::CONTENT_LENGTH);
            }
            metrics::http_response(response.status().as_u16());
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let post = Method::POST;
        let get = Method::GET;
        assert_eq!(
            route(&post, "/v3/abc", false),
            Route::Rpc {
                key: "abc",
                transport: Transport::Http
            }
        );
        assert_eq!(
            route(&get, "/ws/v3/abc", true),
            Route::Rpc {
                key: "abc",
                transport: Transport::Ws
            }
        );
        assert_eq!(route(&post, "/v3/", false), Route::MissingKey);
        assert_eq!(route(&post, "/v3", false), Route::MissingKey);
        assert_eq!(route(&get, "/ws/v3/", true), Route::MissingKey);
        assert!(matches!(route(&post, "/", false), Route::NotFound(_)));
        assert!(matches!(route(&post, "/v3abc", false), Route::NotFound(_)));
        assert!(matches!(
            route(&post, "/v3/abc/def", false),
            Route::NotFound(_)
        ));
        assert!(matches!(
            route(&get, "/v3/abc", false),
            Route::WrongMethod { allow: "POST", .. }
        ));
        assert!(matches!(
            route(&Method::PUT, "/ws/v3/abc", false),
            Route::WrongMethod { allow: "GET", .. }
        ));
        assert!(matches!(
            route(&get, "/ws/v3/abc", false),
            Route::NotFound(_)
        ));
        assert!(matches!(
            route(&post, "/ws/v3/abc", false),
            Route::WrongMethod { allow: "GET", .. }
        ));
        assert!(matches!(route(&get, "/v3/abc", true), Route::NotFound(_)));
        assert_eq!(route(&get, "/health", false), Route::Health);
        assert_eq!(route(&Method::HEAD, "/health", false), Route::Health);
        assert!(matches!(
            route(&post, "/health", false),
            Route::WrongMethod {
                allow: "GET, HEAD",
                ..
            }
        ));
        assert!(matches!(route(&get, "/health", true), Route::NotFound(_)));
        assert!(matches!(
            route(&get, "/health/x", false),
            Route::NotFound(_)
        ));
    }
}
