//! Receipts rebuilt from the geth-recorded execution-apis fixtures: the block (header, full
//! transactions with signatures and senders) comes from an `eth_getBlockBy*` fixture, the
//! consensus part of each receipt (status/root, cumulative gas, logs, bloom) from the
//! `eth_getBlockReceipts` fixture; everything else (from, gasUsed, contractAddress,
//! effectiveGasPrice, indexes, log metadata) must be derived and match geth exactly.

use super::*;
use alloy::consensus::Sealed;
use serde_json::Value;
use simnode_api::testing::{conformance_dir, consensus_receipts, fixture, stored_block};

fn fixture_result(rel: &str) -> Value {
    fixture(rel).1["result"].clone()
}

fn spec() -> ChainSpec {
    let genesis: alloy::genesis::Genesis = serde_json::from_str(
        &std::fs::read_to_string(conformance_dir().join("genesis.json")).unwrap(),
    )
    .unwrap();
    let cfg = &genesis.config;
    use alloy_hardforks::{EthereumChainHardforks, EthereumHardfork as F, ForkCondition as C};
    let b = |n: Option<u64>| n.map(C::Block).unwrap_or(C::Never);
    let t = |n: Option<u64>| n.map(C::Timestamp).unwrap_or(C::Never);
    let hardforks = EthereumChainHardforks::new([
        (F::Frontier, C::Block(0)),
        (F::Homestead, b(cfg.homestead_block)),
        (F::Tangerine, b(cfg.eip150_block)),
        (F::SpuriousDragon, b(cfg.eip158_block)),
        (F::Byzantium, b(cfg.byzantium_block)),
        (F::Constantinople, b(cfg.constantinople_block)),
        (F::Petersburg, b(cfg.petersburg_block)),
        (F::Istanbul, b(cfg.istanbul_block)),
        (F::Berlin, b(cfg.berlin_block)),
        (F::London, b(cfg.london_block)),
        (F::Paris, b(cfg.merge_netsplit_block)),
        (F::Shanghai, t(cfg.shanghai_time)),
        (F::Cancun, t(cfg.cancun_time)),
        (F::Prague, t(cfg.prague_time)),
        (F::Osaka, t(cfg.osaka_time)),
    ]);
    let header = alloy::consensus::Header::default();
    let blob_schedule = vec![(420, alloy::eips::eip7840::BlobParams::cancun())];
    ChainSpec {
        name: "custom".into(),
        chain_id: cfg.chain_id,
        hardforks,
        blob_schedule,
        deposit_contract: None,
        genesis_header: Sealed::new_unchecked(header, Default::default()),
    }
}

fn block_from_fixture(rel: &str) -> StoredBlock {
    stored_block(&fixture_result(rel))
}

fn check_block(block_fixture: &str, receipts_fixture: &str) {
    let expected = fixture_result(receipts_fixture);
    let block = block_from_fixture(block_fixture);
    let receipts = consensus_receipts(&expected);
    let built = build_block_receipts(&spec(), &block, &receipts).unwrap();
    let got = serde_json::to_value(&built).unwrap();
    assert_eq!(got, expected);
    // Single-receipt path agrees with the block path.
    for (i, r) in built.iter().enumerate() {
        let one = build_receipt(&spec(), &block, &receipts, i)
            .unwrap()
            .unwrap();
        assert_eq!(&one, r);
    }
    assert!(build_receipt(&spec(), &block, &receipts, built.len())
        .unwrap()
        .is_none());
}

#[test]
fn pre_byzantium_block_has_root_and_contract_addresses() {
    check_block(
        "eth_getBlockByHash/get-block-by-hash.io",
        "eth_getBlockReceipts/get-block-receipts-n.io",
    );
}

#[test]
fn latest_block_logs_indexed_across_block() {
    check_block(
        "eth_getBlockByNumber/get-latest.io",
        "eth_getBlockReceipts/get-block-receipts-latest.io",
    );
}

#[test]
fn mismatched_receipts_are_an_internal_error() {
    let block = block_from_fixture("eth_getBlockByHash/get-block-by-hash.io");
    let err = build_block_receipts(&spec(), &block, &[]).unwrap_err();
    assert_eq!(err.code(), -32603);
}

#[test]
fn block_param_errors_name_the_problem() {
    let e = parse_block_param(None).unwrap_err();
    assert_eq!(e.code(), -32602);
    assert!(e.to_string().contains("missing"));
    let e = parse_block_param(Some(serde_json::json!("0x1ffffffffffffffff"))).unwrap_err();
    assert!(e.to_string().contains("64 bits"));
    let e = parse_block_param(Some(serde_json::json!(
        "0xabcd0000000000000000000000000000000000000000000000000000000000zz"
    )))
    .unwrap_err();
    assert_eq!(e.code(), -32602);
    assert_eq!(
        parse_block_param(Some(serde_json::json!(12))).unwrap(),
        BlockParam::Number(12)
    );
}
