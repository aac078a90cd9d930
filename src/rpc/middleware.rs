//! The JSON-RPC side of the front door, a jsonrpsee RPC middleware: per-key rate limit and
//! quota (one charge per call, per batch item and per WS message), the per-network method
//! policy, metrics and request logs.
//!
//! Rate limiting lives here rather than in the HTTP layer because only here are batch items and
//! WebSocket messages visible. When a request is refused, the error response carries a
//! [`LimitedMarker`] extension; jsonrpsee copies response extensions onto the HTTP response, and
//! the HTTP layer turns the marker into status 429. On WebSocket there is no status to set, so
//! the error answers the message itself.

use std::{panic::AssertUnwindSafe, sync::Arc, time::Instant};

use futures_util::FutureExt as _;

use jsonrpsee::{
    core::middleware::{Batch, BatchEntry, BatchEntryErr, Notification, RpcServiceT},
    server::{BatchResponseBuilder, MethodCallback, MethodResponse, Methods},
    types::{error::INVALID_PARAMS_CODE, ErrorObjectOwned, Id, Request, TwoPointZero},
};

use super::{
    backend::KeyBackend,
    error::FrontDoorError,
    http_layer::{AlreadyCharged, AuthedKey, LimitedMarker, NoAnswer, Transport},
    max_params::MaxParams,
    metrics, param_errors,
    policy::MethodPolicy,
    workers,
};

#[derive(Debug)]
struct Shared {
    keys: KeyBackend,
    policy: MethodPolicy,
    max_params: MaxParams,
    /// To label metrics with real method names only.
    methods: Methods,
    max_response_body_size: usize,
    /// Most requests in one batch (`--rpc.max-batch-size`).
    max_batch_size: usize,
    /// How long a batch's calls may run together (see [`super::RpcConfig::batch_timeout`]).
    batch_timeout: Option<std::time::Duration>,
}

/// Builds [`FrontDoorRpc`] services around jsonrpsee's own.
#[derive(Debug, Clone)]
pub struct FrontDoorRpcLayer {
    shared: Arc<Shared>,
}

impl FrontDoorRpcLayer {
    pub fn new(
        keys: KeyBackend,
        policy: MethodPolicy,
        max_params: MaxParams,
        methods: Methods,
        max_response_body_size: u32,
        max_batch_size: u32,
        batch_timeout: Option<std::time::Duration>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                keys,
                policy,
                max_params,
                methods,
                max_response_body_size: max_response_body_size as usize,
                max_batch_size: max_batch_size as usize,
                batch_timeout,
            }),
        }
    }
}

impl<S> tower::Layer<S> for FrontDoorRpcLayer {
    type Service = FrontDoorRpc<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FrontDoorRpc {
            inner,
            shared: self.shared.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct FrontDoorRpc<S> {
    inner: S,
    shared: Arc<Shared>,
}

/// Checks the key is still valid and charges `n` requests to the key in `extensions`, in the
/// key backend. Requests without a key cannot arrive through the HTTP layer, so they are not
/// limited here.
async fn charge(
    keys: &KeyBackend,
    extensions: &http::Extensions,
    n: usize,
) -> Result<(), FrontDoorError> {
    if extensions.get::<AlreadyCharged>().is_some() {
        return Ok(());
    }
    match extensions.get::<AuthedKey>() {
        Some(AuthedKey(entry)) => {
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            let result = keys.charge(entry, n).await;
            if result.is_ok() {
                ::metrics::counter!(metrics::KEY_REQUESTS, "key" => entry.id.0.to_string())
                    .increment(u64::from(n));
            }
            result
        }
        None => Ok(()),
    }
}

fn limited_response(id: jsonrpsee::types::Id<'_>, err: FrontDoorError) -> MethodResponse {
    let mut response = MethodResponse::error(id, err.to_error_object());
    response.extensions_mut().insert(LimitedMarker(err));
    response
}

/// jsonrpsee answers a param that does not decode with "Invalid params" and serde's reason
/// (positioned within one element) as `data`; this makes the message name the argument and
/// field (see [`param_errors`]). `data` stays only on `trace_*` methods, whose reference
/// (reth, itself on jsonrpsee) sends serde's text there; geth, the reference for the others,
/// sends a -32602 without `data`, and the message already says everything `data` did.
fn named_invalid_params(
    method: &str,
    params: Option<&str>,
    response: &MethodResponse,
) -> Option<ErrorObjectOwned> {
    let answer: serde_json::Value = serde_json::from_str(response.as_json().get()).ok()?;
    let error = answer.get("error")?;
    if error.get("message")? != "Invalid params" {
        return None;
    }
    let data = error.get("data")?;
    let message = param_errors::describe(params, data.as_str()?);
    let data = method.starts_with("trace_").then(|| data.clone());
    Some(ErrorObjectOwned::owned(INVALID_PARAMS_CODE, message, data))
}

/// geth's answer to ending a subscription the connection does not hold.
fn subscription_not_found() -> ErrorObjectOwned {
    ErrorObjectOwned::owned(-32000, "subscription not found", None::<()>)
}

/// What refuses an `eth_unsubscribe` before it runs, as geth refuses it: anything but one
/// subscription id (a string) is -32602, and over HTTP no subscription exists to end.
fn unsubscribe_refusal(params: Option<&str>, transport: Transport) -> Option<ErrorObjectOwned> {
    let first = params
        .and_then(|p| serde_json::from_str::<Vec<serde_json::Value>>(p).ok())
        .and_then(|args| args.into_iter().next());
    match first {
        None | Some(serde_json::Value::Null) => Some(ErrorObjectOwned::owned(
            INVALID_PARAMS_CODE,
            "missing value for required argument 0",
            None::<()>,
        )),
        Some(serde_json::Value::String(_)) if transport == Transport::Http => {
            Some(subscription_not_found())
        }
        Some(serde_json::Value::String(_)) => None,
        Some(other) => Some(ErrorObjectOwned::owned(
            INVALID_PARAMS_CODE,
            format!("invalid argument 0: a subscription id is a string, not {other}"),
            None::<()>,
        )),
    }
}

/// The answer to a call whose method panicked: a bug, logged with what it said, and -32603 to
/// the client rather than a dropped connection. No method writes the chain database (only the
/// sync path does), so a panic leaves nothing half written there.
fn panicked(
    method: &str,
    id: jsonrpsee::types::Id<'static>,
    panic: &(dyn std::any::Any + Send),
) -> MethodResponse {
    let what = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    tracing::error!(target: "simnode::rpc", method, panic = what, "RPC method panicked");
    MethodResponse::error(
        id,
        ErrorObjectOwned::owned(
            jsonrpsee::types::error::INTERNAL_ERROR_CODE,
            format!("internal error: {method} failed unexpectedly (logged by the node)"),
            None::<()>,
        ),
    )
}

/// A notification as the call it names, with a null id, for running it and dropping its
/// answer: jsonrpsee's own service answers a notification without running it, where the
/// JSON-RPC spec and geth run it. `None` for a subscription, which a notification could
/// never be told the id of.
fn notification_call<'a>(shared: &Shared, n: Notification<'a>) -> Option<Request<'a>> {
    let subscribes = opens_subscription(shared, n.method_name());
    let Notification {
        method,
        params,
        extensions,
        ..
    } = n;
    (!subscribes).then(|| Request {
        jsonrpc: TwoPointZero,
        id: Id::Null,
        method,
        params,
        extensions,
    })
}

/// Whether `request` opens a subscription over a WebSocket. jsonrpsee writes a subscription's
/// answer to the socket itself, so inside a batch it would be answered twice (over HTTP the
/// call is refused as a single one would be).
fn subscribes_over_ws(shared: &Shared, request: &Request<'_>) -> bool {
    let transport = request.extensions().get::<Transport>().copied();
    transport == Some(Transport::Ws) && opens_subscription(shared, request.method_name())
}

fn opens_subscription(shared: &Shared, method: &str) -> bool {
    matches!(
        shared.methods.method(method),
        Some(MethodCallback::Subscription(_))
    )
}

/// The answer of a batch call that would start after the batch's calls used up their time
/// together.
fn batch_past_deadline(shared: &Shared) -> ErrorObjectOwned {
    let ms = shared.batch_timeout.map_or(0, |t| t.as_millis());
    ErrorObjectOwned::owned(
        simnode_api::RpcError::Timeout(0).code(),
        format!(
            "batch timeout: the calls before this one used the {ms} ms a batch may run; send it again on its own or in a smaller batch"
        ),
        None::<()>,
    )
}

/// geth's answer to a batch over the limit: an array of one -32600 "batch too large" with the
/// id of the batch's first call (the protocol has no error for a whole batch; an array still
/// reads as a batch answer to the client). Nothing in it runs, and it is not charged.
fn batch_too_large(batch: &Batch<'_>, max_response_body_size: usize) -> MethodResponse {
    let id = batch
        .iter()
        .find_map(|entry| match entry {
            Ok(BatchEntry::Call(request)) => Some(request.id.clone().into_owned()),
            _ => None,
        })
        .unwrap_or(jsonrpsee::types::Id::Null);
    let error = ErrorObjectOwned::owned(
        jsonrpsee::types::error::INVALID_REQUEST_CODE,
        "batch too large",
        None::<()>,
    );
    let mut builder = BatchResponseBuilder::new_with_limit(max_response_body_size);
    match builder.append(MethodResponse::error(id, error)) {
        Ok(()) => MethodResponse::from_batch(builder.finish()),
        Err(too_big) => too_big,
    }
}

/// The (empty) answer to notifications, marked so that HTTP sends no body.
fn no_answer() -> MethodResponse {
    let mut response = MethodResponse::notification();
    response.extensions_mut().insert(NoAnswer);
    response
}

impl<S> FrontDoorRpc<S>
where
    S: RpcServiceT<
            MethodResponse = MethodResponse,
            BatchResponse = MethodResponse,
            NotificationResponse = MethodResponse,
        > + Clone
        + Send
        + Sync
        + 'static,
{
    /// One call, already paid for: policy, then the method, with metrics and a log line.
    async fn serve_call(inner: S, shared: Arc<Shared>, request: Request<'_>) -> MethodResponse {
        let started = Instant::now();
        let method = request.method_name().to_string();
        let transport = request
            .extensions()
            .get::<Transport>()
            .copied()
            .unwrap_or(Transport::Http);
        let entry = request
            .extensions()
            .get::<AuthedKey>()
            .map(|AuthedKey(entry)| entry.clone());
        let key = entry.as_ref().map(|entry| entry.id.0.clone());

        // Kept for naming the parameter of a -32602 (borrowed from the body: no copy).
        let params = request.params.clone();
        let id = request.id.clone();
        // Refused before it runs: switched off on this network, outside the key's method
        // list, too many arguments, a subscription over HTTP, which cannot carry its
        // notifications, or an unsubscription without an id or over HTTP (in that order).
        let callback = shared.methods.method(&method);
        let subscription = matches!(callback, Some(MethodCallback::Subscription(_)));
        let unsubscription = matches!(callback, Some(MethodCallback::Unsubscription(_)));
        let key_allows = entry
            .as_ref()
            .is_none_or(|entry| entry.access().admits_method(&method));
        let refused = match shared.policy.check(&method) {
            Err(err) => Some(err.to_error_object()),
            Ok(()) if !key_allows => {
                Some(FrontDoorError::MethodNotAllowedForKey(method.clone()).to_error_object())
            }
            Ok(()) => match shared.max_params.check(&method, params.as_deref()) {
                Err(err) => Some(err),
                Ok(()) if subscription && transport == Transport::Http => {
                    Some(FrontDoorError::NotificationsUnsupported.to_error_object())
                }
                Ok(()) if unsubscription => {
                    unsubscribe_refusal(params.as_deref().map(|p| p.get()), transport)
                }
                Ok(()) => None,
            },
        };
        let mut response = match refused {
            Some(err) => MethodResponse::error(request.id().into_owned(), err),
            // jsonrpsee runs a synchronous method inside `call` itself, not when its future
            // is polled: the call is made inside the guarded future.
            None => match AssertUnwindSafe(async move { inner.call(request).await })
                .catch_unwind()
                .await
            {
                Ok(response) => response,
                Err(panic) => panicked(&method, id.clone().into_owned(), panic.as_ref()),
            },
        };
        // jsonrpsee answers `false` for an id it does not hold; geth's answer is an error.
        let ended_nothing = || {
            serde_json::from_str::<serde_json::Value>(response.as_json().get())
                .is_ok_and(|answer| answer["result"] == serde_json::Value::Bool(false))
        };
        if unsubscription && response.is_success() && ended_nothing() {
            response = MethodResponse::error(id.clone().into_owned(), subscription_not_found());
        }
        // A subscription's answer has already gone to the socket (jsonrpsee sends it from the
        // subscription itself); a renamed copy would be a second answer to the same request.
        if response.as_error_code() == Some(INVALID_PARAMS_CODE) && !response.is_subscription() {
            if let Some(named) =
                named_invalid_params(&method, params.as_deref().map(|p| p.get()), &response)
            {
                response = MethodResponse::error(id, named);
            }
        }

        let elapsed = started.elapsed();
        let label = if shared.methods.method(&method).is_some() {
            method.clone()
        } else {
            "unknown".to_string()
        };
        let code = response.as_error_code();
        if let Some(entry) = &entry {
            shared.keys.record_usage(entry, &label, code.is_some());
        }
        let code_label = code.map_or_else(|| "ok".to_string(), |c| c.to_string());
        ::metrics::counter!(metrics::RPC_REQUESTS, "method" => label.clone(), "transport" => transport.as_str(), "code" => code_label.clone())
            .increment(1);
        if code.is_some() {
            ::metrics::counter!(metrics::RPC_ERRORS, "method" => label.clone(), "code" => code_label).increment(1);
        }
        ::metrics::histogram!(metrics::RPC_DURATION, "method" => label)
            .record(elapsed.as_secs_f64());
        tracing::debug!(
            target: "simnode::rpc",
            method = %method,
            transport = transport.as_str(),
            key = key.as_deref().unwrap_or("-"),
            error_code = code,
            elapsed_ms = elapsed.as_secs_f64() * 1000.0,
            "rpc call"
        );
        response
    }
}

impl<S> RpcServiceT for FrontDoorRpc<S>
where
    S: RpcServiceT<
            MethodResponse = MethodResponse,
            BatchResponse = MethodResponse,
            NotificationResponse = MethodResponse,
        > + Clone
        + Send
        + Sync
        + 'static,
{
    type MethodResponse = MethodResponse;
    type NotificationResponse = MethodResponse;
    type BatchResponse = MethodResponse;

    fn call<'a>(
        &self,
        request: Request<'a>,
    ) -> impl std::future::Future<Output = MethodResponse> + Send + 'a {
        let inner = self.inner.clone();
        let shared = self.shared.clone();
        async move {
            let response = match charge(&shared.keys, request.extensions(), 1).await {
                Err(err) => limited_response(request.id, err),
                Ok(()) => Self::serve_call(inner, shared, request).await,
            };
            workers::note_answer();
            response
        }
    }

    fn batch<'a>(
        &self,
        batch: Batch<'a>,
    ) -> impl std::future::Future<Output = MethodResponse> + Send + 'a {
        let inner = self.inner.clone();
        let shared = self.shared.clone();
        async move {
            let mut batch = batch;
            let items = batch.len();
            if items > shared.max_batch_size {
                workers::note_answer();
                return batch_too_large(&batch, shared.max_response_body_size);
            }
            let charged = if items == 0 {
                Ok(())
            } else {
                charge(&shared.keys, batch.extensions(), items).await
            };

            let mut builder = BatchResponseBuilder::new_with_limit(shared.max_response_body_size);
            let mut got_notification = false;
            let deadline = shared.batch_timeout.map(|t| std::time::Instant::now() + t);
            for entry in batch {
                let response = match (entry, &charged) {
                    (Ok(BatchEntry::Call(request)), Ok(()))
                        if deadline.is_some_and(|d| std::time::Instant::now() >= d) =>
                    {
                        MethodResponse::error(request.id, batch_past_deadline(&shared))
                    }
                    (Ok(BatchEntry::Call(request)), Ok(()))
                        if subscribes_over_ws(&shared, &request) =>
                    {
                        let refusal =
                            FrontDoorError::SubscriptionInBatch(request.method_name().to_owned());
                        MethodResponse::error(request.id, refusal.to_error_object())
                    }
                    (Ok(BatchEntry::Call(request)), Ok(())) => {
                        Self::serve_call(inner.clone(), shared.clone(), request).await
                    }
                    (Ok(BatchEntry::Call(request)), Err(err)) => {
                        MethodResponse::error(request.id, err.to_error_object())
                    }
                    (Ok(BatchEntry::Notification(notification)), charged) => {
                        got_notification = true;
                        let past_deadline =
                            deadline.is_some_and(|d| std::time::Instant::now() >= d);
                        if let (Ok(()), false, Some(call)) = (
                            charged,
                            past_deadline,
                            notification_call(&shared, notification),
                        ) {
                            Self::serve_call(inner.clone(), shared.clone(), call).await;
                        }
                        continue;
                    }
                    (Err(invalid), _) => {
                        let (err, id) = BatchEntryErr::into_parts(invalid);
                        MethodResponse::error(id, err)
                    }
                };
                if let Err(too_big) = builder.append(response) {
                    return too_big;
                }
            }

            let mut response = if builder.is_empty() && got_notification {
                no_answer()
            } else {
                // An empty batch is answered with one "invalid request" by the builder, as the
                // JSON-RPC spec asks.
                MethodResponse::from_batch(builder.finish())
            };
            if let Err(err) = charged {
                response.extensions_mut().insert(LimitedMarker(err));
            }
            workers::note_answer();
            response
        }
    }

    fn notification<'a>(
        &self,
        n: Notification<'a>,
    ) -> impl std::future::Future<Output = MethodResponse> + Send + 'a {
        let inner = self.inner.clone();
        let shared = self.shared.clone();
        async move {
            // A notification gets no answer, but it is still a request the key pays for.
            if let Err(err) = charge(&shared.keys, n.extensions(), 1).await {
                let mut response = no_answer();
                response.extensions_mut().insert(LimitedMarker(err));
                return response;
            }
            // Over HTTP a request jsonrpsee takes for a notification may be a call whose id it
            // cannot hold; the HTTP layer tells them apart with the body in hand and runs each
            // once (see `ids`). Over a WebSocket, where such calls go unanswered, it runs here.
            let over_http = n.extensions().get::<Transport>() != Some(&Transport::Ws);
            if over_http {
                return no_answer();
            }
            if let Some(call) = notification_call(&shared, n) {
                Self::serve_call(inner, shared, call).await;
            }
            no_answer()
        }
    }
}
