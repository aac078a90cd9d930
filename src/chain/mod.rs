//! Chain specifications: the built-in `dev` chain, the public networks, and any geth-style
//! genesis.json. A spec is the `simnode_api::ChainSpec` modules read, plus the genesis
//! allocation the node needs to build its first state.

mod dev;
mod public;

use std::{collections::BTreeMap, path::Path};

use alloy::{
    consensus::{constants::EMPTY_WITHDRAWALS, Header, EMPTY_OMMER_ROOT_HASH},
    eips::{eip7685::EMPTY_REQUESTS_HASH, eip7840::BlobParams},
    genesis::{ChainConfig, Genesis, GenesisAccount},
    primitives::{Address, Sealable, B256, U256},
};
use alloy_hardforks::{EthereumChainHardforks, EthereumHardfork, EthereumHardforks, ForkCondition};
use simnode_api::{chain_spec::INITIAL_BASE_FEE, ChainSpec};

pub use dev::{dev_genesis, dev_signing_keys, sign_hash, DEV_ACCOUNTS, DEV_CHAIN_ID, DEV_KEYS};

/// A chain the node can run: the spec modules see, and the genesis allocation (absent for the
/// public networks, whose allocations this build does not ship).
#[derive(Debug, Clone)]
pub struct NodeChain {
    pub spec: ChainSpec,
    pub alloc: Option<BTreeMap<Address, GenesisAccount>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("cannot read genesis file {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("invalid genesis file {path}: {error}")]
    Parse {
        path: String,
        error: serde_json::Error,
    },
    #[error(
        "chain `{0}` has no built-in genesis allocation: pass its geth genesis.json with --chain PATH to execute from genesis"
    )]
    NoAlloc(String),
    #[error(
        "{path} is not a genesis file: it has no chain configuration (`config` with a `chainId`)"
    )]
    NoConfig { path: String },
    #[error("invalid genesis file {path}: unsupported fork ordering: {why}")]
    ForkOrder { path: String, why: String },
}

/// Resolves `--chain`: a built-in name or a path to a genesis.json.
pub fn load(chain: &str) -> Result<NodeChain, ChainError> {
    match chain {
        "dev" => Ok(from_genesis("dev", &dev_genesis())),
        // The public networks' allocations are large data no registry package provides; their
        // geth genesis.json files do (a datadir created from one opens by name afterwards).
        "mainnet" => Ok(NodeChain {
            spec: public::mainnet(),
            alloc: None,
        }),
        "sepolia" => Ok(NodeChain {
            spec: public::sepolia(),
            alloc: None,
        }),
        "hoodi" => Ok(NodeChain {
            spec: public::hoodi(),
            alloc: None,
        }),
        path => {
            let text =
                std::fs::read_to_string(Path::new(path)).map_err(|error| ChainError::Read {
                    path: path.to_string(),
                    error,
                })?;
            let raw: serde_json::Value =
                serde_json::from_str(&text).map_err(|error| ChainError::Parse {
                    path: path.to_string(),
                    error,
                })?;
            // serde fills in a missing config with mainnet's chain id: any stray JSON file
            // would start a node calling itself mainnet. geth refuses it too.
            if raw.pointer("/config/chainId").is_none_or(|id| id.is_null()) {
                return Err(ChainError::NoConfig {
                    path: path.to_string(),
                });
            }
            let genesis: Genesis =
                serde_json::from_value(raw).map_err(|error| ChainError::Parse {
                    path: path.to_string(),
                    error,
                })?;
            check_fork_order(&genesis.config).map_err(|why| ChainError::ForkOrder {
                path: path.to_string(),
                why,
            })?;
            Ok(from_genesis(
                network_name(genesis.config.chain_id),
                &genesis,
            ))
        }
    }
}

/// geth's check that forks come in their order: each at or after the one before it, none set
/// after a required one left unset (optional ones, such as the difficulty-bomb delays, may be
/// skipped), and no block-numbered fork after a timed one.
fn check_fork_order(c: &ChainConfig) -> Result<(), String> {
    use ForkAt::{Block, Time};
    #[derive(Clone, Copy)]
    enum ForkAt {
        Block(Option<u64>),
        Time(Option<u64>),
    }
    let at = |fork: ForkAt| match fork {
        Block(at) | Time(at) => at,
    };
    let forks = [
        ("homesteadBlock", Block(c.homestead_block), false),
        ("daoForkBlock", Block(c.dao_fork_block), true),
        ("eip150Block", Block(c.eip150_block), false),
        ("eip155Block", Block(c.eip155_block), false),
        ("eip158Block", Block(c.eip158_block), false),
        ("byzantiumBlock", Block(c.byzantium_block), false),
        ("constantinopleBlock", Block(c.constantinople_block), false),
        ("petersburgBlock", Block(c.petersburg_block), false),
        ("istanbulBlock", Block(c.istanbul_block), false),
        ("muirGlacierBlock", Block(c.muir_glacier_block), true),
        ("berlinBlock", Block(c.berlin_block), false),
        ("londonBlock", Block(c.london_block), false),
        ("arrowGlacierBlock", Block(c.arrow_glacier_block), true),
        ("grayGlacierBlock", Block(c.gray_glacier_block), true),
        ("mergeNetsplitBlock", Block(c.merge_netsplit_block), true),
        ("shanghaiTime", Time(c.shanghai_time), false),
        ("cancunTime", Time(c.cancun_time), false),
        ("pragueTime", Time(c.prague_time), false),
        ("osakaTime", Time(c.osaka_time), false),
        ("bpo1Time", Time(c.bpo1_time), true),
        ("bpo2Time", Time(c.bpo2_time), true),
        ("bpo3Time", Time(c.bpo3_time), true),
        ("bpo4Time", Time(c.bpo4_time), true),
        ("bpo5Time", Time(c.bpo5_time), true),
        ("amsterdamTime", Time(c.amsterdam_time), true),
    ];
    let mut last: Option<(&str, ForkAt)> = None;
    for (name, fork, optional) in forks {
        if let (Some((before, was)), Some(now)) = (last, at(fork)) {
            match (was, fork) {
                (Block(None) | Time(None), _) => {
                    return Err(format!("{before} not enabled, but {name} enabled at {now}"))
                }
                (Block(Some(then)), Block(_)) | (Time(Some(then)), Time(_)) if then > now => {
                    return Err(format!(
                        "{before} enabled at {then}, but {name} enabled at {now}"
                    ))
                }
                (Time(Some(_)), Block(_)) => {
                    return Err(format!(
                        "{name} enabled by block number after {before}, enabled by time"
                    ))
                }
                _ => {}
            }
        }
        if !optional || at(fork).is_some() {
            last = Some((name, fork));
        }
    }
    Ok(())
}

/// The public network a chain id belongs to (its genesis.json gets that network's method
/// policy), or `custom`.
pub fn network_name(chain_id: u64) -> &'static str {
    match chain_id {
        1 => "mainnet",
        11_155_111 => "sepolia",
        560_048 => "hoodi",
        _ => "custom",
    }
}

/// Builds the spec of a chain described by a geth genesis.json.
pub fn from_genesis(name: &str, genesis: &Genesis) -> NodeChain {
    let hardforks = hardforks(&genesis.config);
    let blob_schedule = blob_schedule(&genesis.config);
    let mut spec = ChainSpec {
        name: name.to_string(),
        chain_id: genesis.config.chain_id,
        hardforks,
        blob_schedule,
        deposit_contract: genesis.config.deposit_contract_address,
        genesis_header: Header::default().seal_slow(),
    };
    let state_root = crate::store::trie::genesis_state_root(&genesis.alloc);
    spec.genesis_header = genesis_header(&spec, genesis, state_root).seal_slow();
    NodeChain {
        spec,
        alloc: Some(genesis.alloc.clone()),
    }
}

fn hardforks(c: &ChainConfig) -> EthereumChainHardforks {
    let block = |b: Option<u64>| b.map(ForkCondition::Block);
    let time = |t: Option<u64>| t.map(ForkCondition::Timestamp);
    let paris = match (c.terminal_total_difficulty, c.merge_netsplit_block) {
        (Some(ttd), Some(at)) => Some(ForkCondition::TTD {
            activation_block_number: at,
            fork_block: Some(at),
            total_difficulty: ttd,
        }),
        (Some(ttd), None) if ttd.is_zero() || c.terminal_total_difficulty_passed => {
            Some(ForkCondition::TTD {
                activation_block_number: 0,
                fork_block: None,
                total_difficulty: ttd,
            })
        }
        // Without mergeNetsplitBlock the first proof-of-stake block is not known in advance;
        // geth genesis files of post-merge test chains set it, so such a chain stays PoW here.
        (Some(ttd), None) => Some(ForkCondition::TTD {
            activation_block_number: u64::MAX,
            fork_block: None,
            total_difficulty: ttd,
        }),
        (None, Some(at)) => Some(ForkCondition::Block(at)),
        (None, None) => None,
    };
    let forks = [
        (EthereumHardfork::Frontier, Some(ForkCondition::Block(0))),
        (EthereumHardfork::Homestead, block(c.homestead_block)),
        (
            EthereumHardfork::Dao,
            block(c.dao_fork_block.filter(|_| c.dao_fork_support)),
        ),
        (EthereumHardfork::Tangerine, block(c.eip150_block)),
        (
            EthereumHardfork::SpuriousDragon,
            block(c.eip158_block.or(c.eip155_block)),
        ),
        (EthereumHardfork::Byzantium, block(c.byzantium_block)),
        (
            EthereumHardfork::Constantinople,
            block(c.constantinople_block),
        ),
        (EthereumHardfork::Petersburg, block(c.petersburg_block)),
        (EthereumHardfork::Istanbul, block(c.istanbul_block)),
        (EthereumHardfork::MuirGlacier, block(c.muir_glacier_block)),
        (EthereumHardfork::Berlin, block(c.berlin_block)),
        (EthereumHardfork::London, block(c.london_block)),
        (EthereumHardfork::ArrowGlacier, block(c.arrow_glacier_block)),
        (EthereumHardfork::GrayGlacier, block(c.gray_glacier_block)),
        (EthereumHardfork::Paris, paris),
        (EthereumHardfork::Shanghai, time(c.shanghai_time)),
        (EthereumHardfork::Cancun, time(c.cancun_time)),
        (EthereumHardfork::Prague, time(c.prague_time)),
        (EthereumHardfork::Osaka, time(c.osaka_time)),
        (EthereumHardfork::Bpo1, time(c.bpo1_time)),
        (EthereumHardfork::Bpo2, time(c.bpo2_time)),
        (EthereumHardfork::Bpo3, time(c.bpo3_time)),
        (EthereumHardfork::Bpo4, time(c.bpo4_time)),
        (EthereumHardfork::Bpo5, time(c.bpo5_time)),
        (EthereumHardfork::Amsterdam, time(c.amsterdam_time)),
    ];
    EthereumChainHardforks::new(
        forks
            .into_iter()
            .filter_map(|(fork, cond)| cond.map(|c| (fork, c))),
    )
}

/// Blob parameters by activation time. Forks the genesis names without a schedule entry get
/// the EIP defaults, as geth does.
fn blob_schedule(c: &ChainConfig) -> Vec<(u64, BlobParams)> {
    let params = c.blob_schedule_blob_params();
    let mut out = Vec::new();
    if let Some(t) = c.cancun_time {
        out.push((t, params.cancun));
    }
    if let Some(t) = c.prague_time {
        out.push((t, params.prague));
    }
    if let Some(t) = c.osaka_time {
        out.push((t, params.osaka));
    }
    out.extend(params.scheduled.iter().copied());
    out.sort_by_key(|(t, _)| *t);
    out
}

fn genesis_header(spec: &ChainSpec, g: &Genesis, state_root: B256) -> Header {
    let ts = g.timestamp;
    let london = spec.is_london_active_at_block(0);
    let shanghai = spec.is_shanghai_active_at_timestamp(ts);
    let cancun = spec.is_cancun_active_at_timestamp(ts);
    let prague = spec.is_prague_active_at_timestamp(ts);
    Header {
        parent_hash: g.parent_hash.unwrap_or_default(),
        ommers_hash: EMPTY_OMMER_ROOT_HASH,
        beneficiary: g.coinbase,
        state_root,
        transactions_root: alloy::consensus::EMPTY_ROOT_HASH,
        receipts_root: alloy::consensus::EMPTY_ROOT_HASH,
        logs_bloom: Default::default(),
        difficulty: g.difficulty,
        number: g.number.unwrap_or_default(),
        gas_limit: g.gas_limit,
        gas_used: 0,
        timestamp: ts,
        extra_data: g.extra_data.clone(),
        mix_hash: g.mix_hash,
        nonce: g.nonce.into(),
        base_fee_per_gas: london.then(|| {
            g.base_fee_per_gas
                .map(|f| f as u64)
                .unwrap_or(INITIAL_BASE_FEE)
        }),
        withdrawals_root: shanghai.then_some(EMPTY_WITHDRAWALS),
        blob_gas_used: cancun.then(|| g.blob_gas_used.unwrap_or_default()),
        excess_blob_gas: cancun.then(|| g.excess_blob_gas.unwrap_or_default()),
        parent_beacon_block_root: cancun.then_some(B256::ZERO),
        requests_hash: prague.then_some(EMPTY_REQUESTS_HASH),
        ..Default::default()
    }
}

/// Balance helper for the genesis builders.
pub(crate) fn ether(n: u64) -> U256 {
    U256::from(n) * U256::from(10u64).pow(U256::from(18))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forks_out_of_order_are_refused() {
        let config = |json: serde_json::Value| -> ChainConfig {
            serde_json::from_value(json).expect("a chain config")
        };
        let ordered = config(serde_json::json!({"chainId": 7, "homesteadBlock": 0,
            "eip150Block": 0, "eip155Block": 0, "eip158Block": 0, "byzantiumBlock": 0,
            "constantinopleBlock": 0, "petersburgBlock": 0, "istanbulBlock": 0,
            "berlinBlock": 0, "londonBlock": 0, "shanghaiTime": 0, "cancunTime": 10}));
        assert_eq!(check_fork_order(&ordered), Ok(()));
        let late_berlin = config(serde_json::json!({"chainId": 7, "homesteadBlock": 0,
            "eip150Block": 0, "eip155Block": 0, "eip158Block": 0, "byzantiumBlock": 0,
            "constantinopleBlock": 0, "petersburgBlock": 0, "istanbulBlock": 0,
            "berlinBlock": 10, "londonBlock": 5}));
        assert_eq!(
            check_fork_order(&late_berlin),
            Err("berlinBlock enabled at 10, but londonBlock enabled at 5".into())
        );
        let skipped = config(serde_json::json!({"chainId": 7, "homesteadBlock": 0,
            "eip150Block": 0, "eip155Block": 0, "eip158Block": 0, "byzantiumBlock": 0,
            "constantinopleBlock": 0, "petersburgBlock": 0, "istanbulBlock": 0,
            "berlinBlock": 0, "londonBlock": 0, "shanghaiTime": 0, "pragueTime": 5}));
        assert_eq!(
            check_fork_order(&skipped),
            Err("cancunTime not enabled, but pragueTime enabled at 5".into())
        );
        // Timed forks need the block-numbered ones before them.
        let no_london = config(serde_json::json!({"chainId": 7, "shanghaiTime": 0}));
        assert!(check_fork_order(&no_london)
            .is_err_and(|why| why.ends_with("but shanghaiTime enabled at 0")),);
        assert_eq!(check_fork_order(&dev_genesis().config), Ok(()));
    }

    #[test]
    fn execution_apis_genesis_hash() {
        let dir = std::env::var("SIMNODE_CONFORMANCE_DIR").unwrap_or_else(|_| {
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../shared/conformance/execution-apis"
            )
            .into()
        });
        let chain = load(&format!("{dir}/genesis.json")).expect("genesis loads");
        assert_eq!(
            chain.spec.genesis_header.hash(),
            "0x44fd89d504659cd58f48f4796b77a7e7012cf296a2409afa2f6c3cb99b5b3d99"
                .parse::<B256>()
                .unwrap()
        );
        assert_eq!(chain.spec.chain_id, 3503995874084926);
    }

    /// A JSON file without a chain configuration is no genesis (serde would make it mainnet).
    #[test]
    fn a_file_without_a_chain_configuration_is_refused() {
        let dir = std::env::temp_dir().join(format!("simnode-no-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in [
            ("empty.json", "{}"),
            (
                "no-chain-id.json",
                r#"{"config": {"homesteadBlock": 0}, "alloc": {}}"#,
            ),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            let Err(err) = load(path.to_str().unwrap()) else {
                panic!("{name} was taken as a genesis");
            };
            assert!(matches!(err, ChainError::NoConfig { .. }), "{name}: {err}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
