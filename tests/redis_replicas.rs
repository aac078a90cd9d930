//! Two `simnode node --dev` replicas sharing keys, limits and usage in one Redis
//! (`--keys-backend redis`): the rate limit holds across both, a revocation made through the CLI
//! reaches both, usage adds up, and stopping Redis makes both fail closed (503) until it returns.
//!
//! Needs `redis-server` on PATH (`.ci/run` installs Debian's package); without it this test
//! fails rather than skips.

mod support;

use std::{
    net::{SocketAddr, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::{json, Value};
use support::{free_port, http_post, http_request, simnode_bin, TempDir};

/// A child process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `redis-server` on a loopback port, persisting to `dir` only when told to `SAVE`.
struct Redis {
    port: u16,
    dir: TempDir,
    proc: Option<Proc>,
}

impl Redis {
    fn start() -> Self {
        let mut redis = Self {
            port: free_port(),
            dir: TempDir::new("redis"),
            proc: None,
        };
        redis.spawn();
        redis
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start redis-server ({e}): this test needs it on PATH \
                     (apt-get install redis-server; .ci/run installs it)"
                )
            });
        self.proc = Some(Proc(child));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ping = redis::Client::open(self.url())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con));
            if ping.is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Saves the data set, then kills the server (as a crash would, after a snapshot).
    fn stop(&mut self) {
        let mut con = redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to redis");
        redis::cmd("SAVE")
            .query::<()>(&mut con)
            .expect("redis SAVE");
        self.proc = None;
    }
}

/// `simnode keys ARGS... --keys-backend redis --redis-url URL`, returning stdout.
fn keys_cli(redis: &Redis, args: &[&str]) -> String {
    let out = Command::new(simnode_bin())
        .arg("keys")
        .args(args)
        .args(["--keys-backend", "redis", "--redis-url", &redis.url()])
        .output()
        .expect("run simnode keys");
    assert!(
        out.status.success(),
        "simnode keys {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn add_key(redis: &Redis, name: &str, limits: &[&str]) -> String {
    let mut args = vec!["add", name];
    args.extend_from_slice(limits);
    let out = keys_cli(redis, &args);
    let key = out.lines().next().unwrap_or_default().trim().to_string();
    assert_eq!(key.len(), 32, "unexpected `keys add` output: {out}");
    key
}

/// `keys usage KEY` as method -> (requests, errors), plus the total line.
fn usage(redis: &Redis, key: &str) -> Vec<(String, u64, u64)> {
    keys_cli(redis, &["usage", key])
        .lines()
        .skip(2)
        .filter_map(|line| {
            let mut cols = line.split_whitespace();
            let method = cols.next()?.to_string();
            let requests = cols.next()?.parse().ok()?;
            let errors = cols.next()?.parse().ok()?;
            Some((method, requests, errors))
        })
        .collect()
}

struct Replica {
    port: u16,
    _proc: Proc,
    _datadir: TempDir,
}

impl Replica {
    fn start(redis: &Redis, probe_key: &str, extra: &[&str]) -> Self {
        let datadir = TempDir::new("replica");
        let port = free_port();
        let child = Command::new(simnode_bin())
            .args(["node", "--chain", "dev", "--dev", "--datadir"])
            .arg(datadir.path())
            .args(["--http.port", &port.to_string()])
            .args(["--authrpc.port", &free_port().to_string()])
            .arg("--authrpc.jwtsecret")
            .arg(datadir.path().join("jwt.hex"))
            .args(["--keys-backend", "redis", "--redis-url", &redis.url()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn simnode node");
        let replica = Self {
            port,
            _proc: Proc(child),
            _datadir: datadir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while replica.chain_id(probe_key).0 != 200 {
            assert!(
                Instant::now() < deadline,
                "replica on port {port} did not come up"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        replica
    }

    fn post(&self, key: &str, body: &Value) -> (u16, Value) {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        match http_post(
            addr,
            &format!("/v3/{key}"),
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        ) {
            Ok((status, text)) => (status, serde_json::from_str(&text).unwrap_or(Value::Null)),
            Err(_) => (0, Value::Null),
        }
    }

    /// `GET /health`: status and `status` field.
    fn health(&self) -> (u16, Value) {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        match http_request(addr, "GET", "/health", &[], b"") {
            Ok((status, text)) => (status, serde_json::from_str(&text).unwrap_or(Value::Null)),
            Err(_) => (0, Value::Null),
        }
    }

    fn chain_id(&self, key: &str) -> (u16, Value) {
        self.post(
            key,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}),
        )
    }
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    loop {
        if done() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < timeout,
            "{what}: not within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_replicas_share_keys_limits_and_usage_in_redis() {
    let mut redis = Redis::start();
    let probe = add_key(&redis, "probe", &["--rps", "0"]);
    let replicas = [
        Replica::start(&redis, &probe, &[]),
        Replica::start(&redis, &probe, &[]),
    ];
    // A third one that fails open for keys it has seen (the probe key, while starting).
    let lenient = Replica::start(&redis, &probe, &["--redis.fail-open"]);

    // --- The rate limit holds across both replicas: 5/s, burst 5.
    let limited = add_key(&redis, "limited", &["--rps", "5", "--burst", "5"]);
    let started = Instant::now();
    let window = Duration::from_secs(2);
    let mut accepted = [0u64; 2];
    let mut refused = [0u64; 2];
    let mut i = 0usize;
    while started.elapsed() < window {
        let (status, body) = replicas[i % 2].chain_id(&limited);
        match status {
            200 => {
                assert_eq!(body["result"], "0x539", "{body}");
                accepted[i % 2] += 1;
            }
            429 => {
                assert_eq!(body["error"]["code"], -32005, "{body}");
                refused[i % 2] += 1;
            }
            other => panic!("unexpected status {other}: {body}"),
        }
        i += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let total: u64 = accepted.iter().sum();
    eprintln!("in {elapsed:.2}s: accepted {accepted:?}, refused {refused:?}");
    // Burst plus what the rate refills over the window (plus one for a refill at the edge).
    let bound = 5.0 + 5.0 * elapsed + 1.0;
    assert!(
        (total as f64) <= bound,
        "accepted {total} ({accepted:?}) in {elapsed:.2}s across both replicas; limit allows {bound:.1}"
    );
    assert!(
        total >= 5,
        "the burst must be served: accepted {accepted:?}"
    );
    assert!(
        accepted.iter().all(|&a| a > 0) && refused.iter().all(|&r| r > 0),
        "both replicas serve and refuse: accepted {accepted:?}, refused {refused:?}"
    );

    // --- Usage adds up across replicas (counted in the background: poll a little).
    let counted = add_key(&redis, "counted", &["--rps", "0"]);
    for _ in 0..3 {
        assert_eq!(replicas[0].chain_id(&counted).0, 200);
    }
    for _ in 0..4 {
        assert_eq!(replicas[1].chain_id(&counted).0, 200);
    }
    let bad =
        json!({"jsonrpc": "2.0", "id": 2, "method": "eth_getBlockByNumber", "params": ["nope"]});
    for replica in &replicas {
        let (status, body) = replica.post(&counted, &bad);
        assert_eq!(status, 200);
        assert_eq!(body["error"]["code"], -32602, "{body}");
    }
    // A batch counts each item.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 3, "method": "eth_chainId", "params": []},
        {"jsonrpc": "2.0", "id": 4, "method": "eth_chainId", "params": []}
    ]);
    assert_eq!(replicas[1].post(&counted, &batch).0, 200);
    let expected = vec![
        ("eth_chainId".to_string(), 9, 0),
        ("eth_getBlockByNumber".to_string(), 2, 2),
        ("total".to_string(), 11, 2),
    ];
    let mut last = Vec::new();
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_until("usage adds up", Duration::from_secs(5), || {
            last = usage(&redis, &counted);
            last == expected
        })
    }));
    assert!(
        polled.is_ok(),
        "usage of `counted`: {last:?}, expected {expected:?}"
    );
    let limited_usage = usage(&redis, &limited);
    assert!(
        limited_usage.contains(&("eth_chainId".to_string(), total, 0)),
        "usage of `limited` counts the {total} accepted calls: {limited_usage:?}"
    );

    // --- A key's origin list, set through the CLI, holds on both replicas.
    let page = add_key(
        &redis,
        "page",
        &["--rps", "0", "--allow-origin", "https://good.example"],
    );
    let from = |replica: &Replica, origin: Option<&str>| {
        let addr = SocketAddr::from(([127, 0, 0, 1], replica.port));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(origin) = origin {
            headers.push(("Origin", origin));
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []});
        http_post(
            addr,
            &format!("/v3/{page}"),
            &headers,
            body.to_string().as_bytes(),
        )
        .expect("HTTP request")
        .0
    };
    for replica in &replicas {
        assert_eq!(from(replica, Some("https://good.example")), 200);
        assert_eq!(from(replica, Some("https://evil.example")), 403);
        assert_eq!(from(replica, None), 403);
    }
    keys_cli(&redis, &["origins", &page]);
    wait_until(
        "origins cleared on both replicas",
        Duration::from_secs(3),
        || replicas.iter().all(|r| from(r, None) == 200),
    );
    // And a method list.
    keys_cli(&redis, &["methods", &page, "eth_blockNumber"]);
    wait_until(
        "methods listed on both replicas",
        Duration::from_secs(3),
        || {
            replicas
                .iter()
                .all(|r| r.chain_id(&page).1["error"]["code"] == -32002)
        },
    );
    assert!(keys_cli(&redis, &["list"])
        .lines()
        .any(|l| l.contains("page") && l.trim_end().ends_with("eth_blockNumber")));

    // --- Revocation through the CLI reaches both replicas within a second.
    let doomed = add_key(&redis, "doomed", &["--rps", "0"]);
    for replica in &replicas {
        assert_eq!(replica.chain_id(&doomed).0, 200);
    }
    keys_cli(&redis, &["revoke", &doomed]);
    let took = wait_until(
        "revocation on both replicas",
        Duration::from_secs(3),
        || replicas.iter().all(|r| r.chain_id(&doomed).0 == 401),
    );
    assert!(
        took <= Duration::from_millis(1500),
        "revocation took {took:?}"
    );
    let (_, body) = replicas[1].chain_id(&doomed);
    assert_eq!(body["error"]["code"], -32001, "{body}");

    // --- Redis stops: both replicas fail closed with 503.
    redis.stop();
    for replica in &replicas {
        wait_until("503 while redis is down", Duration::from_secs(5), || {
            replica.chain_id(&probe).0 == 503
        });
        let (status, body) = replica.chain_id(&probe);
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], -32603, "{body}");
        // An unknown key cannot be told apart from a known one without Redis: also 503.
        assert_eq!(replica.chain_id("0123456789abcdef0123456789abcdef").0, 503);
        // A balancer asking /health is told so.
        let (status, body) = replica.health();
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["status"], "error", "{body}");
    }
    // Serving known keys, a fail-open node stays in rotation.
    assert_eq!(lenient.health().0, 200);

    // With --redis.fail-open a key seen before is still served (by the local limiter), an
    // unknown one is not.
    std::thread::sleep(Duration::from_millis(600));
    let (status, body) = lenient.chain_id(&probe);
    assert_eq!(status, 200, "fail-open serves a cached key: {body}");
    assert_eq!(lenient.chain_id(&counted).0, 503, "fail-open: unseen key");

    // --- Redis returns: both replicas serve again without a restart.
    redis.spawn();
    for replica in &replicas {
        wait_until(
            "recovery after redis returns",
            Duration::from_secs(10),
            || replica.chain_id(&probe).0 == 200,
        );
        assert_eq!(replica.health().0, 200);
        assert_eq!(replica.chain_id(&doomed).0, 401, "revocation survives");
    }
    // The store is the one that came back (keys and usage were saved before the stop).
    assert!(usage(&redis, &counted).contains(&("total".to_string(), 11, 2)));
    assert!(Path::new(&redis.dir.path().join("dump.rdb")).exists());
    let _ = TcpStream::connect(("127.0.0.1", redis.port)).expect("redis is up");
}
