//! What a module needs to know about the chain: id, fork schedule, blob schedule, genesis.
//! The node builds it (built-in networks or a geth genesis.json); modules only read it.

use alloy::{
    consensus::{Header, Sealed},
    eips::{eip1559::BaseFeeParams, eip7840::BlobParams},
    primitives::Address,
};
use alloy_evm::{eth::spec::EthExecutorSpec, EvmEnv};
use alloy_hardforks::{EthereumChainHardforks, EthereumHardfork, EthereumHardforks, ForkCondition};
use revm::primitives::hardfork::SpecId;

/// EIP-1559's base fee of the first London block.
pub const INITIAL_BASE_FEE: u64 = 1_000_000_000;

#[derive(Debug, Clone)]
pub struct ChainSpec {
    /// `dev`, `mainnet`, `sepolia`, `hoodi` or `custom`.
    pub name: String,
    pub chain_id: u64,
    pub hardforks: EthereumChainHardforks,
    /// Blob parameters by activation timestamp, ascending (Cancun, Prague, Osaka, BPO forks).
    pub blob_schedule: Vec<(u64, BlobParams)>,
    pub deposit_contract: Option<Address>,
    pub genesis_header: Sealed<Header>,
}

impl ChainSpec {
    /// Blob parameters in force at `timestamp`, `None` before Cancun.
    pub fn blob_params_at(&self, timestamp: u64) -> Option<BlobParams> {
        if !self.is_cancun_active_at_timestamp(timestamp) {
            return None;
        }
        self.blob_schedule
            .iter()
            .rev()
            .find(|(at, _)| *at <= timestamp)
            .map(|(_, params)| *params)
            .or(Some(BlobParams::cancun()))
    }

    pub fn spec_id(&self, number: u64, timestamp: u64) -> SpecId {
        // As geth's rules: forks by time need London by number, so a block numbered before
        // London (a call's block override can make one) keeps the rules of its number.
        let by_number = alloy_evm::spec_by_timestamp_and_block_number(self, 0, number);
        if by_number < SpecId::LONDON {
            return by_number;
        }
        alloy_evm::spec_by_timestamp_and_block_number(self, timestamp, number)
    }

    /// The EVM environment to execute `header`'s block in. A dev block holding impersonated
    /// transactions (marked by its `extraData`, see [`crate::impersonation`]) runs with
    /// EIP-3607 off, so that the contract sending one is not refused.
    pub fn evm_env(&self, header: &Header) -> EvmEnv {
        let mut env = EvmEnv::for_eth_block(
            header,
            self,
            self.chain_id,
            self.blob_params_at(header.timestamp),
        );
        if header.extra_data[..] == *crate::impersonation::IMPERSONATION_EXTRA_DATA {
            env.cfg_env.disable_eip3607 = true;
        }
        env
    }

    /// Base fee of the child of `parent`, `None` before London.
    pub fn next_base_fee(&self, parent: &Header) -> Option<u64> {
        if !self.is_london_active_at_block(parent.number + 1) {
            return None;
        }
        match parent.base_fee_per_gas {
            None => Some(INITIAL_BASE_FEE),
            Some(_) => parent.next_block_base_fee(BaseFeeParams::ethereum()),
        }
    }

    /// Excess blob gas of the child of `parent` at `timestamp`, `None` before Cancun.
    pub fn next_excess_blob_gas(&self, parent: &Header, timestamp: u64) -> Option<u64> {
        let params = self.blob_params_at(timestamp)?;
        let (excess, used) = match (parent.excess_blob_gas, parent.blob_gas_used) {
            (Some(e), Some(u)) => (e, u),
            _ => return Some(0),
        };
        Some(params.next_block_excess_blob_gas_osaka(
            excess,
            used,
            parent.base_fee_per_gas.unwrap_or_default(),
        ))
    }

    /// Whether the block at `number` comes after the merge (proof of stake).
    pub fn is_post_merge(&self, number: u64) -> bool {
        self.is_paris_active_at_block(number)
    }
}

impl EthereumHardforks for ChainSpec {
    fn ethereum_fork_activation(&self, fork: EthereumHardfork) -> ForkCondition {
        self.hardforks.ethereum_fork_activation(fork)
    }
}

impl EthExecutorSpec for ChainSpec {
    fn deposit_contract_address(&self) -> Option<Address> {
        self.deposit_contract
    }
}
