//! Limits a module must honour, set from the command line.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RpcLimits {
    /// Gas cap for eth_call / eth_estimateGas / trace calls, and the request-wide budget of
    /// eth_simulateV1 (`--rpc.gascap`); it is also the gas of a call that names none. Never
    /// zero: see [`RpcLimits::gas_cap_from_flag`].
    pub gas_cap: u64,
    /// Most blocks one eth_simulateV1 request may produce, filler blocks included.
    pub max_simulate_blocks: u64,
    /// Deadline of one eth_simulateV1 / trace_callMany / eth_call request.
    pub evm_timeout: Duration,
    /// How long an EVM request may run on the RPC thread that received it before it is
    /// restarted on the blocking pool (see [`crate::offload`]); zero: always the pool.
    pub evm_inline_budget: Duration,
    /// Most calls in one trace_callMany request.
    pub max_trace_calls: usize,
    /// Most bytes of vmTrace one request may build.
    pub max_vm_trace_bytes: usize,
    /// Tracing requests allowed to run at once.
    pub max_concurrent_traces: usize,
    /// Block range limit of eth_getLogs.
    pub max_logs_block_range: u64,
    /// Most logs one eth_getLogs answer may hold.
    pub max_logs: usize,
    /// How long eth_sendRawTransactionSync waits for its receipt when the request names no
    /// wait (or zero).
    pub tx_sync_timeout: Duration,
    /// The longest wait eth_sendRawTransactionSync grants; a longer request is cut to it.
    pub tx_sync_max_timeout: Duration,
    /// Whether eth_sendRawTransaction takes legacy transactions signed without a chain id
    /// (before EIP-155, replayable on every chain). geth refuses them unless told otherwise;
    /// a dev node takes them, as anvil does (deterministic deployment proxies need them).
    pub allow_unprotected_txs: bool,
    /// Most a transaction sent over RPC may pay for its gas at its fee cap, in wei (geth's
    /// `--rpc.txfeecap`); 0: no cap.
    pub tx_fee_cap: u128,
    /// Least tip per gas the pool takes (geth's `--txpool.pricelimit`).
    pub min_tip: u128,
    /// A dev node, which serves anvil's test methods: `web3_clientVersion` starts with
    /// `anvil`, as test helpers (hardhat-network-helpers) look for before they use them.
    pub anvil_compatible: bool,
}

impl RpcLimits {
    /// The cap `--rpc.gascap N` stands for. As in geth, 0 means no cap; it becomes half of
    /// `u64::MAX` (geth's figure too), so a call without `gas` still gets gas and sums of two
    /// caps cannot overflow.
    pub fn gas_cap_from_flag(flag: u64) -> u64 {
        if flag == 0 {
            u64::MAX / 2
        } else {
            flag
        }
    }

    /// The cap `--rpc.txfeecap ETHER` stands for, in wei (0: none).
    pub fn tx_fee_cap_from_ether(ether: f64) -> Result<u128, String> {
        if !ether.is_finite() || ether < 0.0 {
            return Err(format!(
                "--rpc.txfeecap {ether}: want a number of ether, 0 or more"
            ));
        }
        Ok((ether * 1e18) as u128)
    }

    /// The wait of an eth_sendRawTransactionSync request that asks for `requested_ms`: geth's
    /// rule, none or zero is the default and more than the maximum is the maximum.
    pub fn tx_sync_wait(&self, requested_ms: Option<u64>) -> Duration {
        match requested_ms {
            None | Some(0) => self.tx_sync_timeout.min(self.tx_sync_max_timeout),
            Some(ms) => Duration::from_millis(ms).min(self.tx_sync_max_timeout),
        }
    }
}

impl Default for RpcLimits {
    fn default() -> Self {
        Self {
            gas_cap: 50_000_000,
            max_simulate_blocks: 16,
            evm_timeout: Duration::from_secs(5),
            evm_inline_budget: Duration::from_millis(1),
            max_trace_calls: 64,
            max_vm_trace_bytes: 64 * 1024 * 1024,
            max_concurrent_traces: 2,
            max_logs_block_range: 10_000,
            max_logs: 20_000,
            tx_sync_timeout: Duration::from_secs(20),
            tx_sync_max_timeout: Duration::from_secs(60),
            allow_unprotected_txs: false,
            tx_fee_cap: 1_000_000_000_000_000_000,
            min_tip: 1,
            anvil_compatible: false,
        }
    }
}
