//! The real-client suites (viem and web3.py, `tests/clients`) over HTTP and WebSocket against
//! this build's `simnode`, and the runner's self-test: a proxy that breaks one receipt field
//! must fail exactly the receipt checks of both suites.
//!
//! Needs Node.js (with npm) and Python 3 on PATH; the first run installs the suites' locked
//! dependencies (`npm ci` in tests/clients/js, a venv under target/). Without them these tests
//! fail rather than skip.

use std::process::Command;

fn run(script: &str) {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("tests/clients/{script}"))
        .current_dir(root)
        // The binary cargo built for these tests: a nested `cargo build` would wait on the
        // build-directory lock this test run holds.
        .env("SIMNODE_BIN", env!("CARGO_BIN_EXE_simnode"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run bash tests/clients/{script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tests/clients/{script} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // Seen with --nocapture: which suites ran.
    for line in stdout
        .lines()
        .filter(|l| l.starts_with("[clients") || l.contains("self-test"))
    {
        println!("{line}");
    }
}

#[test]
fn viem_and_web3py_suites_pass_over_http_and_ws() {
    run("run.sh");
}

#[test]
fn the_client_runner_fails_on_a_broken_receipt_field() {
    run("selftest.sh");
}
