//! The public networks by name: chain id, fork schedule (alloy-hardforks), blob schedule and
//! genesis header. Their genesis allocations are not shipped (no registry package carries
//! them), so a datadir for one of them is created from the network's geth genesis.json; after
//! that `--chain mainnet` (or `sepolia`, `hoodi`) opens it by name.

use alloy::{
    consensus::{Header, EMPTY_OMMER_ROOT_HASH, EMPTY_ROOT_HASH},
    eips::eip7840::BlobParams,
    primitives::{address, b256, bytes, Sealable, B64, U256},
};
use alloy_hardforks::{EthereumChainHardforks, EthereumHardfork, EthereumHardforks, ForkCondition};
use simnode_api::ChainSpec;

/// Blob parameters at each blob-related fork the schedule activates by timestamp.
fn blob_schedule(forks: &EthereumChainHardforks) -> Vec<(u64, BlobParams)> {
    [
        (EthereumHardfork::Cancun, BlobParams::cancun()),
        (EthereumHardfork::Prague, BlobParams::prague()),
        (EthereumHardfork::Osaka, BlobParams::osaka()),
        (EthereumHardfork::Bpo1, BlobParams::bpo1()),
        (EthereumHardfork::Bpo2, BlobParams::bpo2()),
    ]
    .into_iter()
    .filter_map(
        |(fork, params)| match forks.ethereum_fork_activation(fork) {
            ForkCondition::Timestamp(t) => Some((t, params)),
            _ => None,
        },
    )
    .collect()
}

pub fn mainnet() -> ChainSpec {
    let hardforks = EthereumChainHardforks::mainnet();
    let genesis = Header {
        ommers_hash: EMPTY_OMMER_ROOT_HASH,
        state_root: b256!("d7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544"),
        transactions_root: EMPTY_ROOT_HASH,
        receipts_root: EMPTY_ROOT_HASH,
        difficulty: U256::from(0x400000000u64),
        gas_limit: 5000,
        extra_data: bytes!("11bbe8db4e347b4e8c937c1c8370e4b5ed33adb3db69cbdb7a38e1e50b1b82fa"),
        nonce: B64::from(0x42u64),
        ..Default::default()
    };
    ChainSpec {
        name: "mainnet".into(),
        chain_id: 1,
        blob_schedule: blob_schedule(&hardforks),
        hardforks,
        deposit_contract: Some(address!("00000000219ab540356cBB839Cbe05303d7705Fa")),
        genesis_header: genesis.seal_slow(),
    }
}

pub fn sepolia() -> ChainSpec {
    let hardforks = EthereumChainHardforks::sepolia();
    let genesis = Header {
        ommers_hash: EMPTY_OMMER_ROOT_HASH,
        state_root: b256!("5eb6e371a698b8d68f665192350ffcecbbbf322916f4b51bd79bb6887da3f494"),
        transactions_root: EMPTY_ROOT_HASH,
        receipts_root: EMPTY_ROOT_HASH,
        difficulty: U256::from(0x20000u64),
        gas_limit: 0x1c9c380,
        timestamp: 0x6159af19,
        extra_data: bytes!("5365706f6c69612c20417468656e732c204174746963612c2047726565636521"),
        // Sepolia started with London active.
        base_fee_per_gas: Some(1_000_000_000),
        ..Default::default()
    };
    ChainSpec {
        name: "sepolia".into(),
        chain_id: 11_155_111,
        blob_schedule: blob_schedule(&hardforks),
        hardforks,
        deposit_contract: Some(address!("7f02c3e3c98b133055b8b348b2ac625669ed295d")),
        genesis_header: genesis.seal_slow(),
    }
}

pub fn hoodi() -> ChainSpec {
    let hardforks = EthereumChainHardforks::hoodi();
    let genesis = Header {
        ommers_hash: EMPTY_OMMER_ROOT_HASH,
        state_root: b256!("da87d7f5f91c51508791bbcbd4aa5baf04917830b86985eeb9ad3d5bfb657576"),
        transactions_root: EMPTY_ROOT_HASH,
        receipts_root: EMPTY_ROOT_HASH,
        difficulty: U256::from(1u64),
        gas_limit: 0x2255100,
        timestamp: 1_742_212_800,
        nonce: B64::from(0x1234u64),
        // Hoodi started post-merge with Shanghai and Cancun active (Prague came later).
        base_fee_per_gas: Some(1_000_000_000),
        withdrawals_root: Some(alloy::consensus::constants::EMPTY_WITHDRAWALS),
        blob_gas_used: Some(0),
        excess_blob_gas: Some(0),
        parent_beacon_block_root: Some(alloy::primitives::B256::ZERO),
        ..Default::default()
    };
    ChainSpec {
        name: "hoodi".into(),
        chain_id: 560_048,
        blob_schedule: blob_schedule(&hardforks),
        hardforks,
        deposit_contract: Some(address!("00000000219ab540356cBB839Cbe05303d7705Fa")),
        genesis_header: genesis.seal_slow(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::B256;

    #[test]
    fn genesis_hashes_are_the_networks() {
        let mainnet: B256 =
            b256!("d4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3");
        let sepolia: B256 =
            b256!("25a5cc106eea7138acab33231d7160d69cb777ee0c2c553fcddf5138993e6dd9");
        assert_eq!(super::mainnet().genesis_header.hash(), mainnet);
        assert_eq!(super::sepolia().genesis_header.hash(), sepolia);
        let hoodi: B256 = b256!("bbe312868b376a3001692a646dd2d7d1e4406380dfd86b98aa8a34d1557c971b");
        assert_eq!(super::hoodi().genesis_header.hash(), hoodi);
        let h = super::hoodi();
        assert_eq!(h.chain_id, 560_048);
        assert!(h.is_prague_active_at_timestamp(1_742_999_832));
        assert!(!h.is_prague_active_at_timestamp(1_742_999_831));
        // Osaka 1761677592, BPO1 1762365720 (max 15), BPO2 1762955544 (max 21).
        assert!(h
            .blob_params_at(1_761_677_592)
            .is_some_and(|p| p.max_blob_count == 9));
        assert!(h
            .blob_params_at(1_762_365_720)
            .is_some_and(|p| p.max_blob_count == 15));
        assert!(h
            .blob_params_at(1_762_955_544)
            .is_some_and(|p| p.max_blob_count == 21));
        assert!(super::mainnet()
            .blob_params_at(1_765_290_071)
            .is_some_and(|p| p.max_blob_count == 15));
    }
}
