//! Shared end-to-end harness: import the execution-apis test chain with the built binary,
//! start `simnode node` on free ports, talk JSON-RPC over HTTP (and the Engine API with a
//! JWT), and replay `.io` fixture files.
//!
//! Everything goes through the binary the way a user would run it; nothing here links the
//! node's library. Only std and crates the root package already depends on are used.

#![allow(dead_code)]

mod fixtures;
pub mod mutate;
pub use fixtures::*;

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use serde_json::{json, Value};

/// The `simnode` binary Cargo built for this test run.
pub fn simnode_bin() -> &'static str {
    env!("CARGO_BIN_EXE_simnode")
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The execution-apis fixture directory: `$SIMNODE_CONFORMANCE_DIR`, or
/// `../shared/conformance/execution-apis` next to the repository (the rule the modules' own
/// tests follow too).
pub use simnode_api::testing::conformance_dir;

/// reth's trace_callMany answers on the execution-apis chain: `$SIMNODE_RETH_TRACE_DIR`, or
/// `../shared/conformance/reth-trace` next to the repository.
pub fn reth_trace_dir() -> PathBuf {
    match std::env::var_os("SIMNODE_RETH_TRACE_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => repo_root().join("../shared/conformance/reth-trace"),
    }
}

/// Where the execution-apis chain (`genesis.json`, `chain.rlp`, `headfcu.json`) is: the
/// conformance directory when it holds one (the execution-apis layout), else
/// `$SIMNODE_CONFORMANCE_CHAIN`, else `../shared/conformance/execution-apis`. This lets
/// `just conformance DIR` replay a folder of fixtures recorded on that chain elsewhere.
pub fn chain_dir() -> PathBuf {
    let dir = conformance_dir();
    if dir.join("genesis.json").is_file() {
        return dir;
    }
    match std::env::var_os("SIMNODE_CONFORMANCE_CHAIN").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => repo_root().join("../shared/conformance/execution-apis"),
    }
}

/// `genesis.json` of the execution-apis chain.
pub fn execution_apis_genesis() -> PathBuf {
    chain_dir().join("genesis.json")
}

// ---------------------------------------------------------------------------------------------
// Temporary directories
// ---------------------------------------------------------------------------------------------

/// A directory removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> Self {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{prefix}-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A directory for something a test process keeps until it exits (a chain imported once into
/// a `static`). Statics are never dropped, so instead each process first removes the
/// directories earlier processes made under the same prefix once those processes are gone.
pub fn process_dir(prefix: &str) -> PathBuf {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    // Liveness comes from /proc; without it nothing is swept rather than risk a live one.
    if Path::new("/proc/self").exists() {
        for entry in std::fs::read_dir(&base).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix(prefix))
                .and_then(|rest| rest.strip_prefix('-'))
                .and_then(|pid| pid.parse::<u32>().ok());
            if let Some(pid) = pid {
                if !Path::new("/proc").join(pid.to_string()).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
    let dir = base.join(format!("{prefix}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Runs `simnode import` of the execution-apis `chain.rlp` into [`process_dir`]`(prefix)`,
/// for a test process that opens the chain once and keeps it.
pub fn import_into_process_dir(prefix: &str) -> Result<PathBuf, String> {
    let dir = process_dir(prefix);
    let out = Command::new(simnode_bin())
        .arg("import")
        .arg("--chain")
        .arg(execution_apis_genesis())
        .arg("--datadir")
        .arg(&dir)
        .arg(chain_dir().join("chain.rlp"))
        .output()
        .map_err(|e| format!("running {}: {e}", simnode_bin()))?;
    if !out.status.success() {
        return Err(format!(
            "simnode import failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(dir)
}

/// Runs `simnode import` of the execution-apis `chain.rlp` into a datadir and returns a
/// fresh copy of it. The import itself runs once per test process; every caller gets its own
/// copy so that nodes never share a database.
pub fn import_execution_apis_chain() -> TempDir {
    static IMPORTED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let template = IMPORTED.get_or_init(|| import_into_process_dir("execution-apis-datadir"));
    let template = match template {
        Ok(dir) => dir,
        Err(e) => panic!("{e}"),
    };
    let copy = TempDir::new("datadir");
    copy_dir(template, copy.path()).expect("copy imported datadir");
    copy
}

// ---------------------------------------------------------------------------------------------
// The node process
// ---------------------------------------------------------------------------------------------

/// A port nothing listens on now and that this process has not handed out before: the OS may
/// offer a just-released port again at once, and two nodes (or a node's HTTP and Engine API)
/// given the same one fail to start.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// The API key the harness starts nodes with.
pub const TEST_API_KEY: &str = "conformance0123456789abcdef0123456789";

/// A running `simnode node`, killed when dropped.
pub struct Node {
    child: Child,
    pub http_port: u16,
    pub auth_port: u16,
    pub api_key: String,
    jwt_secret: [u8; 32],
    log_path: PathBuf,
    datadir: TempDir,
    _scratch: TempDir,
}

impl Node {
    /// Starts the node on `datadir` for the execution-apis chain with `extra` arguments and
    /// waits until it answers JSON-RPC.
    pub fn start(datadir: TempDir, chain: &Path, extra: &[&str]) -> Self {
        let scratch = TempDir::new("node-scratch");
        let mut jwt_secret = [0u8; 32];
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(7);
        for (i, b) in jwt_secret.iter_mut().enumerate() {
            *b = (seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(i as u128 * 1442695040888963407)
                >> 64) as u8
                ^ (i as u8).wrapping_mul(31);
        }
        let jwt_path = scratch.path().join("jwt.hex");
        std::fs::write(&jwt_path, hex_encode(&jwt_secret)).expect("write jwt secret");
        let log_path = scratch.path().join("node.log");
        let log = std::fs::File::create(&log_path).expect("create node log");
        let http_port = free_port();
        let auth_port = free_port();
        let child = Command::new(simnode_bin())
            .arg("node")
            .arg("--chain")
            .arg(chain)
            .arg("--datadir")
            .arg(datadir.path())
            .args(["--http.port", &http_port.to_string()])
            .args(["--authrpc.port", &auth_port.to_string()])
            .arg("--authrpc.jwtsecret")
            .arg(&jwt_path)
            .args(["--api-key", TEST_API_KEY])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("spawn simnode node");
        let mut node = Self {
            child,
            http_port,
            auth_port,
            api_key: TEST_API_KEY.to_owned(),
            jwt_secret,
            log_path,
            datadir,
            _scratch: scratch,
        };
        node.wait_ready(Duration::from_secs(60));
        node
    }

    /// Imports the execution-apis chain, starts a node on it and sends `headfcu.json` over the
    /// Engine API so that safe and finalized are set, as hive does.
    pub fn execution_apis(extra: &[&str]) -> Self {
        let node = Self::start(
            import_execution_apis_chain(),
            &execution_apis_genesis(),
            extra,
        );
        node.send_head_forkchoice();
        node
    }

    /// Sends the execution-apis chain's `headfcu.json` (head, safe and finalized: block 54)
    /// over the Engine API and checks that it is accepted.
    pub fn send_head_forkchoice(&self) {
        let fcu =
            std::fs::read_to_string(chain_dir().join("headfcu.json")).expect("read headfcu.json");
        // The Engine API may come up a moment after the HTTP server.
        let deadline = Instant::now() + Duration::from_secs(30);
        let answer = loop {
            let addr = SocketAddr::from(([127, 0, 0, 1], self.auth_port));
            if TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
                || Instant::now() > deadline
            {
                break self.engine_raw(&fcu);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let v: Value = serde_json::from_str(&answer.1)
            .unwrap_or_else(|e| panic!("forkchoiceUpdated answer not JSON ({e}): {}", answer.1));
        let status = &v["result"]["payloadStatus"]["status"];
        assert_eq!(
            status,
            "VALID",
            "forkchoiceUpdated to the chain head: {v}\nnode log:\n{}",
            self.log()
        );
    }

    fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("simnode node exited early ({status}); log:\n{}", self.log());
            }
            if let Ok((200, body)) =
                self.try_rpc_raw(r#"{"jsonrpc":"2.0","id":0,"method":"eth_chainId","params":[]}"#)
            {
                if body.contains("\"result\"") {
                    return;
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "simnode node did not answer within {timeout:?}; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the node and hands its datadir back, to start another node on it.
    pub fn stop(mut self) -> TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.datadir, TempDir::new("stopped-node"))
    }

    /// The node's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time the node's process has used so far, in clock ticks (user plus system, from
    /// /proc: Linux only).
    /// The datadir the node runs on.
    pub fn datadir(&self) -> &Path {
        self.datadir.path()
    }

    pub fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .expect("reading /proc/PID/stat");
        // Fields after the parenthesised command name; utime and stime are the 14th and 15th
        // fields of the whole line.
        let rest = &stat[stat.rfind(')').expect("stat line") + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let tick = |i: usize| fields[i - 3].parse::<u64>().expect("a tick count");
        tick(14) + tick(15)
    }

    /// What the node wrote to stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn http_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.http_port))
    }

    /// `http://127.0.0.1:PORT/v3/KEY`
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v3/{}", self.http_port, self.api_key)
    }

    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}/ws/v3/{}", self.http_port, self.api_key)
    }

    /// POSTs a raw body to `/v3/<key>`; returns HTTP status and body.
    pub fn rpc_raw(&self, body: &str) -> (u16, String) {
        self.try_rpc_raw(body)
            .unwrap_or_else(|e| panic!("HTTP request failed: {e}"))
    }

    pub fn try_rpc_raw(&self, body: &str) -> std::io::Result<(u16, String)> {
        let path = format!("/v3/{}", self.api_key);
        http_post(
            self.http_addr(),
            &path,
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
    }

    /// Calls `method` and returns the whole JSON-RPC response object.
    pub fn call(&self, method: &str, params: Value) -> Value {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let (status, text) = self.rpc_raw(&body);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method}: HTTP {status}, not JSON ({e}): {text}"))
    }

    /// Calls `method` on the Engine API (authenticated) and returns the JSON answer.
    pub fn engine_call(&self, method: &str, params: Value) -> Value {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let (status, text) = self.engine_raw(&body);
        assert_eq!(status, 200, "{method}: {text}");
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method}: HTTP {status}, not JSON ({e}): {text}"))
    }

    /// Calls `method` and returns its `result`, panicking on an error answer.
    pub fn result(&self, method: &str, params: Value) -> Value {
        let v = self.call(method, params);
        match v.get("error") {
            Some(err) => panic!("{method} failed: {err}"),
            None => v["result"].clone(),
        }
    }

    /// POSTs a raw body to the Engine API port with a fresh HS256 JWT.
    pub fn engine_raw(&self, body: &str) -> (u16, String) {
        self.try_engine_raw(body)
            .unwrap_or_else(|e| panic!("Engine API request failed: {e}"))
    }

    /// POSTs `body` to the Engine API with a fresh token.
    pub fn try_engine_raw(&self, body: &str) -> std::io::Result<(u16, String)> {
        let token = jwt_hs256(&self.jwt_secret);
        let auth = format!("Bearer {token}");
        let addr = SocketAddr::from(([127, 0, 0, 1], self.auth_port));
        http_post(
            addr,
            "/",
            &[
                ("Content-Type", "application/json"),
                ("Authorization", &auth),
            ],
            body.as_bytes(),
        )
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Minimal HTTP/1.1 client (one request per connection)
// ---------------------------------------------------------------------------------------------

pub fn http_post(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    http_request(addr, "POST", path, headers, body)
}

pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(req.as_bytes())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_http_response(&raw)
}

fn parse_http_response(raw: &[u8]) -> std::io::Result<(u16, String)> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_owned());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no header end"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut body = raw[split + 4..].to_vec();
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad("no status line"))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let line_end = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or_else(|| bad("bad chunk"))?;
            let size_str = String::from_utf8_lossy(&rest[..line_end]).to_string();
            let size = usize::from_str_radix(size_str.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| bad("bad chunk size"))?;
            rest = &rest[line_end + 2..];
            if size == 0 {
                break;
            }
            if rest.len() < size {
                return Err(bad("short chunk"));
            }
            out.extend_from_slice(&rest[..size]);
            rest = rest.get(size + 2..).unwrap_or(&[]);
        }
        body = out;
    }
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

// ---------------------------------------------------------------------------------------------
// Engine API JWT (HS256), with SHA-256 from revm's precompile crate
// ---------------------------------------------------------------------------------------------

fn sha256(data: &[u8]) -> [u8; 32] {
    let out = revm::precompile::hash::sha256_run(data, u64::MAX).expect("sha256");
    let mut h = [0u8; 32];
    h.copy_from_slice(&out.bytes);
    h
}

fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&sha256(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner: Vec<u8> = k.iter().map(|b| b ^ 0x36).collect();
    inner.extend_from_slice(msg);
    let mut outer: Vec<u8> = k.iter().map(|b| b ^ 0x5c).collect();
    outer.extend_from_slice(&sha256(&inner));
    sha256(&outer)
}

fn base64url(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

pub fn hex_encode(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first key of the test mnemonic (`test test ... junk`), funded on the dev chain.
/// The head (block 54) of the execution-apis chain.
pub const EXECUTION_APIS_HEAD: &str =
    "0xd226371d0b1551adb03fb52b71f08e3e11247fe9b1af994768af8cdaa8e7dcd7";

/// A validator's proposal on the execution-apis head over the Engine API: the forkchoice state
/// naming the head, Osaka payload attributes 12 s after it (a withdrawal of 1 gwei to 0xaa),
/// and their beacon root.
pub fn proposal_on_execution_apis_head() -> (Value, Value, String) {
    let head = EXECUTION_APIS_HEAD;
    let state = json!({"headBlockHash": head, "safeBlockHash": head, "finalizedBlockHash": head});
    let beacon_root = format!("0x{}", "11".repeat(32));
    let attributes = json!({
        "timestamp": "0x230",
        "prevRandao": format!("0x{}", "22".repeat(32)),
        "suggestedFeeRecipient": "0x00000000000000000000000000000000000000fe",
        "withdrawals": [{"index": "0x0", "validatorIndex": "0x5",
            "address": "0x00000000000000000000000000000000000000aa", "amount": "0x3b9aca00"}],
        "parentBeaconBlockRoot": beacon_root,
    });
    (state, attributes, beacon_root)
}

pub const DEV_KEY0: &str = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

/// `tx` signed with [`DEV_KEY0`], as `eth_sendRawTransaction` takes it (0x-hex EIP-2718 bytes).
pub fn sign_with_dev_key(tx: alloy::consensus::TxEip1559) -> String {
    use alloy::consensus::SignableTransaction;
    use alloy::eips::Encodable2718;
    let sig = dev_key_signature(tx.signature_hash());
    let envelope = alloy::consensus::TxEnvelope::from(tx.into_signed(sig));
    format!("0x{}", hex_encode(&envelope.encoded_2718()))
}

/// A legacy transfer of 1 wei signed with [`DEV_KEY0`] without a chain id (before EIP-155,
/// valid on every chain), as eth_sendRawTransaction takes it.
pub fn unprotected_transfer_from_dev_key(nonce: u64, gas_price: u128) -> String {
    use alloy::consensus::SignableTransaction;
    use alloy::eips::Encodable2718;
    let tx = alloy::consensus::TxLegacy {
        chain_id: None,
        nonce,
        gas_price,
        gas_limit: 21_000,
        to: alloy::primitives::TxKind::Call(alloy::primitives::Address::repeat_byte(0x77)),
        value: alloy::primitives::U256::from(1),
        input: Default::default(),
    };
    let sig = dev_key_signature(tx.signature_hash());
    let envelope = alloy::consensus::TxEnvelope::from(tx.into_signed(sig));
    format!("0x{}", hex_encode(&envelope.encoded_2718()))
}

/// A transaction from [`DEV_KEY0`]'s account on chain `chain_id`: nonce `nonce`, to `to` (none:
/// a creation), `value` wei, `input` (hex without 0x), 200,000 gas at a 10 gwei fee cap and a
/// 1 gwei tip; signed, as eth_sendRawTransaction takes it.
pub fn dev_tx_on(
    chain_id: u64,
    nonce: u64,
    to: Option<alloy::primitives::Address>,
    value: u128,
    input: &str,
) -> String {
    use alloy::primitives::{Bytes, TxKind, U256};
    sign_with_dev_key(alloy::consensus::TxEip1559 {
        chain_id,
        nonce,
        gas_limit: 200_000,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: to.map_or(TxKind::Create, TxKind::Call),
        value: U256::from(value),
        input: Bytes::from(alloy::hex::decode(input).expect("hex input")),
        ..Default::default()
    })
}

/// [`dev_tx_on`] the dev chain (id 1337).
pub fn dev_tx(
    nonce: u64,
    to: Option<alloy::primitives::Address>,
    value: u128,
    input: &str,
) -> String {
    dev_tx_on(1337, nonce, to, value, input)
}

/// The receipt of `hash` once a block holds it (within 10 s).
pub fn wait_for_receipt(node: &Node, hash: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let receipt = node.result("eth_getTransactionReceipt", json!([hash]));
        if !receipt.is_null() {
            return receipt;
        }
        assert!(
            Instant::now() < deadline,
            "no receipt for {hash}; log:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The all-zero blob's KZG commitment, and each of its proofs: the point at infinity
/// (compressed, 0xc0 then zeros). With it a sidecar is valid without a KZG library.
pub fn infinity_point() -> alloy::primitives::FixedBytes<48> {
    let mut point = [0u8; 48];
    point[0] = 0xc0;
    point.into()
}

/// The versioned hash of the all-zero blob (of [`infinity_point`]).
pub fn zero_blob_versioned_hash() -> alloy::primitives::B256 {
    alloy::eips::eip4844::kzg_to_versioned_hash(infinity_point().as_slice())
}

/// The form a blob transaction is sent in.
#[derive(Debug, Clone, Copy)]
pub enum BlobForm {
    /// As a block carries it, without its sidecar.
    Bare,
    /// With an EIP-7594 sidecar of this many cell proofs (128 a blob make it whole).
    CellProofs(usize),
    /// With a whole EIP-7594 sidecar whose cell proofs are points of the curve but prove
    /// nothing (the group's generator).
    FalseCellProofs,
}

/// The compressed generator of BLS12-381's G1: a valid point, and no blob's KZG proof.
fn g1_generator() -> alloy::primitives::FixedBytes<48> {
    alloy::primitives::fixed_bytes!(
        "97f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb"
    )
}

/// A blob transaction from [`DEV_KEY0`]'s account on the dev chain (id 1337): nonce `nonce`, 1
/// wei to 0x..b10b, an all-zero blob under each of `versioned`, in `form`. Signed, as
/// eth_sendRawTransaction takes it.
pub fn dev_blob_tx(nonce: u64, versioned: &[alloy::primitives::B256], form: BlobForm) -> String {
    use alloy::eips::{
        eip4844::Blob,
        eip7594::{
            BlobTransactionSidecarEip7594, BlobTransactionSidecarVariant, CELLS_PER_EXT_BLOB,
        },
    };
    let blobs = versioned.len();
    let cell_proofs = |proofs, proof| {
        BlobTransactionSidecarVariant::Eip7594(BlobTransactionSidecarEip7594 {
            blobs: vec![Blob::ZERO; blobs],
            commitments: vec![infinity_point(); blobs],
            cell_proofs: vec![proof; proofs],
        })
    };
    let sidecar = match form {
        BlobForm::Bare => None,
        BlobForm::CellProofs(proofs) => Some(cell_proofs(proofs, infinity_point())),
        BlobForm::FalseCellProofs => Some(cell_proofs(blobs * CELLS_PER_EXT_BLOB, g1_generator())),
    };
    signed_blob_tx(nonce, versioned.to_vec(), sidecar)
}

/// [`dev_blob_tx`] carrying `sidecar`, under the versioned hashes of its commitments.
pub fn dev_blob_tx_with(
    nonce: u64,
    sidecar: alloy::eips::eip7594::BlobTransactionSidecarVariant,
) -> String {
    signed_blob_tx(nonce, sidecar.versioned_hashes().collect(), Some(sidecar))
}

fn signed_blob_tx(
    nonce: u64,
    versioned: Vec<alloy::primitives::B256>,
    sidecar: Option<alloy::eips::eip7594::BlobTransactionSidecarVariant>,
) -> String {
    use alloy::{
        consensus::{
            SignableTransaction, TxEip4844, TxEip4844Variant, TxEip4844WithSidecar, TxEnvelope,
        },
        eips::Encodable2718,
        primitives::{address, U256},
    };
    let tx = TxEip4844 {
        chain_id: 1337,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: address!("000000000000000000000000000000000000b10b"),
        value: U256::from(1u64),
        blob_versioned_hashes: versioned,
        max_fee_per_blob_gas: 10_000_000_000,
        ..Default::default()
    };
    let variant = match sidecar {
        Some(sidecar) => {
            TxEip4844Variant::TxEip4844WithSidecar(TxEip4844WithSidecar { tx, sidecar })
        }
        None => TxEip4844Variant::TxEip4844(tx),
    };
    let sig = dev_key_signature(variant.signature_hash());
    let envelope = TxEnvelope::Eip4844(variant.into_signed(sig));
    format!("0x{}", hex_encode(&envelope.encoded_2718()))
}

/// [`DEV_KEY0`]'s signature of a transaction's signature hash.
pub fn dev_key_signature(hash: alloy::primitives::B256) -> alloy::primitives::Signature {
    let key = k256::ecdsa::SigningKey::from_slice(
        &alloy::primitives::hex::decode(DEV_KEY0).expect("hex key"),
    )
    .expect("a valid key");
    let (sig, recid) = key
        .sign_prehash_recoverable(hash.as_slice())
        .expect("signing");
    alloy::primitives::Signature::from((sig, recid))
}

/// An Engine API token: HS256 over `{"iat": now}`.
pub fn jwt_hs256(secret: &[u8]) -> String {
    let iat = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let header = base64url(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = base64url(format!(r#"{{"iat":{iat}}}"#).as_bytes());
    let signing_input = format!("{header}.{claims}");
    let sig = base64url(&hmac_sha256(secret, signing_input.as_bytes()));
    format!("{signing_input}.{sig}")
}

#[cfg(test)]
mod harness_tests {
    use super::*;

    #[test]
    fn jwt_signature_matches_rfc4231_hmac() {
        // RFC 4231 test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex_encode(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(base64url(b"\xfb\xff"), "-_8");
    }

    #[test]
    fn compare_ignores_error_messages_only() {
        let e = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"a"}});
        let g = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"b"}});
        assert!(compare_responses(&e, &g, false).is_ok());
        let g2 = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"a"}});
        assert!(compare_responses(&e, &g2, false).is_err());
        let r = json!({"jsonrpc":"2.0","id":1,"result":{"a":["0x1"]}});
        let r2 = json!({"jsonrpc":"2.0","id":1,"result":{"a":["0x2"]}});
        assert!(compare_responses(&r, &r2, false)
            .unwrap_err()
            .contains("$.result.a[0]"));
        assert!(compare_responses(&r, &r2, true).is_ok());
        assert!(compare_responses(&r, &e, true).is_err());
    }
}
