//! The RPC front door as a client sees it: a server started in-process with a few test methods,
//! spoken to over real HTTP and WebSocket connections. Keys are managed the way a user does it,
//! through `simnode keys ...` (parsed by the real CLI).

use std::{
    net::SocketAddr,
    path::Path,
    time::{Duration, Instant},
};

use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use jsonrpsee::{types::ErrorObjectOwned, RpcModule};
use serde_json::{json, Value};
use simnode::{
    cli::{Cli, Command},
    rpc::{self, RpcArgs, RpcConfig, RpcServerHandle},
};
use simnode_api::ApiKeyId;
use support::TempDir;
use tokio_tungstenite::tungstenite::{self, Message};

mod support;

// ---------------------------------------------------------------------------------------------
// Harness

fn tempdir(name: &str) -> TempDir {
    TempDir::new(&format!("rpc-{name}"))
}

/// `simnode keys ARGS... --datadir DIR`, returning what it printed.
fn keys_cli(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let mut argv = vec!["simnode", "keys"];
    argv.extend_from_slice(args);
    let dir = dir.to_string_lossy().into_owned();
    argv.extend_from_slice(&["--datadir", &dir]);
    let cli = Cli::try_parse_from(argv)?;
    let Command::Keys(args) = cli.command else {
        anyhow::bail!("not a keys command")
    };
    let mut out = Vec::new();
    rpc::keys::run_to(args, &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// `simnode keys add NAME [LIMITS]`: returns the new key (the first line printed).
fn add_key(dir: &Path, name: &str, limits: &[&str]) -> String {
    let mut args = vec!["add", name];
    args.extend_from_slice(limits);
    let out = keys_cli(dir, &args).expect("keys add");
    out.lines().next().expect("key line").trim().to_string()
}

fn test_methods() -> RpcModule<()> {
    let mut module = RpcModule::new(());
    module
        .register_method("test_echo", |params, _, _| params.one::<Value>())
        .expect("register");
    module
        .register_method("test_whoami", |_, _, ext| {
            ext.get::<ApiKeyId>()
                .map(|id| id.0.to_string())
                .unwrap_or_default()
        })
        .expect("register");
    module
        .register_method("test_add", |params, _, _| {
            // Decoded one element at a time, as the `#[rpc]` macros of every module do.
            let mut seq = params.sequence();
            let (a, b): (u64, u64) = (seq.next()?, seq.next()?);
            Ok::<_, ErrorObjectOwned>(a + b)
        })
        .expect("register");
    module
        .register_method("test_call", |params, _, _| {
            let call: alloy::rpc::types::TransactionRequest = params.sequence().next()?;
            Ok::<_, ErrorObjectOwned>(call.to.is_some())
        })
        .expect("register");
    module
        .register_method("test_big", |params, _, _| {
            let n: usize = params.one()?;
            Ok::<_, ErrorObjectOwned>("x".repeat(n))
        })
        .expect("register");
    module
        .register_method("test_text", |params, _, ext| {
            // A result a method has as JSON text (a cached answer, say): `[n, "x" * n]`.
            let n: usize = params.one()?;
            let text = format!(r#"[{n},"{}"]"#, "x".repeat(n));
            let json = serde_json::value::RawValue::from_string(text).expect("JSON");
            let json = simnode_api::raw_answer::SharedJson::new(json);
            Ok::<_, ErrorObjectOwned>(simnode_api::raw_answer::answer(ext, json))
        })
        .expect("register");
    module
        .register_async_method("test_sleep", |params, _, _| async move {
            let ms: u64 = params.one()?;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, ErrorObjectOwned>(ms)
        })
        .expect("register");
    module
        .register_method("eth_simulateV1", |_, _, _| "simulated")
        .expect("register");
    module
        .register_method("test_panic", |_, _, _| -> Result<u64, ErrorObjectOwned> {
            panic!("a bug in a method")
        })
        .expect("register");
    module
        .register_async_method("test_panic_later", |_, _, _| async move {
            tokio::task::yield_now().await;
            let answer: Result<u64, ErrorObjectOwned> = Err(ErrorObjectOwned::owned(
                0,
                String::from("unreached"),
                None::<()>,
            ));
            if answer.is_err() {
                panic!("a bug after an await");
            }
            answer
        })
        .expect("register");
    module
}

struct Node {
    server: RpcServerHandle,
    dir: TempDir,
}

impl Node {
    async fn start(name: &str, network: &str, tweak: impl FnOnce(&mut RpcArgs)) -> Self {
        let dir = tempdir(name);
        Self::start_in(dir, network, tweak).await
    }

    async fn start_in(dir: TempDir, network: &str, tweak: impl FnOnce(&mut RpcArgs)) -> Self {
        Self::start_configured(dir, network, tweak, |_| {}).await
    }

    /// The same, with a last change to what the node sets beside the flags.
    async fn start_configured(
        dir: TempDir,
        network: &str,
        tweak: impl FnOnce(&mut RpcArgs),
        configure: impl FnOnce(&mut RpcConfig),
    ) -> Self {
        let mut args = RpcArgs {
            http_port: 0,
            ..RpcArgs::default()
        };
        tweak(&mut args);
        let mut config = RpcConfig::from_args(&args, Some(dir.path()), network, None);
        configure(&mut config);
        // Tests should not wait a second for `keys revoke` to show.
        config.key_refresh = Duration::from_millis(50);
        let server = rpc::start(config, test_methods())
            .await
            .expect("server starts");
        Self { server, dir }
    }

    fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// `simnode keys add NAME [LIMITS]` on this node's datadir, once the node has read it.
    async fn add_key(&self, name: &str, limits: &[&str]) -> String {
        let key = add_key(self.dir.path(), name, limits);
        self.keys_reloaded().await;
        key
    }

    /// Waits out three of the node's 50 ms key-file refreshes, so a `simnode keys` change shows.
    async fn keys_reloaded(&self) {
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    async fn post(&self, path: &str, body: &str) -> Reply {
        http(
            self.addr(),
            "POST",
            path,
            Some("application/json"),
            body.as_bytes().to_vec(),
        )
        .await
    }

    async fn call(&self, key: &str, method: &str, params: Value) -> Reply {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        self.post(&format!("/v3/{key}"), &body).await
    }

    async fn ws(&self, key: &str) -> Ws {
        let url = format!("ws://{}/ws/v3/{key}", self.addr());
        let (socket, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("websocket connects");
        Ws(socket)
    }

    /// A WebSocket handshake with this `Origin` header (or none), as a browser page sends it.
    async fn ws_from(
        &self,
        key: &str,
        origin: Option<&'static str>,
    ) -> Result<(), tungstenite::Error> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let url = format!("ws://{}/ws/v3/{key}", self.addr());
        let mut request = url.into_client_request()?;
        if let Some(origin) = origin {
            request
                .headers_mut()
                .insert("origin", http::HeaderValue::from_static(origin));
        }
        tokio_tungstenite::connect_async(request).await.map(|_| ())
    }

    /// The status a WebSocket handshake is refused with.
    async fn ws_refused(&self, path: &str) -> (u16, Value) {
        let (status, body, _) = self.ws_refusal(path).await;
        (status, body)
    }

    /// The status, body and headers a WebSocket handshake is refused with.
    async fn ws_refusal(&self, path: &str) -> (u16, Value, http::HeaderMap) {
        let url = format!("ws://{}{path}", self.addr());
        match tokio_tungstenite::connect_async(url).await {
            Err(tungstenite::Error::Http(response)) => {
                let body = response.body().clone().unwrap_or_default();
                (
                    response.status().as_u16(),
                    serde_json::from_slice(&body).unwrap_or(Value::Null),
                    response.headers().clone(),
                )
            }
            Err(other) => panic!("unexpected handshake error {other}"),
            Ok(_) => panic!("handshake to {path} should have been refused"),
        }
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: http::HeaderMap,
    text: String,
    /// The body as sent (gzip answers are not text).
    raw: Bytes,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }
    fn error_code(&self) -> i64 {
        self.json()["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("no error in {}", self.text))
    }
    fn error_message(&self) -> String {
        self.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
    /// A response header as text.
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> Reply {
    let headers: Vec<(&str, &str)> = content_type
        .map(|ct| ("content-type", ct))
        .into_iter()
        .collect();
    http_with(addr, method, path, &headers, body).await
}

async fn http_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Reply {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("handshake");
    tokio::spawn(conn);
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(Bytes::from(body))).expect("request");
    let response = sender.send_request(request).await.expect("response");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    Reply {
        status,
        headers,
        text: String::from_utf8_lossy(&bytes).into_owned(),
        raw: bytes,
    }
}

/// A gzip body as text.
fn gunzip(raw: &[u8]) -> String {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(raw), &mut text)
        .expect("a gzip stream");
    text
}

struct Ws(
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
);

impl Ws {
    async fn send(&mut self, text: String) {
        self.0
            .send(Message::Text(text.into()))
            .await
            .expect("ws send");
    }

    async fn recv(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(5), self.0.next())
                .await
                .expect("ws answer in time")
                .expect("ws open")
                .expect("ws frame");
            match msg {
                Message::Text(text) => {
                    return serde_json::from_str(text.as_str()).expect("ws JSON")
                }
                Message::Ping(_) | Message::Pong(_) => continue,
                other => panic!("unexpected ws message {other:?}"),
            }
        }
    }

    async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )
        .await;
        self.recv().await
    }
}

// ---------------------------------------------------------------------------------------------
// Paths and keys

#[tokio::test]
async fn only_the_two_doors_exist() {
    let node = Node::start("paths", "dev", |_| {}).await;
    let key = node.add_key("alice", &[]).await;

    let ok = node.call(&key, "test_echo", json!(["hi"])).await;
    assert_eq!(ok.status, 200, "{ok:?}");
    assert_eq!(
        ok.json(),
        json!({"jsonrpc": "2.0", "id": 1, "result": "hi"})
    );

    // Paths the node does not serve are 404; a served one asked with a method it does not
    // take there is 405, with `Allow` naming the right one.
    for (method, path, status, allow) in [
        ("POST", "/".to_string(), 404, None),
        ("POST", "/v2/abc".to_string(), 404, None),
        ("POST", format!("/v3/{key}/extra"), 404, None),
        ("GET", format!("/v3/{key}"), 405, Some("POST")),
        ("PUT", format!("/v3/{key}"), 405, Some("POST")),
        ("POST", format!("/ws/v3/{key}"), 405, Some("GET")),
        ("GET", format!("/ws/v3/{key}"), 404, None), // not an upgrade request
        ("POST", "/health".to_string(), 405, Some("GET, HEAD")),
    ] {
        let reply = http(
            node.addr(),
            method,
            &path,
            Some("application/json"),
            b"{}".to_vec(),
        )
        .await;
        assert_eq!(reply.status, status, "{method} {path}: {reply:?}");
        assert_eq!(reply.header("allow").as_deref(), allow, "{method} {path}");
        assert_eq!(reply.error_code(), -32600);
        assert_eq!(reply.json()["id"], Value::Null);
    }
    node.server.stop();
}

/// Browsers: a preflight from any origin is answered by default, and every answer to a request
/// that names an origin (errors included) lets the page read it; without an Origin nothing
/// changes.
#[tokio::test]
async fn cors_for_browser_pages_by_default() {
    let node = Node::start("cors-any", "dev", |_| {}).await;
    let key = node.add_key("page", &["--rps", "1", "--burst", "2"]).await;
    let origin = ("origin", "https://wallet.example");

    let preflight = http_with(
        node.addr(),
        "OPTIONS",
        &format!("/v3/{key}"),
        &[
            origin,
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "content-type,x-client"),
        ],
        vec![],
    )
    .await;
    assert_eq!(preflight.status, 204, "{preflight:?}");
    assert_eq!(
        preflight.header("access-control-allow-origin").as_deref(),
        Some("*")
    );
    assert!(preflight
        .header("access-control-allow-methods")
        .is_some_and(|m| m.contains("POST")));
    assert_eq!(
        preflight.header("access-control-allow-headers").as_deref(),
        Some("content-type,x-client")
    );

    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "test_echo", "params": ["hi"]}).to_string();
    let post = |key: String, with_origin: bool| {
        let body = body.clone().into_bytes();
        let addr = node.addr();
        async move {
            let mut headers = vec![("content-type", "application/json")];
            if with_origin {
                headers.push(origin);
            }
            http_with(addr, "POST", &format!("/v3/{key}"), &headers, body).await
        }
    };
    let ok = post(key.clone(), true).await;
    assert_eq!(ok.status, 200, "{ok:?}");
    assert_eq!(ok.json()["result"], "hi");
    assert_eq!(
        ok.header("access-control-allow-origin").as_deref(),
        Some("*")
    );
    let plain = post(key.clone(), false).await;
    assert_eq!(plain.status, 200, "{plain:?}");
    assert_eq!(plain.header("access-control-allow-origin"), None);
    // The page can read the error, and when to retry.
    let limited = post(key.clone(), true).await;
    assert_eq!(limited.status, 429, "{limited:?}");
    assert_eq!(
        limited.header("access-control-allow-origin").as_deref(),
        Some("*")
    );
    assert_eq!(
        limited.header("access-control-expose-headers").as_deref(),
        Some("Retry-After")
    );
    let bad_key = post("nope".into(), true).await;
    assert_eq!(bad_key.status, 401, "{bad_key:?}");
    assert_eq!(
        bad_key.header("access-control-allow-origin").as_deref(),
        Some("*")
    );
    node.server.stop();
}

/// `--http.corsdomain` / `--ws.origins` with a list: only listed origins get CORS answers and
/// WebSockets; a preflight or upgrade from another origin is refused with 403 (-32002); clients
/// without an Origin are not affected.
#[tokio::test]
async fn cors_and_websocket_origins_from_a_list() {
    let node = Node::start("cors-list", "dev", |args| {
        args.cors_domains = vec!["https://good.example".into()];
        args.ws_origins = vec!["https://good.example".into()];
    })
    .await;
    let key = node.add_key("page", &[]).await;
    let preflight = |origin: &'static str| {
        let addr = node.addr();
        let path = format!("/v3/{key}");
        async move {
            http_with(
                addr,
                "OPTIONS",
                &path,
                &[
                    ("origin", origin),
                    ("access-control-request-method", "POST"),
                ],
                vec![],
            )
            .await
        }
    };
    let good = preflight("https://good.example").await;
    assert_eq!(good.status, 204, "{good:?}");
    assert_eq!(
        good.headers.get("access-control-allow-origin").unwrap(),
        "https://good.example"
    );
    assert_eq!(good.headers.get("vary").unwrap(), "Origin");
    let evil = preflight("https://evil.example").await;
    assert_eq!(evil.status, 403, "{evil:?}");
    assert_eq!(evil.error_code(), -32002);
    assert!(evil.headers.get("access-control-allow-origin").is_none());
    // A request that skipped the preflight is served, but the browser may not show it.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "test_echo", "params": [1]});
    let sneaky = http_with(
        node.addr(),
        "POST",
        &format!("/v3/{key}"),
        &[
            ("content-type", "application/json"),
            ("origin", "https://evil.example"),
        ],
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(sneaky.status, 200, "{sneaky:?}");
    assert!(sneaky.headers.get("access-control-allow-origin").is_none());
    // The preflight of /health is answered as well.
    let health = http_with(
        node.addr(),
        "OPTIONS",
        "/health",
        &[
            ("origin", "https://good.example"),
            ("access-control-request-method", "GET"),
        ],
        vec![],
    )
    .await;
    assert_eq!(health.status, 204, "{health:?}");

    assert!(node
        .ws_from(&key, Some("https://good.example"))
        .await
        .is_ok());
    assert!(
        node.ws_from(&key, None).await.is_ok(),
        "a client without an Origin"
    );
    match node.ws_from(&key, Some("https://evil.example")).await {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status().as_u16(), 403);
            let body: Value =
                serde_json::from_slice(&response.body().clone().unwrap_or_default()).unwrap();
            assert_eq!(body["error"]["code"], -32002, "{body}");
        }
        other => panic!("an upgrade from an unlisted origin: {other:?}"),
    }
    node.server.stop();
}

/// A key with an origin list (`keys add --allow-origin`, `keys origins`) takes requests only
/// from those origins: not from others, not without an Origin, over HTTP and WebSocket alike.
#[tokio::test]
async fn a_key_limited_to_its_origins() {
    let node = Node::start("key-origins", "dev", |_| {}).await;
    let key = node
        .add_key(
            "page",
            &[
                "--allow-origin",
                "https://good.example,https://other.example",
            ],
        )
        .await;
    let call = |origin: Option<&'static str>| {
        let addr = node.addr();
        let path = format!("/v3/{key}");
        async move {
            let mut headers = vec![("content-type", "application/json")];
            if let Some(origin) = origin {
                headers.push(("origin", origin));
            }
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "test_echo", "params": [1]});
            http_with(addr, "POST", &path, &headers, body.to_string().into_bytes()).await
        }
    };
    let good = call(Some("https://good.example")).await;
    assert_eq!(good.status, 200, "{good:?}");
    assert_eq!(call(Some("https://other.example")).await.status, 200);
    let evil = call(Some("https://evil.example")).await;
    assert_eq!(evil.status, 403, "{evil:?}");
    assert_eq!(evil.error_code(), -32002);
    // The page still sees why (the node lets any origin read answers by default).
    assert_eq!(
        evil.headers.get("access-control-allow-origin").unwrap(),
        "*"
    );
    let bare = call(None).await;
    assert_eq!(bare.status, 403, "{bare:?}");
    assert!(bare.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("listed origins"));

    assert!(node
        .ws_from(&key, Some("https://good.example"))
        .await
        .is_ok());
    assert!(node.ws_from(&key, None).await.is_err());

    let listed = keys_cli(node.dir.path(), &["list"]).expect("keys list");
    assert!(
        listed.contains("https://good.example,https://other.example"),
        "{listed}"
    );
    // `keys origins KEY` with none lifts the list.
    let out = keys_cli(node.dir.path(), &["origins", &key]).expect("keys origins");
    assert!(out.trim_end().ends_with("any"), "{out}");
    node.keys_reloaded().await;
    assert_eq!(call(None).await.status, 200);
    assert_eq!(call(Some("https://evil.example")).await.status, 200);
    // A key cannot refuse every origin, and an origin must be written as browsers send it.
    assert!(keys_cli(node.dir.path(), &["origins", &key, "none"]).is_err());
    assert!(keys_cli(node.dir.path(), &["origins", &key, "good.example"]).is_err());
    node.server.stop();
}

/// Answers of 1 KiB or more are gzipped for a client that takes gzip, and only then.
#[tokio::test]
async fn large_answers_are_gzipped_for_clients_that_take_it() {
    let node = Node::start("gzip", "dev", |_| {}).await;
    let plain_node = Node::start("gzip-off", "dev", |args| args.disable_compression = true).await;
    let key = add_key(node.dir.path(), "indexer", &[]);
    let plain_key = plain_node.add_key("indexer", &[]).await;
    let echo = |text: String| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "test_echo", "params": [text]})
            .to_string()
            .into_bytes()
    };
    let send =
        |node: &Node, key: &str, body: Vec<u8>, extra: &'static [(&'static str, &'static str)]| {
            let addr = node.addr();
            let path = format!("/v3/{key}");
            async move {
                let mut headers = vec![("content-type", "application/json")];
                headers.extend_from_slice(extra);
                http_with(addr, "POST", &path, &headers, body).await
            }
        };
    let big = "0xabcdef".repeat(2_000);

    let plain = send(&node, &key, echo(big.clone()), &[]).await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("content-encoding"), None);
    let zipped = send(
        &node,
        &key,
        echo(big.clone()),
        &[("accept-encoding", "gzip, br")],
    )
    .await;
    assert_eq!(zipped.status, 200);
    assert_eq!(zipped.header("content-encoding").as_deref(), Some("gzip"));
    assert!(zipped
        .header("vary")
        .is_some_and(|v| v.contains("Accept-Encoding")));
    assert_eq!(
        zipped.header("content-length"),
        Some(zipped.raw.len().to_string())
    );
    assert!(
        zipped.raw.len() * 4 < plain.raw.len(),
        "{} bytes",
        zipped.raw.len()
    );
    let unzipped = gunzip(&zipped.raw);
    assert_eq!(unzipped, plain.text);
    // Past 256 KiB the compression runs on the blocking pool; same stream.
    let huge = "0x0123456789".repeat(40_000);
    let zipped = send(
        &node,
        &key,
        echo(huge.clone()),
        &[("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(zipped.header("content-encoding").as_deref(), Some("gzip"));
    let unzipped = gunzip(&zipped.raw);
    assert_eq!(
        serde_json::from_str::<Value>(&unzipped).unwrap()["result"],
        huge
    );

    // Small answers, a refused gzip, and a node with compression off: as they are.
    let small = send(
        &node,
        &key,
        echo("hi".into()),
        &[("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(small.header("content-encoding"), None);
    assert_eq!(small.json()["result"], "hi");
    let refused = send(
        &node,
        &key,
        echo(big.clone()),
        &[("accept-encoding", "gzip;q=0")],
    )
    .await;
    assert_eq!(refused.header("content-encoding"), None);
    let off = send(
        &plain_node,
        &plain_key,
        echo(big.clone()),
        &[("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(off.header("content-encoding"), None);
    assert_eq!(off.text, plain.text);
    // Errors too, and together with CORS.
    let browser = send(
        &node,
        "nope",
        echo(big),
        &[
            ("accept-encoding", "gzip"),
            ("origin", "https://app.example"),
        ],
    )
    .await;
    assert_eq!(browser.status, 401);
    assert_eq!(
        browser.header("access-control-allow-origin").as_deref(),
        Some("*")
    );
    node.server.stop();
    plain_node.server.stop();
}

/// A key with a method list (`keys add --allow-method`, `keys methods`) is answered -32002 for
/// any other method: alone, inside a batch and over WebSocket; a `prefix*` takes a namespace.
#[tokio::test]
async fn a_key_limited_to_some_methods() {
    let node = Node::start("key-methods", "dev", |_| {}).await;
    let key = node
        .add_key("reader", &["--allow-method", "test_echo,test_a*"])
        .await;

    let echo = node.call(&key, "test_echo", json!(["hi"])).await;
    assert_eq!(echo.json()["result"], "hi", "{echo:?}");
    let add = node.call(&key, "test_add", json!([1, 2])).await;
    assert_eq!(add.json()["result"], 3, "{add:?}");
    let who = node.call(&key, "test_whoami", json!([])).await;
    assert_eq!(who.status, 200);
    assert_eq!(who.error_code(), -32002, "{who:?}");
    assert!(who.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("test_whoami"));
    let batch = node
        .post(
            &format!("/v3/{key}"),
            r#"[{"jsonrpc":"2.0","id":1,"method":"test_whoami","params":[]},
                {"jsonrpc":"2.0","id":2,"method":"test_echo","params":[7]}]"#,
        )
        .await;
    let items = batch.json();
    assert_eq!(items[0]["error"]["code"], -32002, "{items}");
    assert_eq!(items[1]["result"], 7, "{items}");
    let mut ws = node.ws(&key).await;
    ws.send(json!({"jsonrpc": "2.0", "id": 3, "method": "test_whoami", "params": []}).to_string())
        .await;
    assert_eq!(ws.recv().await["error"]["code"], -32002);

    let listed = keys_cli(node.dir.path(), &["list"]).expect("keys list");
    assert!(listed.contains("test_echo,test_a*"), "{listed}");
    // A pattern no module serves is kept, with a warning (this test's methods are its own).
    let out = keys_cli(node.dir.path(), &["methods", &key, "eth_cal,trace_*"]).expect("methods");
    assert!(out.contains("warning: eth_cal matches no method"), "{out}");
    assert!(
        !out.contains("warning: trace_*"),
        "trace_* matches served methods: {out}"
    );
    // Every method again.
    let out = keys_cli(node.dir.path(), &["methods", &key, "*"]).expect("keys methods");
    assert!(out.trim_end().ends_with("any"), "{out}");
    node.keys_reloaded().await;
    let who = node.call(&key, "test_whoami", json!([])).await;
    assert!(who.json()["result"].is_string(), "{who:?}");
    assert!(keys_cli(node.dir.path(), &["methods", &key, "eth-call"]).is_err());
    assert!(keys_cli(node.dir.path(), &["methods", &key, "none"]).is_err());
    node.server.stop();
}

#[tokio::test]
async fn keys_are_required_checked_and_revocable() {
    let node = Node::start("auth", "dev", |_| {}).await;

    let missing = node.post("/v3/", "{}").await;
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing.json(),
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": "project id required in the URL"}})
    );

    let unknown = node
        .call("0123456789abcdef0123456789abcdef", "test_echo", json!([1]))
        .await;
    assert_eq!(unknown.status, 401);
    assert_eq!(
        unknown.json(),
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": "invalid project id"}})
    );

    // A key added while the server runs works within the refresh interval, and the method sees it.
    let key = node.add_key("bob", &[]).await;
    assert_eq!(key.len(), 32, "128-bit hex key: {key}");
    let who = node.call(&key, "test_whoami", json!([])).await;
    assert_eq!(who.status, 200);
    let id = who.json()["result"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(id.len(), 8, "methods see the key's public id, not the key");
    assert!(keys_cli(node.dir.path(), &["list"])
        .expect("list")
        .contains(&format!("{id:<10} bob")));

    // Revoked (by id, as `keys list` shows it): 401 on HTTP and on the WebSocket handshake.
    let out = keys_cli(node.dir.path(), &["revoke", &id]).expect("revoke");
    assert!(out.contains("revoked"), "{out}");
    node.keys_reloaded().await;
    let revoked = node.call(&key, "test_echo", json!([1])).await;
    assert_eq!(revoked.status, 401);
    assert_eq!(revoked.error_code(), -32001);
    assert_eq!(revoked.error_message(), "project id revoked");
    let list = keys_cli(node.dir.path(), &["list"]).expect("list");
    assert!(list.contains("revoked"), "{list}");

    let (status, body) = node.ws_refused(&format!("/ws/v3/{key}")).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["message"], "project id revoked");
    let (status, body) = node.ws_refused("/ws/v3/nope").await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["message"], "invalid project id");
    let (status, _) = node.ws_refused("/ws/v3/").await;
    assert_eq!(status, 401);

    node.server.stop();
    node.server.stopped().await;
}

#[tokio::test]
async fn cli_keys_and_dev_key_creation() {
    let dir = tempdir("cli-keys");
    // First --dev start creates a key; the next one finds it.
    let created = rpc::keys::ensure_dev_key(dir.path()).expect("dev key");
    let dev_key = created.expect("a key is created when none is stored");
    assert!(rpc::keys::ensure_dev_key(dir.path())
        .expect("dev key")
        .is_none());

    let node = Node::start_in(dir, "dev", |args| {
        args.api_keys = vec!["my-run-key".to_string()]
    })
    .await;
    assert_eq!(
        node.call("my-run-key", "test_echo", json!([7]))
            .await
            .json()["result"],
        7
    );
    assert_eq!(
        node.call(&dev_key, "test_echo", json!([8])).await.json()["result"],
        8
    );

    assert!(keys_cli(node.dir.path(), &["revoke", "no-such-key"]).is_err());
    node.server.stop();
}

// ---------------------------------------------------------------------------------------------
// HTTP protocol checks

#[tokio::test]
async fn content_type_and_body_size() {
    let node = Node::start("http-limits", "dev", |args| args.max_request_size = 1024).await;
    let key = node.add_key("carol", &[]).await;
    let path = format!("/v3/{key}");
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"test_echo","params":[1]}"#.to_vec();

    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let reply = http(node.addr(), "POST", &path, content_type, body.clone()).await;
        assert_eq!(reply.status, 415, "{content_type:?}");
        assert_eq!(reply.error_code(), -32600);
    }
    // geth's media types, with any parameters.
    for content_type in [
        "application/json; charset=utf-8",
        "application/json; charset=\"UTF-8\"",
        "application/json ; charset=utf-8",
        "Application/JSON;charset=utf-8;foo=bar",
        "application/json-rpc",
        "application/jsonrequest",
    ] {
        let ok = http(node.addr(), "POST", &path, Some(content_type), body.clone()).await;
        assert_eq!(ok.status, 200, "{content_type}");
        assert_eq!(ok.json()["result"], 1, "{content_type}");
    }

    let big =
        json!({"jsonrpc": "2.0", "id": 1, "method": "test_echo", "params": ["y".repeat(2000)]})
            .to_string();
    let reply = node.post(&path, &big).await;
    assert_eq!(reply.status, 413);
    assert_eq!(reply.error_code(), -32007);

    // A body without a declared length is cut off at the limit too.
    let mut stream = tokio::net::TcpStream::connect(node.addr())
        .await
        .expect("connect");
    let chunk = "z".repeat(600);
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         transfer-encoding: chunked\r\n\r\n{len:x}\r\n{chunk}\r\n{len:x}\r\n{chunk}\r\n0\r\n\r\n",
        len = chunk.len()
    );
    let answer = raw_exchange(&mut stream, &request, "-32007", Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("-32007"), "{answer}");

    // A body framed wrong is answered 400 before the connection closes (it was dropped with
    // no answer at all).
    for broken in ["zz\r\n{}\r\n0\r\n\r\n", "2\r\n{}XX0\r\n\r\n"] {
        let mut stream = tokio::net::TcpStream::connect(node.addr())
            .await
            .expect("connect");
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             transfer-encoding: chunked\r\n\r\n{broken}"
        );
        let answer = raw_exchange(&mut stream, &request, "}", Duration::from_secs(5)).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{broken:?}: {answer}");
        assert!(
            answer.contains("malformed request body"),
            "{broken:?}: {answer}"
        );
        assert!(
            answer.to_lowercase().contains("connection: close"),
            "{answer}"
        );
    }
    node.server.stop();
}

#[tokio::test]
async fn json_rpc_conformance() {
    let node = Node::start("conformance", "dev", |args| {
        args.max_batch_size = 3;
        args.max_response_size = 4096;
    })
    .await;
    let key = node.add_key("dave", &[]).await;
    let path = format!("/v3/{key}");

    let parse = node.post(&path, r#"{"jsonrpc":"2.0","id":1,"#).await;
    assert_eq!(parse.error_code(), -32700, "{parse:?}");

    let invalid = node.post(&path, r#"{"jsonrpc":"2.0","id":1}"#).await;
    assert_eq!(invalid.error_code(), -32600, "{invalid:?}");

    let empty_batch = node.post(&path, "[]").await;
    assert_eq!(empty_batch.error_code(), -32600, "{empty_batch:?}");

    let unknown = node.call(&key, "eth_noSuchMethod", json!([])).await;
    assert_eq!(unknown.status, 200);
    assert_eq!(unknown.error_code(), -32601);

    // -32602 names the argument (and the field, inside objects), not serde's column.
    let bad_params = node.call(&key, "test_add", json!(["one", 2])).await;
    assert_eq!(bad_params.error_code(), -32602, "{bad_params:?}");
    let message = bad_params.error_message();
    assert!(
        message.starts_with("invalid argument 0: invalid type"),
        "{message}"
    );
    assert!(!message.contains("column"), "{message}");
    // No `data`, as geth answers (trace_* keeps serde's text there, as reth does: the
    // bad-trace-type fixture checks it).
    assert!(
        bad_params.json()["error"].get("data").is_none(),
        "{bad_params:?}"
    );
    let bad_second = node.call(&key, "test_add", json!([1, "two"])).await;
    assert!(
        bad_second
            .error_message()
            .starts_with("invalid argument 1: "),
        "{bad_second:?}"
    );
    let bad_field = node
        .call(
            &key,
            "test_call",
            json!([{"from": "0x000000000000000000000000000000000000dEaD", "to": "0x12"}]),
        )
        .await;
    assert_eq!(bad_field.error_code(), -32602, "{bad_field:?}");
    assert!(
        bad_field
            .error_message()
            .starts_with("invalid argument 0 (to): "),
        "{bad_field:?}"
    );

    // A notification gets no answer; in a batch only the calls are answered.
    let notification = node
        .post(
            &path,
            r#"{"jsonrpc":"2.0","method":"test_echo","params":[1]}"#,
        )
        .await;
    assert_eq!(notification.status, 200);
    assert_eq!(notification.text, "");
    let batch = node
        .post(
            &path,
            r#"[{"jsonrpc":"2.0","id":"a","method":"test_add","params":[1,2]},
                {"jsonrpc":"2.0","method":"test_echo","params":[1]},
                {"jsonrpc":"2.0","id":"b","method":"nope"}]"#,
        )
        .await;
    assert_eq!(
        batch.json(),
        json!([
            {"jsonrpc": "2.0", "id": "a", "result": 3},
            {"jsonrpc": "2.0", "id": "b", "error": {"code": -32601, "message": "Method not found"}}
        ])
    );

    // Any JSON number (or a bool, as geth takes) is an id, answered as the client wrote it,
    // though jsonrpsee holds only u64 ids; an array or object id is an invalid request.
    for id in ["-1", "1.5", "1e2", "18446744073709551616", "true"] {
        let reply = node
            .post(
                &path,
                &format!(r#" {{"jsonrpc":"2.0","id":{id},"method":"test_add","params":[1,2]}}"#),
            )
            .await;
        assert_eq!(
            reply.text,
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":3}}"#),
            "{id}"
        );
    }
    for id in ["[1]", r#"{"a":1}"#] {
        let reply = node
            .post(
                &path,
                &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"test_add","params":[1,2]}}"#),
            )
            .await;
        assert_eq!(reply.error_code(), -32600, "{id}: {reply:?}");
        assert_eq!(reply.json()["id"], Value::Null, "{id}: {reply:?}");
    }
    // An id given twice is an invalid request (jsonrpsee would leave it unanswered), alone or
    // in a batch.
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"test_add","params":[1,2]}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"test_add","params":[1,2],"id":null}"#,
    ] {
        let reply = node.post(&path, body).await;
        assert_eq!(reply.error_code(), -32600, "{body}: {reply:?}");
        assert_eq!(reply.json()["id"], Value::Null, "{body}: {reply:?}");
    }
    let batch = node
        .post(
            &path,
            r#"[{"jsonrpc":"2.0","id":1,"id":2,"method":"test_add","params":[1,2]},
                {"jsonrpc":"2.0","id":3,"method":"test_add","params":[1,2]}]"#,
        )
        .await;
    assert_eq!(
        batch.text,
        r#"[{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}},{"jsonrpc":"2.0","id":3,"result":3}]"#
    );
    // A request that is not UTF-8 (here inside its id) is a parse error, not silence.
    let reply = http(
        node.addr(),
        "POST",
        &path,
        Some("application/json"),
        b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"test_add\",\"params\":[1,2]}".to_vec(),
    )
    .await;
    assert_eq!(reply.error_code(), -32700, "{reply:?}");
    assert_eq!(reply.json()["id"], Value::Null, "{reply:?}");

    let batch = node
        .post(
            &path,
            r#"[{"jsonrpc":"2.0","id":-7,"method":"test_add","params":[1,2]},
                {"jsonrpc":"2.0","id":[],"method":"test_add","params":[1,2]},
                {"jsonrpc":"2.0","id":7,"method":"test_add","params":[2,2]}]"#,
        )
        .await;
    assert_eq!(
        batch.text,
        r#"[{"jsonrpc":"2.0","id":-7,"result":3},{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}},{"jsonrpc":"2.0","id":7,"result":4}]"#
    );

    // Over the batch limit: geth's answer, an array of one error with the first call's id.
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"test_add","params":[1,2]}"#;
    let notification = r#"{"jsonrpc":"2.0","method":"test_add","params":[1,2]}"#;
    let too_many = node
        .post(&path, &format!("[{notification},{call},{call},{call}]"))
        .await;
    assert_eq!(
        too_many.text,
        r#"[{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"batch too large"}}]"#
    );
    let at_limit = node.post(&path, &format!("[{call},{call},{call}]")).await;
    assert_eq!(
        at_limit.json().as_array().map(Vec::len),
        Some(3),
        "{at_limit:?}"
    );

    // Response size limit.
    let big = node.call(&key, "test_big", json!([10_000])).await;
    assert_eq!(big.error_code(), -32008, "{big:?}");
    node.server.stop();
}

/// A result a method leaves as JSON text reaches the client the same on every path: a single
/// HTTP request (written around the text by the front door), a batch item and a WebSocket
/// message (both through jsonrpsee), with any id, gzipped or not, and past the response size
/// limit as the same -32008.
#[tokio::test]
async fn results_left_as_text_read_the_same_on_every_path() {
    let node = Node::start("text-results", "dev", |args| {
        args.max_response_size = 4096;
    })
    .await;
    let key = node.add_key("tara", &[]).await;
    let path = format!("/v3/{key}");
    let expected = |id: &str, n: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":[{n},"{}"]}}"#,
            "x".repeat(n)
        )
    };

    for id in ["1", r#""a-b""#, "-3", "null"] {
        let single = node
            .post(
                &path,
                &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"test_text","params":[5]}}"#),
            )
            .await;
        assert_eq!(single.text, expected(id, 5), "id {id}");
        assert_eq!(
            single.header("content-length"),
            Some(single.text.len().to_string())
        );
    }
    let batch = node
        .post(
            &path,
            r#"[{"jsonrpc":"2.0","id":1,"method":"test_text","params":[5]},{"jsonrpc":"2.0","id":2,"method":"test_text","params":[2]}]"#,
        )
        .await;
    assert_eq!(
        batch.text,
        format!("[{},{}]", expected("1", 5), expected("2", 2))
    );
    let mut ws = node.ws(&key).await;
    // (Over WS the answer is read as a JSON value, keys in any order.)
    let over_ws = ws.call(4, "test_text", json!([5])).await;
    assert_eq!(
        over_ws,
        serde_json::from_str::<Value>(&expected("4", 5)).unwrap()
    );

    // Large enough to be gzipped: the same text once unzipped.
    let body = r#"{"jsonrpc":"2.0","id":9,"method":"test_text","params":[3000]}"#;
    let headers = [
        ("content-type", "application/json"),
        ("accept-encoding", "gzip"),
    ];
    let zipped = http_with(node.addr(), "POST", &path, &headers, body.into()).await;
    assert_eq!(zipped.header("content-encoding").as_deref(), Some("gzip"));
    let text = gunzip(&zipped.raw);
    assert_eq!(text, expected("9", 3000));

    // Past the limit: the error jsonrpsee gives, single or in a batch.
    let too_big = node.call(&key, "test_text", json!([5000])).await;
    assert_eq!(too_big.error_code(), -32008, "{too_big:?}");
    let in_batch = node
        .post(
            &path,
            r#"[{"jsonrpc":"2.0","id":1,"method":"test_text","params":[5000]}]"#,
        )
        .await;
    assert_eq!(in_batch.json()[0]["error"]["code"], -32008, "{in_batch:?}");
    // The limit counts the whole answer: a result that fits only without the envelope too.
    let edge = node.call(&key, "test_text", json!([4096 - 10])).await;
    assert_eq!(edge.error_code(), -32008, "{edge:?}");
    node.server.stop();
}

#[tokio::test]
async fn method_policy_follows_the_network() {
    let hoodi = Node::start("policy-hoodi", "hoodi", |_| {}).await;
    let key = hoodi.add_key("erin", &[]).await;
    let reply = hoodi.call(&key, "eth_simulateV1", json!([{}])).await;
    assert_eq!(reply.error_code(), -32601);
    assert_eq!(
        reply.error_message(),
        "the method eth_simulateV1 is not available on hoodi"
    );
    hoodi.server.stop();

    for network in ["mainnet", "sepolia", "dev", "custom"] {
        let node = Node::start(&format!("policy-{network}"), network, |_| {}).await;
        let key = node.add_key("erin", &[]).await;
        assert_eq!(
            node.call(&key, "eth_simulateV1", json!([{}])).await.json()["result"],
            "simulated"
        );
        node.server.stop();
    }

    let allowed = Node::start("policy-allow", "hoodi", |args| {
        args.allow_methods = vec!["eth_simulateV1".to_string()]
    })
    .await;
    let key = allowed.add_key("erin", &[]).await;
    assert_eq!(
        allowed
            .call(&key, "eth_simulateV1", json!([{}]))
            .await
            .json()["result"],
        "simulated"
    );
    allowed.server.stop();
}

// ---------------------------------------------------------------------------------------------
// Rate limits

#[tokio::test]
async fn rate_limit_answers_429_then_recovers_after_the_backoff() {
    let node = Node::start("rate", "dev", |_| {}).await;
    let key = node.add_key("frank", &["--rps", "2", "--burst", "2"]).await;

    assert_eq!(node.call(&key, "test_echo", json!([1])).await.status, 200);
    assert_eq!(node.call(&key, "test_echo", json!([2])).await.status, 200);
    let limited = node.call(&key, "test_echo", json!([3])).await;
    assert_eq!(limited.status, 429, "{limited:?}");
    let body = limited.json();
    assert_eq!(body["id"], 1, "the error answers the request");
    assert_eq!(body["error"]["code"], -32005);
    assert_eq!(body["error"]["message"], "project ID request rate exceeded");
    assert_eq!(body["error"]["data"]["allowed_rps"], 2.0);
    let backoff = body["error"]["data"]["backoff_seconds"]
        .as_f64()
        .expect("backoff_seconds");
    assert!(backoff > 0.0 && backoff <= 0.5, "{backoff}");
    assert_eq!(
        limited
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );

    tokio::time::sleep(Duration::from_secs_f64(backoff + 0.02)).await;
    let recovered = node.call(&key, "test_echo", json!([4])).await;
    assert_eq!(recovered.status, 200, "{recovered:?}");

    // A request whose id the front door has to put right (sent on a second time inside) counts
    // once: the burst of two still holds two of them, and the third is refused with its id.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let path = format!("/v3/{key}");
    for id in ["-1", "-2", "-3"] {
        let reply = node
            .post(
                &path,
                &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"test_echo","params":[1]}}"#),
            )
            .await;
        if id == "-3" {
            assert_eq!(reply.status, 429, "{reply:?}");
            assert_eq!(reply.json()["id"], json!(-3), "{reply:?}");
            assert_eq!(reply.error_code(), -32005);
        } else {
            assert_eq!(reply.status, 200, "{id}: {reply:?}");
            assert_eq!(
                reply.text,
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":1}}"#)
            );
        }
    }

    // Limits can be changed while the node runs.
    keys_cli(node.dir.path(), &["limit", &key, "--rps", "0"]).expect("keys limit");
    node.keys_reloaded().await;
    for i in 0..20 {
        assert_eq!(node.call(&key, "test_echo", json!([i])).await.status, 200);
    }
    node.server.stop();
}

#[tokio::test]
async fn a_batch_counts_each_item() {
    let node = Node::start("rate-batch", "dev", |_| {}).await;
    let key = node.add_key("grace", &["--rps", "1", "--burst", "5"]).await;
    let path = format!("/v3/{key}");
    let batch = |ids: std::ops::Range<u32>| {
        Value::Array(
            ids.map(
                |id| json!({"jsonrpc": "2.0", "id": id, "method": "test_add", "params": [id, 1]}),
            )
            .collect(),
        )
        .to_string()
    };

    let first = node.post(&path, &batch(0..3)).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.json().as_array().map(Vec::len), Some(3));

    // Two tokens left: a batch of three is refused whole, each item answered with the error.
    let second = node.post(&path, &batch(10..13)).await;
    assert_eq!(second.status, 429, "{second:?}");
    let items = second.json();
    let items = items.as_array().expect("batch answer");
    assert_eq!(items.len(), 3);
    for (item, id) in items.iter().zip(10..) {
        assert_eq!(item["id"], id);
        assert_eq!(item["error"]["code"], -32005);
        assert_eq!(item["error"]["data"]["allowed_rps"], 1.0);
    }

    // The two tokens are still there for single calls.
    assert_eq!(node.call(&key, "test_echo", json!([1])).await.status, 200);
    assert_eq!(node.call(&key, "test_echo", json!([1])).await.status, 200);
    assert_eq!(node.call(&key, "test_echo", json!([1])).await.status, 429);
    node.server.stop();
}

#[tokio::test]
async fn daily_quota() {
    let node = Node::start("quota", "dev", |args| args.daily_quota = 2).await;
    let key = node.add_key("heidi", &[]).await;
    assert_eq!(node.call(&key, "test_echo", json!([1])).await.status, 200);
    assert_eq!(node.call(&key, "test_echo", json!([1])).await.status, 200);
    let over = node.call(&key, "test_echo", json!([1])).await;
    assert_eq!(over.status, 429);
    assert_eq!(over.error_code(), -32005);
    assert_eq!(over.json()["error"]["data"]["allowed_per_day"], 2);
    let backoff = over.json()["error"]["data"]["backoff_seconds"]
        .as_f64()
        .unwrap_or(-1.0);
    assert!(
        backoff > 0.0 && backoff <= 86_400.0,
        "seconds until UTC midnight: {backoff}"
    );
    node.server.stop();
}

// ---------------------------------------------------------------------------------------------
// WebSocket

#[tokio::test]
async fn a_method_that_panics_is_answered_and_the_connection_stays() {
    let node = Node::start("panic", "hoodi", |_| {}).await;
    let key = node.add_key("pat", &[]).await;

    for method in ["test_panic", "test_panic_later"] {
        let reply = node.call(&key, method, json!([])).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.error_code(), -32603, "{}", reply.text);
        assert!(reply.error_message().contains(method), "{}", reply.text);
    }
    // In a batch only the item that panicked fails.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "test_panic", "params": []},
        {"jsonrpc": "2.0", "id": 2, "method": "test_add", "params": [1, 2]},
    ]);
    let reply = node.post(&format!("/v3/{key}"), &batch.to_string()).await;
    let answers = reply.json();
    assert_eq!(answers[0]["error"]["code"], -32603, "{answers}");
    assert_eq!(answers[1]["result"], 3, "{answers}");

    // Over WebSocket the connection goes on after the failed call.
    let mut ws = node.ws(&key).await;
    let failed = ws.call(1, "test_panic_later", json!([])).await;
    assert_eq!(failed["id"], 1);
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    assert_eq!(
        ws.call(2, "test_add", json!([2, 3])).await,
        json!({"jsonrpc": "2.0", "id": 2, "result": 5})
    );
}

#[tokio::test]
async fn websocket_calls_limits_and_ping() {
    let node = Node::start("ws", "hoodi", |args| {
        args.max_request_size = 1024;
        args.max_ws_connections = 4;
    })
    .await;
    let key = node.add_key("ivan", &["--rps", "1", "--burst", "2"]).await;

    let mut ws = node.ws(&key).await;
    assert_eq!(
        ws.call(1, "test_add", json!([2, 3])).await,
        json!({"jsonrpc": "2.0", "id": 1, "result": 5})
    );
    let who = ws.call(2, "test_whoami", json!([])).await;
    assert_eq!(who["result"].as_str().map(str::len), Some(8));

    // Third message within the second: answered with the rate error, connection stays open.
    let limited = ws.call(3, "test_echo", json!(["x"])).await;
    assert_eq!(limited["id"], 3);
    assert_eq!(limited["error"]["code"], -32005);
    assert_eq!(
        limited["error"]["message"],
        "project ID request rate exceeded"
    );
    let backoff = limited["error"]["data"]["backoff_seconds"]
        .as_f64()
        .expect("backoff");
    tokio::time::sleep(Duration::from_secs_f64(backoff + 0.02)).await;
    assert_eq!(ws.call(4, "test_echo", json!(["y"])).await["result"], "y");

    // Other errors arrive in-band too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let policy = ws.call(5, "eth_simulateV1", json!([{}])).await;
    assert_eq!(policy["error"]["code"], -32601);
    ws.send("{not json".to_string()).await;
    assert_eq!(ws.recv().await["error"]["code"], -32700);
    ws.send(
        json!({"jsonrpc": "2.0", "id": 6, "method": "test_echo", "params": ["z".repeat(2000)]})
            .to_string(),
    )
    .await;
    assert_eq!(
        ws.recv().await["error"]["code"],
        -32007,
        "message size limit"
    );

    // Ping is answered with pong.
    ws.0.send(Message::Ping(Bytes::from_static(b"are you there")))
        .await
        .expect("ping");
    let pong = loop {
        match tokio::time::timeout(Duration::from_secs(5), ws.0.next())
            .await
            .expect("pong in time")
        {
            Some(Ok(Message::Pong(payload))) => break payload,
            Some(Ok(_)) => continue,
            other => panic!("no pong: {other:?}"),
        }
    };
    assert_eq!(&pong[..], b"are you there");

    // Connection limit: one key holds three of the four (429 past its share), another key
    // gets the last, and then the node is full (503).
    let mut second = node.ws(&key).await;
    let _third = node.ws(&key).await;
    let (status, body) = node.ws_refused(&format!("/ws/v3/{key}")).await;
    assert_eq!(status, 429);
    assert_eq!(body["error"]["code"], -32005);
    let other = node.add_key("ivy", &[]).await;
    let _fourth = node.ws(&other).await;
    let (status, body, headers) = node.ws_refusal(&format!("/ws/v3/{other}")).await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], -32005);
    assert_eq!(
        headers.get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    // Closing one frees its slot.
    ws.0.close(None).await.expect("close");
    drop(ws);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let url = format!("ws://{}/ws/v3/{key}", node.addr());
        if tokio_tungstenite::connect_async(url).await.is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "slot was not freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Revoking the key also refuses messages on connections opened before.
    keys_cli(node.dir.path(), &["revoke", &key]).expect("revoke");
    node.keys_reloaded().await;
    let refused = second.call(9, "test_echo", json!([1])).await;
    assert_eq!(refused["id"], 9);
    assert_eq!(refused["error"]["code"], -32001);
    assert_eq!(refused["error"]["message"], "project id revoked");
    node.server.stop();
}

// ---------------------------------------------------------------------------------------------
// Shutdown

/// Writes `request` as raw bytes on `stream` and reads the answer until it holds `until`, the
/// server closes, or `wait` passes.
async fn raw_exchange(
    stream: &mut tokio::net::TcpStream,
    request: &str,
    until: &str,
    wait: Duration,
) -> String {
    tokio::io::AsyncWriteExt::write_all(stream, request.as_bytes())
        .await
        .expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(wait, async {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).contains(until) {
            match tokio::io::AsyncReadExt::read(stream, &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A `test_sleep` of `ms` posted to `path` on its own task: a request held in flight.
fn sleep_request(
    addr: std::net::SocketAddr,
    path: &str,
    ms: u64,
) -> tokio::task::JoinHandle<Reply> {
    let path = path.to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "test_sleep", "params": [ms]});
    tokio::spawn(async move {
        http(
            addr,
            "POST",
            &path,
            Some("application/json"),
            body.to_string().into_bytes(),
        )
        .await
    })
}

/// `--rpc.max-connections` counts requests being served and open sockets together; past it a
/// request is answered 503 with a JSON-RPC error and Retry-After, not jsonrpsee's plain-text 429
/// (which reads as the key's rate limit). One key holds at most three quarters of them, so that
/// it cannot shut the other keys out (429 for it past its share).
#[tokio::test]
async fn requests_past_the_connection_cap_get_a_json_503() {
    let node = Node::start("conn-cap", "dev", |args| args.max_connections = 4).await;
    let keys = ["mallory", "niaj", "olivia"].map(|name| add_key(node.dir.path(), name, &[]));
    node.keys_reloaded().await;
    let addr = node.addr();
    let sleeping = |key: &str, ms: u64| sleep_request(addr, &format!("/v3/{key}"), ms);
    let mut busy: Vec<_> = (0..3).map(|_| sleeping(&keys[0], 600)).collect();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let over_share = sleeping(&keys[0], 0).await.expect("request task");
    assert_eq!(over_share.status, 429);
    assert_eq!(over_share.header("retry-after").as_deref(), Some("1"));
    let error = &over_share.json()["error"];
    assert_eq!(error["code"], -32005, "{error}");
    assert_eq!(
        error["message"],
        "too many connections for this key: at most 3 at once"
    );
    // Another key still gets the last slot; then the node is full for everyone.
    busy.push(sleeping(&keys[1], 600));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let refused = sleeping(&keys[2], 0).await.expect("request task");
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    let error = &refused.json()["error"];
    assert_eq!(error["code"], -32005, "{error}");
    assert_eq!(error["message"], "too many connections");
    assert_eq!(error["data"]["max_connections"], 4);
    for request in busy {
        assert_eq!(request.await.expect("request task").status, 200);
    }
    // Slots come back when the answers have gone.
    assert_eq!(
        sleeping(&keys[0], 0).await.expect("request task").status,
        200
    );
}

/// A body that stops arriving is given up on after `--http.read-timeout` (408), and its slot of
/// `--rpc.max-connections` comes back: clients that declare a body and send it no further
/// cannot hold every slot.
#[tokio::test]
async fn a_body_that_stops_arriving_times_out_and_frees_its_slot() {
    let node = Node::start("slow-body", "dev", |args| {
        args.max_connections = 4;
        args.read_timeout_secs = 1;
    })
    .await;
    let keys = ["peggy", "quentin"].map(|name| add_key(node.dir.path(), name, &[]));
    node.keys_reloaded().await;
    let stalled = |key: String| {
        let addr = node.addr();
        tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let head = format!(
                "POST /v3/{key} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
                 content-length: 1000\r\n\r\n{{\"jsonrpc\""
            );
            raw_exchange(&mut stream, &head, "-32600", Duration::from_secs(10)).await
        })
    };
    let started = Instant::now();
    let stalls: Vec<_> = (0..4).map(|i| stalled(keys[i % 2].clone())).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Every slot is held by a stalled body.
    let full = node
        .post(
            &format!("/v3/{}", keys[0]),
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#,
        )
        .await;
    assert_eq!(full.status, 503);
    for stall in stalls {
        let answer = stall.await.expect("stalled request");
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(
            answer.contains("request body not received within 1 s"),
            "{answer}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    let served = node
        .post(
            &format!("/v3/{}", keys[0]),
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#,
        )
        .await;
    assert_eq!(served.status, 200);
    node.server.stop();
}

/// A batch's calls share one run time (the node's `--rpc.evm-timeout`): a call that would
/// start after it is answered -32016 without running, so a batch of a hundred slow calls is
/// not a hundred times one call's time.
#[tokio::test]
async fn a_batch_shares_one_run_time() {
    let node = Node::start_configured(
        tempdir("batch-time"),
        "dev",
        |_| {},
        |config| {
            config.batch_timeout = Some(Duration::from_millis(300));
        },
    )
    .await;
    let key = node.add_key("rupert", &[]).await;
    let calls: Vec<Value> = (1..=4)
        .map(|id| json!({"jsonrpc": "2.0", "id": id, "method": "test_sleep", "params": [200]}))
        .collect();
    let started = Instant::now();
    let reply = node
        .post(&format!("/v3/{key}"), &json!(calls).to_string())
        .await;
    assert!(
        started.elapsed() < Duration::from_millis(1_000),
        "{:?}",
        started.elapsed()
    );
    let answers = reply.json();
    let answers = answers.as_array().expect("a batch answer");
    assert_eq!(answers.len(), 4);
    // Two calls started within the 300 ms; the others did not run.
    assert_eq!(answers[0]["result"], 200, "{answers:?}");
    assert_eq!(answers[1]["result"], 200, "{answers:?}");
    for late in &answers[2..] {
        assert_eq!(late["error"]["code"], -32016, "{late}");
        assert!(
            late["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("batch timeout"),
            "{late}"
        );
    }
    node.server.stop();
}

/// A WebSocket client that sends without reading has at most a few dozen answers waiting on
/// the server (its next requests wait for it to read); every request is still answered once
/// it reads.
#[tokio::test]
async fn a_websocket_that_does_not_read_is_answered_once_it_does() {
    let node = Node::start("ws-unread", "dev", |_| {}).await;
    let key = node.add_key("sybil", &[]).await;
    let mut ws = node.ws(&key).await;
    let sent = 4 * simnode::rpc::WS_UNREAD_ANSWERS as u64;
    let word = "w".repeat(10_000);
    for id in 0..sent {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "test_echo", "params": [word]});
        ws.send(call.to_string()).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut ids = Vec::new();
    for _ in 0..sent {
        let answer = ws.recv().await;
        assert_eq!(answer["result"], json!(word), "{}", answer["id"]);
        ids.push(answer["id"].as_u64().expect("id"));
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..sent).collect::<Vec<_>>());
    node.server.stop();
}

#[tokio::test]
async fn graceful_shutdown_finishes_requests_in_flight() {
    let node = Node::start("shutdown", "dev", |_| {}).await;
    let key = node.add_key("judy", &[]).await;
    let addr = node.addr();

    let in_flight = sleep_request(addr, &format!("/v3/{key}"), 500);
    tokio::time::sleep(Duration::from_millis(100)).await;

    node.server.stop();
    let reply = in_flight.await.expect("request task");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["result"], 500);
    tokio::time::timeout(Duration::from_secs(5), node.server.stopped())
        .await
        .expect("server stops");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}

// ---------------------------------------------------------------------------------------------
// Metrics

#[tokio::test]
async fn prometheus_metrics() {
    // Pick a free port for the metrics listener.
    let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port");
    let dir = tempdir("metrics");
    let args = RpcArgs {
        http_port: 0,
        ..RpcArgs::default()
    };
    let mut config = RpcConfig::from_args(&args, Some(dir.path()), "dev", Some(metrics_addr));
    config.key_refresh = Duration::from_millis(50);
    let key = add_key(dir.path(), "mallory", &[]);
    let server = rpc::start(config, test_methods())
        .await
        .expect("server starts");
    let node = Node { server, dir };

    assert_eq!(node.call(&key, "test_echo", json!([1])).await.status, 200);
    assert_eq!(
        node.call(&key, "no_such", json!([])).await.error_code(),
        -32601
    );
    assert_eq!(node.call("bad", "test_echo", json!([1])).await.status, 401);
    rpc::metrics::set_head_block(42);
    rpc::metrics::record_block_gas(30_000_000, Duration::from_millis(100));
    rpc::metrics::record_storage_tries(Some(simnode::store::StorageTriesKept {
        slots: 1234,
        dropped: 5,
    }));

    let scrape = http(metrics_addr, "GET", "/metrics", None, Vec::new()).await;
    assert_eq!(scrape.status, 200);
    let text = scrape.text;
    for needle in [
        r#"simnode_rpc_requests_total{method="test_echo",transport="http",code="ok"} 1"#,
        r#"simnode_rpc_errors_total{method="unknown",code="-32601"} 1"#,
        r#"simnode_rpc_request_duration_seconds_bucket{method="test_echo""#,
        r#"simnode_http_responses_total{status="401"} 1"#,
        "simnode_rpc_key_requests_total{key=",
        "simnode_head_block 42",
        "simnode_import_gas_per_second 300000000",
        "simnode_storage_trie_slots 1234",
        "simnode_storage_tries_dropped 5",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
    node.server.stop();
}

/// Connections are dealt to the RPC thread with the fewest and counted there until they close;
/// a WebSocket connection keeps counting after its upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_spread_over_the_rpc_threads_and_counted_until_closed() {
    let node = Node::start("threads", "dev", |args| args.threads = 2).await;
    let key = node.add_key("threads", &[]).await;
    let settle = |want: Vec<usize>| {
        let server = &node.server;
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            loop {
                let now = server.thread_connections();
                if now == want {
                    return;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "connections per thread {now:?}, expected {want:?}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    settle(vec![0, 0]).await;
    let mut first = node.ws(&key).await;
    assert_eq!(
        first.call(1, "test_echo", json!(["a"])).await["result"],
        "a"
    );
    let mut second = node.ws(&key).await;
    assert_eq!(
        second.call(1, "test_echo", json!(["b"])).await["result"],
        "b"
    );
    settle(vec![1, 1]).await;
    // An HTTP request on its own connection (closed after the answer) comes and goes.
    assert_eq!(node.call(&key, "test_echo", json!(["d"])).await.status, 200);
    settle(vec![1, 1]).await;
    drop(first);
    let mut counts = node.server.thread_connections();
    counts.sort();
    // The close reaches the server asynchronously.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while counts != vec![0, 1] {
        assert!(
            std::time::Instant::now() < deadline,
            "after a close: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        counts = node.server.thread_connections();
        counts.sort();
    }
    assert_eq!(
        second.call(2, "test_echo", json!(["c"])).await["result"],
        "c"
    );
}

/// An HTTP/1.1 request names its host once (RFC 9112 §3.2): without a Host header, or with
/// two, it is 400; HTTP/1.0 may leave it out.
#[tokio::test]
async fn requests_name_their_host_once() {
    let node = Node::start("host-header", "dev", |_| {}).await;
    let key = node.add_key("gus", &[]).await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"test_echo","params":[1]}"#;
    for (version, hosts, status) in [
        ("1.1", "", "400"),
        ("1.1", "host: a\r\nhost: b\r\n", "400"),
        ("1.1", "host: a\r\n", "200"),
        ("1.0", "", "200"),
    ] {
        let mut stream = tokio::net::TcpStream::connect(node.addr())
            .await
            .expect("connect");
        let request = format!(
            "POST /v3/{key} HTTP/{version}\r\n{hosts}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let answer = raw_exchange(&mut stream, &request, "}", Duration::from_secs(5)).await;
        // (hyper answers an HTTP/1.0 request in HTTP/1.0.)
        assert_eq!(
            answer.split(' ').nth(1),
            Some(status),
            "{version} {hosts:?}: {answer}"
        );
    }
    node.server.stop();
}

/// A WebSocket upgrade with a wrong handshake is refused as RFC 6455 says (400; 426 with the
/// version this server speaks), in JSON: jsonrpsee answered these 200 with a line of text.
#[tokio::test]
async fn websocket_handshakes_are_checked() {
    let node = Node::start("ws-handshake", "dev", |_| {}).await;
    let key = node.add_key("erin", &[]).await;
    let upgrade = |headers: &str| {
        format!(
            "GET /ws/v3/{key} HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\n{headers}\r\n"
        )
    };
    for (headers, status) in [
        ("sec-websocket-version: 13\r\n", "400"),
        (
            "sec-websocket-version: 13\r\nsec-websocket-key: short\r\n",
            "400",
        ),
        (
            "sec-websocket-version: 8\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
            "426",
        ),
        ("sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "426"),
        (
            "sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
            "101",
        ),
    ] {
        let mut stream = tokio::net::TcpStream::connect(node.addr())
            .await
            .expect("connect");
        let answer = raw_exchange(
            &mut stream,
            &upgrade(headers),
            "\r\n\r\n",
            Duration::from_secs(5),
        )
        .await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{headers:?}: {answer}"
        );
        if status == "426" {
            assert!(
                answer.to_lowercase().contains("sec-websocket-version: 13"),
                "{answer}"
            );
        }
    }
    node.server.stop();
}

/// A keep-alive connection that carries nothing for `--http.idle-timeout` is closed; one in
/// use stays open.
#[tokio::test]
async fn idle_connections_are_closed() {
    let node = Node::start("idle", "dev", |args| args.idle_timeout_secs = 1).await;
    let key = node.add_key("fay", &[]).await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"test_echo","params":[1]}"#;
    let request = format!(
        "POST /v3/{key} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let connect = || tokio::net::TcpStream::connect(node.addr());
    let (mut idle, mut busy) = (
        connect().await.expect("connect"),
        connect().await.expect("connect"),
    );
    for stream in [&mut idle, &mut busy] {
        let answer = raw_exchange(stream, &request, "}", Duration::from_secs(5)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    // The busy one asks every 400 ms for 2.4 s, past the idle one's limit.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let answer = raw_exchange(&mut busy, &request, "}", Duration::from_secs(5)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut idle, &mut buf),
    )
    .await
    .expect("closed in time");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    node.server.stop();
}
