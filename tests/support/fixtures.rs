//! The `.io` fixture runner: load request/response pairs, send them to an endpoint, compare
//! exactly (error messages aside), and report per method with a short diff per failing file.
//!
//! One runner serves three uses: the conformance tests (which fail on any fixture of a method
//! we serve), `just conformance DIR` (every fixture under DIR, served or not, as a table), and
//! the runner's own self-test (a proxy that breaks one receipt field must make it fail).

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use serde_json::Value;

use super::{conformance_dir, http_post, Node};

/// How a failure starts when the node answered "method not found" where the fixture expects
/// an answer.
const NOT_SERVED: &str = "method not found (-32601)";

/// Somewhere JSON-RPC bodies can be POSTed: a node, or a proxy in front of one.
pub trait Endpoint {
    fn post(&self, body: &str) -> std::io::Result<(u16, String)>;
}

impl Endpoint for Node {
    fn post(&self, body: &str) -> std::io::Result<(u16, String)> {
        self.try_rpc_raw(body)
    }
}

/// One `.io` file: comments, and request/expected-response pairs.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub path: PathBuf,
    /// `speconly`: hive checks only the response's schema; here, only that both sides
    /// agree on result versus error.
    pub spec_only: bool,
    pub exchanges: Vec<(String, String)>,
}

impl Fixture {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut exchanges = Vec::new();
        let mut pending: Option<String> = None;
        let mut spec_only = false;
        for line in text.lines() {
            if let Some(comment) = line.strip_prefix("//") {
                if comment.trim_start().starts_with("speconly") {
                    spec_only = true;
                }
            } else if let Some(req) = line.strip_prefix(">> ") {
                if pending.is_some() {
                    return Err(format!(
                        "{}: two requests without a response",
                        path.display()
                    ));
                }
                pending = Some(req.to_owned());
            } else if let Some(resp) = line.strip_prefix("<< ") {
                let req = pending
                    .take()
                    .ok_or_else(|| format!("{}: response without request", path.display()))?;
                exchanges.push((req, resp.to_owned()));
            }
        }
        if exchanges.is_empty() {
            return Err(format!("{}: no exchanges", path.display()));
        }
        Ok(Self {
            path: path.to_owned(),
            spec_only,
            exchanges,
        })
    }

    /// Sends every request to `to` and compares; `Err` holds a short description.
    pub fn replay(&self, to: &dyn Endpoint) -> Result<(), String> {
        for (req, expected) in &self.exchanges {
            let (status, got) = to.post(req).map_err(|e| format!("request failed: {e}"))?;
            let got_v: Value = serde_json::from_str(&got)
                .map_err(|e| format!("HTTP {status}, answer not JSON ({e}): {}", clip(&got)))?;
            let exp_v: Value =
                serde_json::from_str(expected).map_err(|e| format!("fixture not JSON: {e}"))?;
            let strict = std::env::var_os("SIMNODE_CONFORMANCE_STRICT").is_some();
            compare_responses(&exp_v, &got_v, self.spec_only && !strict).map_err(|why| {
                if got_v["error"]["code"] == -32601 && exp_v["error"]["code"] != -32601 {
                    format!("{NOT_SERVED}: {why}")
                } else {
                    why
                }
            })?;
        }
        Ok(())
    }
}

/// Compares a response with the expected one: exact JSON equality, except that when both
/// carry an `error`, its `message` is not compared. With `spec_only`, only the kind of answer
/// (result or error) must agree.
pub fn compare_responses(expected: &Value, got: &Value, spec_only: bool) -> Result<(), String> {
    let (mut e, mut g) = (expected.clone(), got.clone());
    let both_errors = e.get("error").is_some() && g.get("error").is_some();
    if both_errors {
        if let Some(o) = e["error"].as_object_mut() {
            o.remove("message");
        }
        if let Some(o) = g["error"].as_object_mut() {
            o.remove("message");
        }
    }
    if spec_only {
        let kind = |v: &Value| (v.get("result").is_some(), v.get("error").is_some());
        if kind(&e) == kind(&g) && (both_errors || e.get("result").is_some()) {
            return Ok(());
        }
        return Err(format!(
            "speconly: expected {}, got {}",
            clip(&expected.to_string()),
            clip(&got.to_string())
        ));
    }
    json_difference(&e, &g).map_or(Ok(()), Err)
}

/// The first place where `got` differs from `expected` (exact JSON equality), if any.
pub fn json_difference(expected: &Value, got: &Value) -> Option<String> {
    first_difference(expected, got, "$")
}

fn first_difference(e: &Value, g: &Value, path: &str) -> Option<String> {
    match (e, g) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                match b.get(k) {
                    None => {
                        return Some(format!(
                            "{path}.{k}: missing (expected {})",
                            clip(&v.to_string())
                        ))
                    }
                    Some(w) => {
                        if let Some(d) = first_difference(v, w, &format!("{path}.{k}")) {
                            return Some(d);
                        }
                    }
                }
            }
            b.iter()
                .find(|(k, _)| !a.contains_key(*k))
                .map(|(k, w)| format!("{path}.{k}: unexpected field = {}", clip(&w.to_string())))
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                if let Some(d) = first_difference(v, w, &format!("{path}[{i}]")) {
                    return Some(d);
                }
            }
            (a.len() != b.len())
                .then(|| format!("{path}: expected {} items, got {}", a.len(), b.len()))
        }
        _ if e == g => None,
        _ => Some(format!(
            "{path}: expected {}, got {}",
            clip(&e.to_string()),
            clip(&g.to_string())
        )),
    }
}

fn clip(s: &str) -> String {
    if s.len() <= 300 {
        s.to_owned()
    } else {
        let mut end = 300;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} bytes)", &s[..end], s.len())
    }
}

/// The `.io` files of one method folder of the conformance directory, sorted by name.
pub fn fixture_files(method: &str) -> Vec<PathBuf> {
    let dir = conformance_dir().join(method);
    let files = io_files(&dir);
    assert!(
        !files.is_empty(),
        "no .io fixtures in {}; set SIMNODE_CONFORMANCE_DIR",
        dir.display()
    );
    files
}

/// The `.io` files directly in `dir` whose path contains the value of the environment
/// variable `filter_var` (all when it is unset), sorted by name; fails when there are none.
pub fn io_files_filtered(dir: &Path, filter_var: &str) -> Vec<PathBuf> {
    let filter = std::env::var(filter_var).ok();
    let files: Vec<PathBuf> = io_files(dir)
        .into_iter()
        .filter(|p| {
            filter
                .as_deref()
                .is_none_or(|f| p.to_string_lossy().contains(f))
        })
        .collect();
    assert!(
        !files.is_empty(),
        "no .io fixtures in {}{}",
        dir.display(),
        filter.map_or(String::new(), |f| format!(" matching {filter_var}={f}"))
    );
    files
}

/// The `.io` files directly in `dir`, sorted by name (none if `dir` cannot be read).
fn io_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "io"))
        .collect();
    files.sort();
    files
}

/// Every folder under `root` (at any depth) that holds `.io` files, with its files, sorted by
/// path: the folder's path relative to `root` names the group (the method, in the
/// execution-apis layout). Folders starting with `_` or `.` (specs, hidden) are skipped.
pub fn fixture_groups(root: &Path) -> Vec<(String, Vec<PathBuf>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<PathBuf>)>) {
        let files = io_files(dir);
        if !files.is_empty() {
            let name = dir
                .strip_prefix(root)
                .ok()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| ".".to_owned(), |p| p.display().to_string());
            out.push((name, files));
        }
        let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| !n.starts_with('_') && !n.starts_with('.'))
            })
            .collect();
        subdirs.sort();
        for sub in subdirs {
            walk(root, &sub, out);
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

/// One method's results.
#[derive(Debug, Default, Clone)]
pub struct MethodResult {
    pub method: String,
    pub passed: usize,
    /// File and why it failed.
    pub failures: Vec<(PathBuf, String)>,
    /// Failures whose answer was "method not found" (-32601): the method is not served.
    pub not_served: usize,
}

/// Outcome of replaying fixture groups.
#[derive(Debug, Default)]
pub struct Report {
    pub root: PathBuf,
    pub methods: Vec<MethodResult>,
}

impl Report {
    pub fn failures(&self) -> impl Iterator<Item = (&str, &Path, &str)> {
        self.methods.iter().flat_map(|m| {
            m.failures
                .iter()
                .map(move |(p, why)| (m.method.as_str(), p.as_path(), why.as_str()))
        })
    }

    pub fn method(&self, name: &str) -> Option<&MethodResult> {
        self.methods.iter().find(|m| m.method == name)
    }

    /// The per-method table, then each failing file with its first difference.
    pub fn table(&self) -> String {
        let mut s = format!("fixtures under {}\n\n", self.root.display());
        s.push_str("| method | passed | failed | note |\n| --- | ---: | ---: | --- |\n");
        let (mut passed, mut failed) = (0, 0);
        for m in &self.methods {
            let note = if m.not_served == m.failures.len() && m.not_served > 0 {
                "not served (-32601)"
            } else {
                ""
            };
            s.push_str(&format!(
                "| {} | {} | {} | {note} |\n",
                m.method,
                m.passed,
                m.failures.len()
            ));
            passed += m.passed;
            failed += m.failures.len();
        }
        s.push_str(&format!("| **total** | {passed} | {failed} | |\n"));
        for (_, path, why) in self.failures() {
            let name = path.strip_prefix(&self.root).unwrap_or(path);
            s.push_str(&format!("FAIL {}: {why}\n", name.display()));
        }
        s
    }

    /// Panics (with the table) if any fixture of the given methods failed, or if one of them
    /// had no fixtures at all.
    pub fn assert_passed(&self, methods: &[&str]) {
        eprintln!("{}", self.table());
        let mut problems = Vec::new();
        for name in methods {
            match self.method(name) {
                None => problems.push(format!("{name}: no fixtures found")),
                Some(m) => problems.extend(m.failures.iter().map(|(p, why)| {
                    let file = p.strip_prefix(&self.root).unwrap_or(p);
                    format!("{}: {why}", file.display())
                })),
            }
        }
        assert!(
            problems.is_empty(),
            "{} problem(s) in methods that must pass:\n{}",
            problems.len(),
            problems.join("\n")
        );
    }

    /// Panics unless every fixture replayed passed.
    pub fn assert_all_passed(&self) {
        let names: Vec<&str> = self.methods.iter().map(|m| m.method.as_str()).collect();
        self.assert_passed(&names);
    }
}

/// Replays `groups` against `to`, in order, one file after another.
pub fn replay_groups(to: &dyn Endpoint, root: &Path, groups: &[(String, Vec<PathBuf>)]) -> Report {
    let mut report = Report {
        root: root.to_owned(),
        methods: Vec::new(),
    };
    for (method, files) in groups {
        let mut result = MethodResult {
            method: method.clone(),
            ..Default::default()
        };
        for file in files {
            match Fixture::load(file).and_then(|f| f.replay(to)) {
                Ok(()) => result.passed += 1,
                Err(why) => {
                    if why.starts_with(NOT_SERVED) {
                        result.not_served += 1;
                    }
                    result.failures.push((file.clone(), why));
                }
            }
        }
        report.methods.push(result);
    }
    report
}

/// Replays every fixture of each method folder of the conformance directory, in order.
pub fn replay_methods(to: &dyn Endpoint, methods: &[&str]) -> Report {
    let groups: Vec<(String, Vec<PathBuf>)> = methods
        .iter()
        .map(|m| (m.to_string(), fixture_files(m)))
        .collect();
    replay_groups(to, &conformance_dir(), &groups)
}

/// Replays every fixture under `root`, whatever its method.
pub fn replay_dir(to: &dyn Endpoint, root: &Path) -> Report {
    replay_groups(to, root, &fixture_groups(root))
}

// ---------------------------------------------------------------------------------------------
// A tampering proxy, for testing that the runner catches broken answers
// ---------------------------------------------------------------------------------------------

/// Rewrites a JSON-RPC response, given the request it answers.
pub type Tamper = dyn Fn(&Value, &mut Value) + Send + Sync;

/// An HTTP proxy in front of a node that passes every request through and lets `tamper`
/// rewrite the JSON answers on the way back. One request per connection, like the harness's
/// client. Runs until the test process ends.
pub struct TamperingProxy {
    addr: SocketAddr,
    path: String,
}

impl TamperingProxy {
    pub fn start(upstream: SocketAddr, path: &str, tamper: Arc<Tamper>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let upstream_path = path.to_owned();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let tamper = tamper.clone();
                let path = upstream_path.clone();
                std::thread::spawn(move || {
                    let _ = serve_one(stream, upstream, &path, &*tamper);
                });
            }
        });
        Self {
            addr,
            path: path.to_owned(),
        }
    }
}

impl Endpoint for TamperingProxy {
    fn post(&self, body: &str) -> std::io::Result<(u16, String)> {
        http_post(
            self.addr,
            &self.path,
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
    }
}

fn serve_one(
    stream: TcpStream,
    upstream: SocketAddr,
    path: &str,
    tamper: &Tamper,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut content_length = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((k, v)) = trimmed.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                content_length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; content_length];
    reader.read_exact(&mut body)?;
    let (status, answer) = http_post(
        upstream,
        path,
        &[("Content-Type", "application/json")],
        &body,
    )?;
    let answer = match (
        serde_json::from_slice::<Value>(&body),
        serde_json::from_str::<Value>(&answer),
    ) {
        (Ok(request), Ok(mut response)) => {
            tamper(&request, &mut response);
            response.to_string()
        }
        _ => answer,
    };
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    )?;
    out.flush()
}
