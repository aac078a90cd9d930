//! The block's system calls (EIP-2935 and EIP-4788 before the calls, EIP-7002 and EIP-7251
//! after them), remembered per base block.
//!
//! Every simulated block makes these four calls, and for the first block of a request they
//! read nothing but the base state: on a busy head every request repeats the same four
//! executions (about a tenth of a one-transfer simulation). A call's result depends only on
//! its inputs, the block environment, the accounts it loads and the code at their addresses,
//! so while the simulation has not loaded any of those accounts (they still hold the base
//! state) and no precompile was moved, the result recorded for the same inputs on the same
//! base block is the result. Anything else runs the call.
//!
//! alloy-evm's `SystemCaller` still decides which calls a block makes and what their results
//! mean; [`BlockEvm`] only answers its `transact_system_call`.

use std::{
    ops::{Deref, DerefMut},
    sync::{Arc, RwLock},
};

use alloy::primitives::{map::HashMap, Address, Bytes};
use alloy_evm::{eth::EthEvm, Evm, EvmEnv};
use revm::{
    context::{BlockEnv, CfgEnv, TxEnv},
    context_interface::result::{EVMError, HaltReason, ResultAndState},
    primitives::hardfork::SpecId,
    state::EvmState,
};
use simnode_api::StateError;

use crate::{db::SimDb, inspector::SimInspector, precompiles::SimPrecompiles};

/// Block environments kept per base block (a request with unusual block overrides adds one per
/// simulated block), and results kept per block environment (a block makes four system calls);
/// past these nothing more is kept.
const MAX_BLOCKS: usize = 256;
const MAX_CALLS_PER_BLOCK: usize = 8;

/// What a system call's result can depend on besides its own inputs and the state it loads:
/// the same for every system call of one simulated block.
#[derive(PartialEq, Eq, Hash)]
struct BlockKey {
    block: BlockEnv,
    spec: SpecId,
    disable_nonce_check: bool,
    disable_base_fee: bool,
}

/// A system call's own inputs.
#[derive(PartialEq, Eq, Hash)]
struct CallKey {
    caller: Address,
    contract: Address,
    data: Bytes,
}

type Recorded = Arc<ResultAndState<HaltReason>>;

/// System-call results on one base block (held with the base block's shared reads, so a new
/// head starts afresh).
#[derive(Debug, Default)]
pub struct SystemCallMemo {
    blocks: RwLock<HashMap<BlockKey, Arc<BlockCalls>>>,
}

/// The results recorded for one block environment.
#[derive(Debug, Default)]
pub struct BlockCalls {
    results: RwLock<HashMap<CallKey, Recorded>>,
}

impl std::fmt::Debug for BlockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockKey")
            .field("number", &self.block.number)
            .field("timestamp", &self.block.timestamp)
            .finish()
    }
}

impl std::fmt::Debug for CallKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallKey")
            .field("contract", &self.contract)
            .finish()
    }
}

impl SystemCallMemo {
    /// The results of the block environment `evm` runs in (looked up once per block rather
    /// than hashing the block environment on every call).
    fn for_block(&self, evm: &SimEvm<'_, '_>) -> Option<Arc<BlockCalls>> {
        let cfg = evm.cfg_env();
        let key = BlockKey {
            block: evm.block().clone(),
            spec: cfg.spec,
            disable_nonce_check: cfg.disable_nonce_check,
            disable_base_fee: cfg.disable_base_fee,
        };
        if let Some(calls) = self.blocks.read().ok()?.get(&key) {
            return Some(calls.clone());
        }
        let mut blocks = self.blocks.write().ok()?;
        if blocks.len() >= MAX_BLOCKS && !blocks.contains_key(&key) {
            return None;
        }
        Some(blocks.entry(key).or_default().clone())
    }
}

impl BlockCalls {
    fn get(&self, key: &CallKey) -> Option<Recorded> {
        self.results.read().ok()?.get(key).cloned()
    }

    /// Records `result` without the slots the call only read: a hit is committed to an
    /// account the simulation has not loaded, whose other slots still read from the base
    /// block, where they hold the values the call read.
    fn insert(&self, key: CallKey, mut result: ResultAndState<HaltReason>) {
        for account in result.state.values_mut() {
            account.storage.retain(|_, slot| slot.is_changed());
        }
        if let Ok(mut results) = self.results.write() {
            if results.len() < MAX_CALLS_PER_BLOCK {
                results.insert(key, Arc::new(result));
            }
        }
    }
}

pub type SimEvm<'db, 'i> = EthEvm<&'db mut SimDb, &'i mut SimInspector, SimPrecompiles>;

/// The EVM of one simulated block: the simulation's EVM, whose system calls are answered from
/// the base block's [`SystemCallMemo`] when they can be.
pub struct BlockEvm<'db, 'i> {
    evm: SimEvm<'db, 'i>,
    /// The recorded results for this block's environment; `None` once the request has moved
    /// or replaced a precompile (which the accounts a call loads do not show). Overridden
    /// accounts are in the cache and so never count as untouched.
    memo: Option<Arc<BlockCalls>>,
}

impl<'db, 'i> BlockEvm<'db, 'i> {
    pub fn new(evm: SimEvm<'db, 'i>, memo: Option<Arc<SystemCallMemo>>) -> Self {
        let memo = memo.and_then(|m| m.for_block(&evm));
        Self { evm, memo }
    }

    /// Whether every account in `state` is still as the base block has it: the simulation has
    /// not loaded it (the cache loads an account on its first read and keeps every write), so
    /// a call loading these accounts reads exactly what it read on the base.
    fn untouched_by_simulation(&self, state: &EvmState) -> bool {
        let cache = &self.evm.db().cache.accounts;
        state.keys().all(|address| !cache.contains_key(address))
    }
}

impl<'db, 'i> Deref for BlockEvm<'db, 'i> {
    type Target = SimEvm<'db, 'i>;

    fn deref(&self) -> &Self::Target {
        &self.evm
    }
}

impl DerefMut for BlockEvm<'_, '_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.evm
    }
}

impl<'db, 'i> Evm for BlockEvm<'db, 'i> {
    type DB = &'db mut SimDb;
    type Tx = TxEnv;
    type Error = EVMError<StateError>;
    type HaltReason = HaltReason;
    type Spec = SpecId;
    type BlockEnv = BlockEnv;
    type Precompiles = SimPrecompiles;
    type Inspector = &'i mut SimInspector;

    fn block(&self) -> &BlockEnv {
        self.evm.block()
    }

    fn cfg_env(&self) -> &CfgEnv<SpecId> {
        self.evm.cfg_env()
    }

    fn chain_id(&self) -> u64 {
        self.evm.chain_id()
    }

    fn transact_raw(&mut self, tx: TxEnv) -> Result<ResultAndState<HaltReason>, Self::Error> {
        self.evm.transact_raw(tx)
    }

    fn transact_system_call(
        &mut self,
        caller: Address,
        contract: Address,
        data: Bytes,
    ) -> Result<ResultAndState<HaltReason>, Self::Error> {
        let Some(memo) = self.memo.clone() else {
            return self.evm.transact_system_call(caller, contract, data);
        };
        let key = CallKey {
            caller,
            contract,
            data: data.clone(),
        };
        if let Some(known) = memo.get(&key) {
            if self.untouched_by_simulation(&known.state) {
                return Ok((*known).clone());
            }
        }
        // The accounts a system call can load, and which of them the simulation has not
        // loaded yet (the call itself loads them into the cache, so this is asked before).
        let cache = &self.evm.db().cache.accounts;
        let unloaded: Vec<Address> = [caller, contract, self.evm.block().beneficiary]
            .into_iter()
            .filter(|address| !cache.contains_key(address))
            .collect();
        let result = self.evm.transact_system_call(caller, contract, data)?;
        if result
            .state
            .keys()
            .all(|address| unloaded.contains(address))
        {
            memo.insert(key, result.clone());
        }
        Ok(result)
    }

    fn finish(self) -> (Self::DB, EvmEnv<SpecId>) {
        self.evm.finish()
    }

    fn set_inspector_enabled(&mut self, enabled: bool) {
        self.evm.set_inspector_enabled(enabled);
    }

    fn components(&self) -> (&Self::DB, &Self::Inspector, &Self::Precompiles) {
        self.evm.components()
    }

    fn components_mut(&mut self) -> (&mut Self::DB, &mut Self::Inspector, &mut Self::Precompiles) {
        self.evm.components_mut()
    }
}
