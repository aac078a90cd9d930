//! The built-in dev chain: every fork through Osaka at genesis, the system contracts those
//! forks call, and the first ten accounts of the test mnemonic
//! `test test test test test test test test test test test junk` with 10,000 ETH each
//! (the anvil/hardhat convention, so every tool's defaults work).

use std::collections::BTreeMap;

use alloy::{
    eips::{eip2935, eip4788, eip7002, eip7251},
    genesis::{ChainConfig, Genesis, GenesisAccount},
    primitives::{address, Address, Bytes, U256},
};

pub const DEV_CHAIN_ID: u64 = 1337;

/// Addresses of the test mnemonic's first ten keys (m/44'/60'/0'/0/i).
pub const DEV_ACCOUNTS: [Address; 10] = [
    address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266"),
    address!("70997970C51812dc3A010C7d01b50e0d17dc79C8"),
    address!("3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"),
    address!("90F79bf6EB2c4f870365E785982E1f101E93b906"),
    address!("15d34AAf54267DB7D7c367839AAf71A00a2C6A65"),
    address!("9965507D1a55bcC2695C58ba16FB37d819B0A4dc"),
    address!("976EA74026E726554dB657fA54763abd0C3a0aa9"),
    address!("14dC79964da2C08b23698B3D3cc7Ca32193d9955"),
    address!("23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f"),
    address!("a0Ee7A142d267C1f36714E4a8F75612F20a79720"),
];

/// Gas limit of dev blocks (the Osaka-era default of geth and reth).
const DEV_GAS_LIMIT: u64 = 60_000_000;

pub fn dev_genesis() -> Genesis {
    let config = ChainConfig {
        chain_id: DEV_CHAIN_ID,
        homestead_block: Some(0),
        eip150_block: Some(0),
        eip155_block: Some(0),
        eip158_block: Some(0),
        byzantium_block: Some(0),
        constantinople_block: Some(0),
        petersburg_block: Some(0),
        istanbul_block: Some(0),
        muir_glacier_block: Some(0),
        berlin_block: Some(0),
        london_block: Some(0),
        arrow_glacier_block: Some(0),
        gray_glacier_block: Some(0),
        merge_netsplit_block: Some(0),
        terminal_total_difficulty: Some(U256::ZERO),
        terminal_total_difficulty_passed: true,
        shanghai_time: Some(0),
        cancun_time: Some(0),
        prague_time: Some(0),
        osaka_time: Some(0),
        ..Default::default()
    };
    let mut alloc = BTreeMap::new();
    for account in DEV_ACCOUNTS {
        alloc.insert(
            account,
            GenesisAccount::default().with_balance(super::ether(10_000)),
        );
    }
    let system = [
        (eip4788::BEACON_ROOTS_ADDRESS, &eip4788::BEACON_ROOTS_CODE),
        (
            eip2935::HISTORY_STORAGE_ADDRESS,
            &eip2935::HISTORY_STORAGE_CODE,
        ),
        (
            eip7002::WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS,
            &eip7002::WITHDRAWAL_REQUEST_PREDEPLOY_CODE,
        ),
        (
            eip7251::CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS,
            &eip7251::CONSOLIDATION_REQUEST_PREDEPLOY_CODE,
        ),
    ];
    for (address, code) in system {
        let code: &Bytes = code;
        alloc.insert(
            address,
            GenesisAccount::default()
                .with_nonce(Some(1))
                .with_code(Some(code.clone())),
        );
    }
    Genesis {
        config,
        nonce: 0,
        timestamp: 0,
        extra_data: Bytes::new(),
        gas_limit: DEV_GAS_LIMIT,
        difficulty: U256::ZERO,
        alloc,
        ..Default::default()
    }
}
