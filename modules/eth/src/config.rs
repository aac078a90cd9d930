//! `eth_config` (EIP-7910: the fork configuration in force, the next scheduled one and the last
//! one) and `eth_capabilities` (which history this node can serve).
//!
//! A configuration exists for each timestamp-scheduled fork, Shanghai on (as geth gives them;
//! before Cancun the blob schedule is null). Before the first of them `current` is null. Its
//! fork id is the EIP-2124/6122 hash of the genesis hash and every fork point up to and
//! including it; its precompiles and system contracts are those active under that fork.

use std::collections::BTreeMap;

use alloy::{
    eips::{
        eip2124::ForkHash, eip2935::HISTORY_STORAGE_ADDRESS, eip4788::BEACON_ROOTS_ADDRESS,
        eip7002::WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS,
        eip7251::CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS,
    },
    primitives::{Address, U64},
};
use alloy_hardforks::{EthereumHardfork, EthereumHardforks, ForkCondition};
use revm::precompile::{PrecompileSpecId, Precompiles};
use serde::Serialize;
use simnode_api::{ChainSpec, ChainView, RpcError, RpcResult};

/// Every fork, for the fork id: block-scheduled ones are hashed before timestamp-scheduled ones.
const ALL_FORKS: &[EthereumHardfork] = &[
    EthereumHardfork::Frontier,
    EthereumHardfork::Homestead,
    EthereumHardfork::Dao,
    EthereumHardfork::Tangerine,
    EthereumHardfork::SpuriousDragon,
    EthereumHardfork::Byzantium,
    EthereumHardfork::Constantinople,
    EthereumHardfork::Petersburg,
    EthereumHardfork::Istanbul,
    EthereumHardfork::MuirGlacier,
    EthereumHardfork::Berlin,
    EthereumHardfork::London,
    EthereumHardfork::ArrowGlacier,
    EthereumHardfork::GrayGlacier,
    EthereumHardfork::Paris,
    EthereumHardfork::Shanghai,
    EthereumHardfork::Cancun,
    EthereumHardfork::Prague,
    EthereumHardfork::Osaka,
    EthereumHardfork::Bpo1,
    EthereumHardfork::Bpo2,
    EthereumHardfork::Bpo3,
    EthereumHardfork::Bpo4,
    EthereumHardfork::Bpo5,
    EthereumHardfork::Amsterdam,
];

/// Forks that can carry a configuration (the timestamp-scheduled ones, Shanghai on), in order.
fn config_forks() -> &'static [EthereumHardfork] {
    let shanghai = ALL_FORKS
        .iter()
        .position(|f| *f == EthereumHardfork::Shanghai)
        .unwrap_or(ALL_FORKS.len());
    &ALL_FORKS[shanghai..]
}

/// EIP-7910 names of the precompiles, by address.
const PRECOMPILE_NAMES: &[(u16, &str)] = &[
    (0x01, "ECREC"),
    (0x02, "SHA256"),
    (0x03, "RIPEMD160"),
    (0x04, "ID"),
    (0x05, "MODEXP"),
    (0x06, "BN254_ADD"),
    (0x07, "BN254_MUL"),
    (0x08, "BN254_PAIRING"),
    (0x09, "BLAKE2F"),
    (0x0a, "KZG_POINT_EVALUATION"),
    (0x0b, "BLS12_G1ADD"),
    (0x0c, "BLS12_G1MSM"),
    (0x0d, "BLS12_G2ADD"),
    (0x0e, "BLS12_G2MSM"),
    (0x0f, "BLS12_PAIRING_CHECK"),
    (0x10, "BLS12_MAP_FP_TO_G1"),
    (0x11, "BLS12_MAP_FP2_TO_G2"),
    (0x100, "P256VERIFY"),
];

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EthConfig {
    current: Option<ForkConfig>,
    next: Option<ForkConfig>,
    last: Option<ForkConfig>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct ForkConfig {
    activation_time: u64,
    blob_schedule: Option<BlobSchedule>,
    chain_id: U64,
    fork_id: String,
    precompiles: BTreeMap<&'static str, String>,
    system_contracts: BTreeMap<&'static str, String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct BlobSchedule {
    target: u64,
    max: u64,
    base_fee_update_fraction: u128,
}

/// The configuration at the head's timestamp and the scheduled ones after it.
pub fn eth_config(spec: &ChainSpec, chain: &dyn ChainView) -> RpcResult<EthConfig> {
    let head = chain
        .header(chain.head().latest)?
        .ok_or(RpcError::HeaderNotFound)?;
    Ok(config_at(spec, head.timestamp))
}

/// The configurations as seen at `timestamp`.
fn config_at(spec: &ChainSpec, timestamp: u64) -> EthConfig {
    let scheduled: Vec<(EthereumHardfork, u64)> = config_forks()
        .iter()
        .filter_map(|fork| match spec.ethereum_fork_activation(*fork) {
            ForkCondition::Timestamp(at) => Some((*fork, at)),
            _ => None,
        })
        .collect();
    let current_index = scheduled.iter().rposition(|(_, at)| *at <= timestamp);
    let config = |i: usize| fork_config(spec, scheduled[i].1);
    // A fork scheduled at the same time as the one before it is the same configuration.
    let next_index = match current_index {
        Some(current) => {
            (current + 1..scheduled.len()).find(|i| scheduled[*i].1 > scheduled[current].1)
        }
        None => (!scheduled.is_empty()).then_some(0),
    };
    EthConfig {
        current: current_index.map(config),
        next: next_index.map(config),
        last: next_index.map(|_| config(scheduled.len() - 1)),
    }
}

fn fork_config(spec: &ChainSpec, activation: u64) -> ForkConfig {
    // None before Cancun; Cancun's own when the chain schedules none.
    let blob = spec.is_cancun_active_at_timestamp(activation).then(|| {
        spec.blob_params_at(activation)
            .unwrap_or_else(alloy::eips::eip7840::BlobParams::cancun)
    });
    let spec_id = spec.spec_id(u64::MAX, activation);
    let precompiles = Precompiles::new(PrecompileSpecId::from_spec_id(spec_id));
    let precompiles = PRECOMPILE_NAMES
        .iter()
        .map(|(at, name)| (*name, precompile_address(*at)))
        .filter(|(_, address)| precompiles.contains(address))
        .map(|(name, address)| (name, lower_hex(&address)))
        .collect();
    let mut system_contracts = BTreeMap::new();
    if spec.is_cancun_active_at_timestamp(activation) {
        system_contracts.insert("BEACON_ROOTS_ADDRESS", lower_hex(&BEACON_ROOTS_ADDRESS));
    }
    if spec.is_prague_active_at_timestamp(activation) {
        system_contracts.insert(
            "HISTORY_STORAGE_ADDRESS",
            lower_hex(&HISTORY_STORAGE_ADDRESS),
        );
        system_contracts.insert(
            "WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS",
            lower_hex(&WITHDRAWAL_REQUEST_PREDEPLOY_ADDRESS),
        );
        system_contracts.insert(
            "CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS",
            lower_hex(&CONSOLIDATION_REQUEST_PREDEPLOY_ADDRESS),
        );
        if let Some(deposit) = spec.deposit_contract {
            system_contracts.insert("DEPOSIT_CONTRACT_ADDRESS", lower_hex(&deposit));
        }
    }
    ForkConfig {
        activation_time: activation,
        blob_schedule: blob.map(|blob| BlobSchedule {
            target: blob.target_blob_count,
            max: blob.max_blob_count,
            base_fee_update_fraction: blob.update_fraction,
        }),
        chain_id: U64::from(spec.chain_id),
        fork_id: format!(
            "0x{}",
            alloy::primitives::hex::encode(fork_hash(spec, activation).0)
        ),
        precompiles,
        system_contracts,
    }
}

/// EIP-2124 fork hash of the fork active at `timestamp`: the genesis hash, then every distinct
/// fork block after genesis, then every distinct fork time after the genesis time up to
/// `timestamp`.
fn fork_hash(spec: &ChainSpec, timestamp: u64) -> ForkHash {
    let genesis_time = spec.genesis_header.timestamp;
    let mut blocks = Vec::new();
    let mut times = Vec::new();
    for fork in ALL_FORKS {
        match spec.ethereum_fork_activation(*fork) {
            ForkCondition::Block(n)
            | ForkCondition::TTD {
                fork_block: Some(n),
                ..
            } if n > 0 => blocks.push(n),
            ForkCondition::Timestamp(t) if t > genesis_time && t <= timestamp => times.push(t),
            _ => {}
        }
    }
    blocks.sort_unstable();
    blocks.dedup();
    times.sort_unstable();
    times.dedup();
    let mut hash = ForkHash::from(spec.genesis_header.hash());
    for point in blocks.into_iter().chain(times) {
        hash += point;
    }
    hash
}

fn precompile_address(at: u16) -> Address {
    let mut bytes = [0u8; 20];
    bytes[18..].copy_from_slice(&at.to_be_bytes());
    Address::from(bytes)
}

fn lower_hex(address: &Address) -> String {
    format!("{address:#x}")
}

#[derive(Debug, Clone, Serialize)]
pub struct Capabilities {
    head: CapabilitiesHead,
    state: Resource,
    tx: Resource,
    logs: Resource,
    receipts: Resource,
    blocks: Resource,
    stateproofs: Resource,
}

#[derive(Debug, Clone, Serialize)]
struct CapabilitiesHead {
    number: U64,
    hash: alloy::primitives::B256,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct Resource {
    disabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    oldest_block: Option<U64>,
}

/// An archive node that never prunes: everything from genesis, no delete strategy.
pub fn capabilities(chain: &dyn ChainView, proofs: bool) -> RpcResult<Capabilities> {
    let number = chain.head().latest;
    let hash = chain
        .canonical_hash(number)?
        .ok_or(RpcError::HeaderNotFound)?;
    let all = || Resource {
        disabled: false,
        oldest_block: Some(U64::ZERO),
    };
    Ok(Capabilities {
        head: CapabilitiesHead {
            number: U64::from(number),
            hash,
        },
        state: all(),
        tx: all(),
        logs: all(),
        receipts: all(),
        blocks: all(),
        stateproofs: if proofs {
            all()
        } else {
            Resource {
                disabled: true,
                oldest_block: None,
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::{
        consensus::{Header, Sealed},
        primitives::b256,
    };
    use alloy_hardforks::EthereumChainHardforks;

    fn spec(hardforks: EthereumChainHardforks, genesis_hash: alloy::primitives::B256) -> ChainSpec {
        ChainSpec {
            name: "custom".into(),
            chain_id: 1,
            hardforks,
            blob_schedule: vec![],
            deposit_contract: None,
            genesis_header: Sealed::new_unchecked(Header::default(), genesis_hash),
        }
    }

    #[test]
    fn mainnet_fork_hashes_match_eip_2124() {
        let mainnet = spec(
            EthereumChainHardforks::mainnet(),
            b256!("d4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3"),
        );
        let at = |fork| match mainnet.ethereum_fork_activation(fork) {
            ForkCondition::Timestamp(t) => t,
            other => panic!("{fork:?} is {other:?}"),
        };
        // Published fork ids of mainnet (EIP-2124 / EIP-6122 lists, geth's forkid tests).
        // Every block fork through Gray Glacier (mainnet's merge has no fork block).
        assert_eq!(fork_hash(&mainnet, 0).0, [0xf0, 0xaf, 0xd0, 0xe3]);
        assert_eq!(
            fork_hash(&mainnet, at(EthereumHardfork::Shanghai)).0,
            [0xdc, 0xe9, 0x6c, 0x2d]
        );
        assert_eq!(
            fork_hash(&mainnet, at(EthereumHardfork::Cancun)).0,
            [0x9f, 0x3d, 0x22, 0x54]
        );
        assert_eq!(
            fork_hash(&mainnet, at(EthereumHardfork::Prague)).0,
            [0xc3, 0x76, 0xcf, 0x8b]
        );
    }

    fn two_forks() -> ChainSpec {
        use alloy_hardforks::{EthereumHardfork as F, ForkCondition as C};
        let mut forks: Vec<(F, C)> = ALL_FORKS
            .iter()
            .take_while(|f| **f != F::Paris)
            .map(|f| (*f, C::Block(0)))
            .collect();
        forks.push((
            F::Paris,
            C::TTD {
                activation_block_number: 0,
                fork_block: Some(0),
                total_difficulty: alloy::primitives::U256::ZERO,
            },
        ));
        forks.extend([
            (F::Shanghai, C::Timestamp(0)),
            (F::Cancun, C::Timestamp(0)),
            (F::Prague, C::Timestamp(100)),
            (F::Osaka, C::Timestamp(200)),
        ]);
        let mut s = spec(
            EthereumChainHardforks::new(forks),
            alloy::primitives::B256::ZERO,
        );
        s.deposit_contract = Some(Address::repeat_byte(0x22));
        s
    }

    #[test]
    fn current_next_and_last_follow_the_schedule() {
        let spec = two_forks();
        let before = config_at(&spec, 150);
        let current = before.current.as_ref().expect("current");
        assert_eq!(current.activation_time, 100);
        assert!(!current.precompiles.contains_key("P256VERIFY"));
        assert!(current.precompiles.contains_key("BLS12_G1ADD"));
        assert_eq!(
            current.system_contracts["DEPOSIT_CONTRACT_ADDRESS"],
            "0x2222222222222222222222222222222222222222"
        );
        let next = before.next.expect("osaka is next");
        assert_eq!(next.activation_time, 200);
        assert!(next.precompiles.contains_key("P256VERIFY"));
        assert_ne!(next.fork_id, current.fork_id);
        assert_eq!(before.last.expect("last").activation_time, 200);

        let after = config_at(&spec, 250);
        assert_eq!(after.current.expect("current").fork_id, next.fork_id);
        assert!(after.next.is_none() && after.last.is_none());

        let cancun = config_at(&spec, 50);
        let current = cancun.current.as_ref().expect("current");
        assert_eq!(current.activation_time, 0);
        assert!(!current
            .system_contracts
            .contains_key("HISTORY_STORAGE_ADDRESS"));
        assert_eq!(
            current.blob_schedule.as_ref().map(|b| b.max),
            Some(6),
            "cancun's blob schedule when the chain gives none"
        );
        assert_eq!(
            serde_json::to_value(&cancun).expect("json")["current"]["chainId"],
            "0x1"
        );
    }

    /// As geth: Shanghai has a configuration without a blob schedule or system contracts, and
    /// before it there is no current one.
    #[test]
    fn shanghai_has_a_configuration_and_before_it_none_is_current() {
        let mut spec = two_forks();
        spec.hardforks = EthereumChainHardforks::new([
            (EthereumHardfork::Frontier, ForkCondition::Block(0)),
            (EthereumHardfork::Shanghai, ForkCondition::Timestamp(5)),
            (EthereumHardfork::Cancun, ForkCondition::Timestamp(10)),
        ]);
        let before = config_at(&spec, 3);
        assert!(before.current.is_none());
        assert_eq!(before.next.as_ref().map(|c| c.activation_time), Some(5));
        assert_eq!(before.last.as_ref().map(|c| c.activation_time), Some(10));
        let shanghai = serde_json::to_value(config_at(&spec, 7)).unwrap();
        assert_eq!(shanghai["current"]["activationTime"], 5);
        assert_eq!(shanghai["current"]["blobSchedule"], serde_json::Value::Null);
        assert_eq!(
            shanghai["current"]["systemContracts"],
            serde_json::json!({})
        );
        assert_eq!(shanghai["next"]["activationTime"], 10);
    }
}
