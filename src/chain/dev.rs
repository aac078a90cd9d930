//! The built-in dev chain: every fork through Osaka at genesis, the system contracts those
//! forks call, and the first ten accounts of the test mnemonic
//! `test test test test test test test test test test test junk` with 10,000 ETH each
//! (the anvil/hardhat convention, so every tool's defaults work).

use std::collections::BTreeMap;

use alloy::{
    eips::{eip2935, eip4788, eip7002, eip7251},
    genesis::{ChainConfig, Genesis, GenesisAccount},
    primitives::{address, Address, Bytes, Signature, B256, U256},
};
use k256::ecdsa::SigningKey;

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

/// Private keys of the same accounts, in the same order (the anvil / hardhat keys: public
/// knowledge, for dev chains only).
pub const DEV_KEYS: [&str; 10] = [
    "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "dbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
];

/// The signing keys of [`DEV_ACCOUNTS`], each checked to derive its account's address.
pub fn dev_signing_keys() -> anyhow::Result<Vec<(Address, SigningKey)>> {
    DEV_KEYS
        .iter()
        .zip(DEV_ACCOUNTS)
        .enumerate()
        .map(|(i, (hex, expected))| {
            let key = SigningKey::from_slice(&alloy::primitives::hex::decode(hex)?)?;
            let address = Address::from_public_key(key.verifying_key());
            anyhow::ensure!(
                address == expected,
                "key {i} is {address}, DEV_ACCOUNTS[{i}] is {expected}"
            );
            Ok((address, key))
        })
        .collect()
}

/// Signs a 32-byte digest (a transaction's or message's signature hash) with `key`.
pub fn sign_hash(key: &SigningKey, hash: B256) -> anyhow::Result<Signature> {
    let (sig, recid) = key.sign_prehash_recoverable(hash.as_slice())?;
    Ok(Signature::from((sig, recid)))
}

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
