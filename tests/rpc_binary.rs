//! The front door through the real binary: `simnode node --chain dev --dev` prints ready-made
//! URLs with a fresh key, `simnode keys add/revoke` work while it runs, the statuses a client
//! sees over HTTP and WebSocket, and SIGTERM shuts it down cleanly.

mod support;

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{free_port, http_request, simnode_bin, TempDir};
use tokio_tungstenite::tungstenite::Message;

/// A `simnode node` whose stdout is read line by line.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(datadir: &TempDir, http_port: u16, extra: &[&str]) -> Self {
        let engine_port = free_port().to_string();
        let mut args = vec!["--authrpc.port", &engine_port];
        args.extend_from_slice(extra);
        Self::start_without_engine_port(datadir, http_port, &args)
    }

    fn start_without_engine_port(datadir: &TempDir, http_port: u16, extra: &[&str]) -> Self {
        let mut child = Command::new(simnode_bin())
            .args(["node", "--chain", "dev", "--dev", "--datadir"])
            .arg(datadir.path())
            .args(["--http.port", &http_port.to_string()])
            .arg("--authrpc.jwtsecret")
            .arg(datadir.path().join("jwt.hex"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn simnode node");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a stdout line starting with `prefix` and returns the rest.
    fn line(&mut self, prefix: &str) -> String {
        if let Some(line) = self.seen.iter().find(|l| l.starts_with(prefix)) {
            return line[prefix.len()..].trim().to_string();
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push(line.clone());
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.trim().to_string();
            }
        }
        panic!("no line starting with {prefix:?}; got {:?}", self.seen);
    }

    fn terminate(&mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "node did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A node on a fresh datadir and port, with the key it printed, once it answers.
fn answering(name: &str) -> (TempDir, u16, Running, String) {
    let datadir = TempDir::new(name);
    let port = free_port();
    let mut node = Running::start(&datadir, port, &[]);
    let key = node.line("API key:");
    eventually("first answer", || chain_id(port, &key).0 == 200);
    (datadir, port, node, key)
}

fn post(port: u16, path: &str, content_type: Option<&str>, body: &str) -> (u16, Value) {
    let headers: Vec<(&str, &str)> = content_type
        .map(|ct| ("Content-Type", ct))
        .into_iter()
        .collect();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (status, text) =
        http_request(addr, "POST", path, &headers, body.as_bytes()).expect("HTTP request");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// `METHOD /health?query` without a key: status and body (JSON where it parses).
fn health(port: u16, method: &str, query: &str) -> (u16, Value) {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (status, text) =
        http_request(addr, method, &format!("/health{query}"), &[], b"").expect("HTTP request");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn chain_id(port: u16, key: &str) -> (u16, Value) {
    post(
        port,
        &format!("/v3/{key}"),
        Some("application/json"),
        r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#,
    )
}

fn keys(datadir: &TempDir, args: &[&str]) -> String {
    let out = Command::new(simnode_bin())
        .arg("keys")
        .args(args)
        .arg("--datadir")
        .arg(datadir.path())
        .output()
        .expect("simnode keys");
    assert!(
        out.status.success(),
        "simnode keys {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls until `f` holds (a key change reaches a running node within about a second).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "{what} did not happen");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn dev_node_front_door_end_to_end() {
    let datadir = TempDir::new("rpc-binary");
    let port = free_port();
    let mut node = Running::start(
        &datadir,
        port,
        &["--rpc.rate-limit", "5", "--rpc.rate-burst", "5"],
    );

    // --dev with no stored key creates one and prints the URLs.
    let key = node.line("API key:");
    assert_eq!(key.len(), 32, "{key}");
    assert_eq!(
        node.line("HTTP:"),
        format!("http://127.0.0.1:{port}/v3/{key}")
    );
    assert_eq!(
        node.line("WS:"),
        format!("ws://127.0.0.1:{port}/ws/v3/{key}")
    );
    eventually("first answer", || chain_id(port, &key).0 == 200);
    assert_eq!(chain_id(port, &key).1["result"], "0x539");

    // Doors and keys.
    let (status, body) = post(port, "/", Some("application/json"), "{}");
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!(-32600))
    );
    let (status, body) = post(port, "/v3/", Some("application/json"), "{}");
    assert_eq!(
        (status, body["error"]["message"].clone()),
        (401, json!("project id required in the URL"))
    );
    let (status, body) = chain_id(port, "ffffffffffffffffffffffffffffffff");
    assert_eq!(
        (status, body["error"]["message"].clone()),
        (401, json!("invalid project id"))
    );
    let (status, _) = post(port, &format!("/v3/{key}"), None, "{}");
    assert_eq!(status, 415);

    // `simnode keys add` while the node runs: the new key works within about a second.
    let added = keys(&datadir, &["add", "second"]);
    let second = added.lines().next().expect("key line").trim().to_string();
    eventually("added key accepted", || chain_id(port, &second).0 == 200);
    assert!(keys(&datadir, &["list"]).contains("second"));

    // Rate limit (5/s, burst 5): the sixth request at once is refused with 429, then recovers.
    let mut statuses = Vec::new();
    let mut limited = Value::Null;
    for _ in 0..8 {
        let (status, body) = chain_id(port, &second);
        if status == 429 {
            limited = body;
        }
        statuses.push(status);
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    assert_eq!(limited["error"]["code"], -32005);
    assert_eq!(limited["error"]["data"]["allowed_rps"], 5.0);
    let backoff = limited["error"]["data"]["backoff_seconds"]
        .as_f64()
        .expect("backoff");
    std::thread::sleep(Duration::from_secs_f64(backoff + 0.05));
    assert_eq!(chain_id(port, &second).0, 200);

    // WebSocket on the same port.
    let ws_url = format!("ws://127.0.0.1:{port}/ws/v3/{key}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let answer = runtime.block_on(async {
        let (mut ws, _) = tokio_tungstenite::connect_async(ws_url)
            .await
            .expect("ws connect");
        let request = json!({"jsonrpc": "2.0", "id": 7, "method": "eth_chainId", "params": []});
        ws.send(Message::Text(request.to_string().into()))
            .await
            .expect("ws send");
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(text))) => {
                    break serde_json::from_str::<Value>(text.as_str()).expect("json")
                }
                Some(Ok(_)) => continue,
                other => panic!("ws: {other:?}"),
            }
        }
    });
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": 7, "result": "0x539"})
    );

    // Revoking by id: 401 "project id revoked" within about a second.
    let id = added
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("id")
        .to_string();
    assert!(keys(&datadir, &["revoke", &id]).contains("revoked"));
    eventually("revoked key refused", || {
        let (status, body) = chain_id(port, &second);
        status == 401 && body["error"]["message"] == "project id revoked"
    });

    // SIGTERM: clean exit, port closed.
    let status = node.terminate();
    assert!(status.success(), "exit status {status}");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

/// A parameter that does not decode is answered -32602 with the argument (and field) named,
/// for the real methods of the eth module.
/// `/health` for load balancers: no key, the head it serves, 400 for a query it does not
/// take, and no quota spent (the key below allows 2 requests and still has them after).
#[test]
fn health_needs_no_key_and_reports_the_head() {
    let datadir = TempDir::new("rpc-health");
    let port = free_port();
    let mut node = Running::start(
        &datadir,
        port,
        &["--rpc.rate-limit", "1", "--rpc.rate-burst", "2"],
    );
    let key = node.line("API key:");
    eventually("health", || health(port, "GET", "").0 == 200);
    for _ in 0..20 {
        let (status, body) = health(port, "GET", "");
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["status"], "ok", "{body}");
        assert_eq!(body["syncing"], false, "{body}");
    }
    // The dev genesis is dated 1970 and --dev mines only for transactions: its head is stale
    // to a balancer that asks for a recent one.
    let (status, body) = health(port, "GET", "?max_head_age=3600");
    assert!(
        body["head"]["ageSeconds"].as_u64().unwrap() > 3600,
        "{body}"
    );
    assert_eq!((status, &body["status"]), (503, &json!("stale")), "{body}");
    let (_, body) = health(port, "GET", "");
    let (status, block) = post(
        port,
        &format!("/v3/{key}"),
        Some("application/json"),
        r#"{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}"#,
    );
    assert_eq!(status, 200, "{block}");
    let block = &block["result"];
    let number = u64::from_str_radix(
        block["number"].as_str().unwrap().trim_start_matches("0x"),
        16,
    )
    .unwrap();
    assert_eq!(body["head"]["number"], number, "{body}");
    assert_eq!(body["head"]["hash"], block["hash"], "{body}");
    let timestamp = u64::from_str_radix(
        block["timestamp"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    assert_eq!(body["head"]["timestamp"], timestamp, "{body}");
    assert!(body["head"]["ageSeconds"].is_u64(), "{body}");
    assert_eq!(
        chain_id(port, &key).0,
        200,
        "the key's second request is still allowed"
    );

    let (status, body) = health(port, "HEAD", "");
    assert_eq!((status, body), (200, Value::String(String::new())));
    let (status, body) = health(port, "GET", "?max_head_age=soon");
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("max_head_age"),
        "{body}"
    );
    let (status, body) = health(port, "GET", "?verbose=1");
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        health(port, "POST", "").0,
        405,
        "a served path, the wrong method"
    );
}

#[test]
fn invalid_params_name_the_argument() {
    let (_datadir, port, _node, key) = answering("rpc-binary-params");
    let call = |method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (_, answer) = post(
            port,
            &format!("/v3/{key}"),
            Some("application/json"),
            &body.to_string(),
        );
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let m = call("eth_getBalance", json!(["0x1234", "latest"]));
    assert!(m.starts_with("invalid argument 0: "), "{m}");
    let m = call(
        "eth_call",
        json!([{"to": "0x000000000000000000000000000000000000dEaD", "value": "0xzz"}, "latest"]),
    );
    assert!(m.starts_with("invalid argument 0 (value): "), "{m}");
    // The accounts methods read their request through a `Value` (its blob fields apart).
    let m = call(
        "eth_sendTransaction",
        json!([{"from": "0x000000000000000000000000000000000000dEaD", "gas": "lots"}]),
    );
    assert!(m.starts_with("invalid argument 0 (gas): "), "{m}");
    let m = call(
        "eth_getStorageAt",
        json!(["0x000000000000000000000000000000000000dEaD", "0x0", "nope"]),
    );
    assert!(m.contains("\"nope\""), "{m}");
}

/// A client that sent half a request does not hold up SIGTERM: the node waits its grace for
/// open requests, then drops the connection and exits cleanly.
#[test]
fn shutdown_does_not_wait_for_ever_on_an_unfinished_request() {
    use std::io::Write;
    let (_datadir, port, mut node, key) = answering("rpc-binary-stuck");
    let mut stuck = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        stuck,
        "POST /v3/{key} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
    )
    .expect("half a request");
    stuck.flush().expect("flush");
    // The request has reached the server (a complete one on another connection is answered
    // after it was sent).
    assert_eq!(chain_id(port, &key).0, 200);
    let started = Instant::now();
    let status = node.terminate();
    assert!(status.success(), "exit status {status}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "exit took {:?}",
        started.elapsed()
    );
    drop(stuck);
}

/// Two dev nodes side by side need only different HTTP ports: when the default Engine API port
/// is taken, a dev node not given one takes a free port and prints it.
#[test]
fn a_dev_node_takes_a_free_engine_port_when_the_default_is_taken() {
    // Held for the test if free; if the bind fails, something else holds it, which is the same.
    let _default = std::net::TcpListener::bind(("127.0.0.1", 8551)).ok();
    let datadir = TempDir::new("rpc-binary-engine-port");
    let port = free_port();
    let mut node = Running::start_without_engine_port(&datadir, port, &[]);
    let key = node.line("API key:");
    let engine = node.line("Engine API:");
    let engine_port: u16 = engine
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {engine:?}"));
    assert_ne!(engine_port, 8551, "{engine}");
    eventually("first answer", || chain_id(port, &key).0 == 200);
    // The printed port is the Engine API's: it asks for the JWT.
    let (status, _) = http_request(
        std::net::SocketAddr::from(([127, 0, 0, 1], engine_port)),
        "POST",
        "/",
        &[("Content-Type", "application/json")],
        br#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#,
    )
    .expect("Engine API request");
    assert_eq!(status, 401);
}

/// A port that was asked for is not swapped for another: a taken one stops the node with an
/// error that names the flag to change.
#[test]
fn a_taken_port_that_was_asked_for_stops_the_node_naming_the_flag() {
    let held = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let held_port = held.local_addr().expect("addr").port().to_string();
    let datadir = TempDir::new("rpc-binary-taken-port");
    let run = |flags: &[&str]| {
        let output = Command::new(simnode_bin())
            .args(["node", "--chain", "dev", "--dev", "--datadir"])
            .arg(datadir.path())
            .args(flags)
            .stdin(Stdio::null())
            .output()
            .expect("run simnode node");
        assert!(!output.status.success(), "started on a taken port");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let free = free_port().to_string();
    let engine = run(&["--http.port", &free, "--authrpc.port", &held_port]);
    assert!(engine.contains("--authrpc.port"), "{engine}");
    let http = run(&["--http.port", &held_port, "--authrpc.port", &free]);
    assert!(http.contains("--http.port"), "{http}");
}

/// A mistyped path is an error, not an empty answer or a new directory: `keys list` and
/// `keys add` of a datadir that does not exist (a key added there no node would read), and
/// `import` of a file that does not exist (which leaves no datadir behind).
#[test]
fn mistyped_paths_are_errors() {
    let scratch = TempDir::new("rpc-binary-paths");
    let missing = scratch.path().join("no-such-datadir");
    for keys in [&["keys", "list"][..], &["keys", "add", "alice"]] {
        let out = Command::new(simnode_bin())
            .args(keys)
            .arg("--datadir")
            .arg(&missing)
            .output()
            .expect("run simnode keys");
        assert!(!out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no datadir at"),
            "{out:?}"
        );
        assert!(!missing.exists(), "{keys:?} made the datadir");
    }

    let out = Command::new(simnode_bin())
        .args(["import", "--chain", "dev", "--datadir"])
        .arg(&missing)
        .arg(scratch.path().join("no-such-chain.rlp"))
        .output()
        .expect("run import");
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot read"),
        "{out:?}"
    );
    assert!(!missing.exists(), "the datadir was created");
}

/// A key revoked while its WebSocket stays open stops receiving its subscriptions' pushes,
/// not only answers to new requests.
#[test]
fn a_revoked_key_stops_receiving_its_subscriptions() {
    let (datadir, port, _node, key) = answering("rpc-binary-revoked-ws");
    let other = keys(&datadir, &["add", "miner"])
        .lines()
        .next()
        .expect("a key")
        .to_string();
    eventually("the second key works", || chain_id(port, &other).0 == 200);
    let mine = |n: usize| {
        for _ in 0..n {
            let (status, body) = post(
                port,
                &format!("/v3/{other}"),
                Some("application/json"),
                r#"{"jsonrpc":"2.0","id":1,"method":"evm_mine","params":[]}"#,
            );
            assert_eq!(status, 200, "{body}");
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let url = format!("ws://127.0.0.1:{port}/ws/v3/{key}");
        let (mut ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("ws connect");
        let request =
            json!({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]});
        ws.send(Message::Text(request.to_string().into()))
            .await
            .expect("ws send");
        // Messages within `wait`, as JSON.
        async fn read(
            ws: &mut (impl StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
                      + Unpin),
            wait: Duration,
        ) -> Vec<Value> {
            let mut out = Vec::new();
            while let Ok(Some(Ok(message))) = tokio::time::timeout(wait, ws.next()).await {
                if let Message::Text(text) = message {
                    out.push(serde_json::from_str(text.as_str()).expect("json"));
                }
            }
            out
        }
        let heads = |messages: &[Value]| {
            messages
                .iter()
                .filter(|m| m["method"] == "eth_subscription")
                .count()
        };
        let answer = read(&mut ws, Duration::from_millis(500)).await;
        assert!(
            answer
                .iter()
                .any(|m| m["id"] == 1 && m["result"].is_string()),
            "{answer:?}"
        );

        mine(1);
        let before = read(&mut ws, Duration::from_millis(1_000)).await;
        assert_eq!(
            heads(&before),
            1,
            "a head while the key is good: {before:?}"
        );

        keys(&datadir, &["revoke", &key]);
        // Revoked once a request on this socket is refused.
        let mut refused = false;
        for id in 2..100 {
            let request =
                json!({"jsonrpc": "2.0", "id": id, "method": "eth_chainId", "params": []});
            ws.send(Message::Text(request.to_string().into()))
                .await
                .expect("ws send");
            let got = read(&mut ws, Duration::from_millis(200)).await;
            if got.iter().any(|m| m["error"]["code"] == -32001) {
                refused = true;
                break;
            }
        }
        assert!(refused, "the revocation never reached the socket");
        mine(2);
        let after = read(&mut ws, Duration::from_millis(1_000)).await;
        assert_eq!(heads(&after), 0, "heads after the revocation: {after:?}");
    });
}

/// Limits that would make the node refuse everything, or that it cannot honour, are refused
/// when it starts, with the flag named (clap's usage error, exit code 2), before any datadir
/// is touched.
#[test]
fn unusable_limits_are_refused_at_start() {
    for (flag, value) in [
        ("--rpc.max-connections", "0"),
        ("--ws.max-connections", "0"),
        ("--rpc.max-request-size", "0"),
        ("--rpc.max-response-size", "0"),
        ("--rpc.max-batch-size", "0"),
        ("--rpc.threads", "100000"),
        ("--ws.ping-interval", "18446744073709551615"),
        ("--api-key", "ÄÖ"),
    ] {
        let scratch = TempDir::new("refused-limit");
        let datadir = scratch.path().join("dd");
        let out = Command::new(env!("CARGO_BIN_EXE_simnode"))
            .args(["node", "--dev", "--datadir"])
            .arg(&datadir)
            .args([flag, value])
            .output()
            .expect("run simnode");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(flag), "{flag} {value}: {stderr}");
        assert!(!datadir.exists(), "{flag} {value} made the datadir");
    }
}

/// With `--log.format json` the reason a command stops is a JSON line too.
#[test]
fn a_fatal_error_is_a_json_line_with_json_logs() {
    let scratch = TempDir::new("json-fatal");
    let out = Command::new(env!("CARGO_BIN_EXE_simnode"))
        .args([
            "--log.format",
            "json",
            "import",
            "--chain",
            "dev",
            "--datadir",
        ])
        .arg(scratch.path().join("dd"))
        .arg(scratch.path().join("no-such-chain.rlp"))
        .output()
        .expect("run simnode");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let last = lines.last().unwrap_or_else(|| panic!("nothing logged"));
    assert_eq!(last["level"], "ERROR", "{last}");
    assert!(
        last["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot read"),
        "{last}"
    );
}
