//! In-process cost of one trace_callMany request on the in-memory chain (no HTTP):
//! `cargo test -p simnode-trace --release --test throughput -- --ignored --nocapture`.

mod common;

use std::time::Instant;

use alloy::primitives::{address, Address, U256};
use common::*;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "measurement, run by hand in release"]
async fn nested3_requests_per_second() {
    let methods = Genesis::default()
        .coinbase(Address::ZERO)
        .account(
            address!("0c2c51a0990aee1d73c1228de158688341557508"),
            U256::from(10u128.pow(30)),
        )
        .methods();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for payload in [
        dir.join("../../../shared/bench/payloads/hive_trace_callMany_nested3.json"),
        dir.join("bench/hive_trace_callMany2_statediff.json"),
        dir.join("bench/hive_trace_callMany10_statediff.json"),
    ] {
        let Ok(body) = std::fs::read_to_string(&payload) else {
            continue;
        };
        for _ in 0..200 {
            raw(&methods, &body).await;
        }
        let n = 3000;
        let started = Instant::now();
        for _ in 0..n {
            let resp = raw(&methods, &body).await;
            assert!(resp.get("result").is_some(), "{resp}");
        }
        let per = started.elapsed() / n;
        eprintln!(
            "{}: {per:?} per request, {:.0}/s",
            payload.file_name().unwrap().to_string_lossy(),
            1.0 / per.as_secs_f64()
        );
    }
}
