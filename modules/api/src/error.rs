//! The one error type RPC modules return, and the one place its JSON-RPC codes live.

use std::time::Duration;

use alloy::primitives::{Bytes, B256};
use jsonrpsee::types::ErrorObjectOwned;

pub type RpcResult<T> = Result<T, RpcError>;

/// Errors of the eth_simulateV1 family (codes from the execution-apis spec, `eth/execute.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimulateCode {
    NonceTooLow,
    NonceTooHigh,
    BaseFeeTooLow,
    IntrinsicGas,
    InsufficientFunds,
    BlockGasLimitExceeded,
    BlockNumberNotIncreasing,
    TimestampNotIncreasing,
    PrecompileSelfMove,
    PrecompileDuplicateMove,
    SenderNotEoa,
    MaxInitCodeSize,
    ClientLimitExceeded,
    /// The sender's nonce is at its maximum: geth answers -32603 with its own message (no
    /// "internal error" wording, nothing failed inside the node).
    NonceMaxValue,
    /// Any other refusal of a call (blob and authorization fields, ...): the spec gives it no
    /// code and geth answers -32603 with its own message, as for [`Self::NonceMaxValue`].
    Unclassified,
}

impl SimulateCode {
    pub const fn code(self) -> i32 {
        match self {
            Self::NonceTooLow => -38010,
            Self::NonceTooHigh => -38011,
            Self::BaseFeeTooLow => -38012,
            Self::IntrinsicGas => -38013,
            Self::InsufficientFunds => -38014,
            Self::BlockGasLimitExceeded => -38015,
            Self::BlockNumberNotIncreasing => -38020,
            Self::TimestampNotIncreasing => -38021,
            Self::PrecompileSelfMove => -38022,
            Self::PrecompileDuplicateMove => -38023,
            Self::SenderNotEoa => -38024,
            Self::MaxInitCodeSize => -38025,
            Self::ClientLimitExceeded => -38026,
            Self::NonceMaxValue | Self::Unclassified => -32603,
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum RpcError {
    /// -32602: a parameter is missing or malformed; the message names it.
    #[error("{0}")]
    InvalidParams(String),
    /// -32601: the method does not exist or is not served on this network.
    #[error("{0}")]
    MethodNotAvailable(String),
    /// -32000 "header not found": an unknown or future block was asked for.
    #[error("header not found")]
    HeaderNotFound,
    /// -32000 "safe block not found" / "finalized block not found": the tag was asked for
    /// before a consensus client (or the dev miner) set it; geth's answer.
    #[error("{0} block not found")]
    TagNotSet(crate::block_id::BlockTag),
    /// -39001 "unknown block": reth's answer for the same (the trace module, whose reference
    /// is reth).
    #[error("unknown block")]
    UnknownBlock,
    /// -32001: the resource asked for does not exist (reth's "block not found: X" for trace calls).
    #[error("{0}")]
    ResourceNotFound(String),
    /// -32000 with geth's wording (transaction pool rejections, "account X is not a precompile", ...).
    #[error("{0}")]
    Server(String),
    /// -32003: the transaction cannot run on this state or block (funds, fee fields, blob or
    /// authorization fields, ...): reth's "transaction rejected" code, used by the trace
    /// module, whose reference is reth.
    #[error("{0}")]
    TransactionRejected(String),
    /// 3: the EVM reverted; `data` is the revert output.
    #[error("{message}")]
    Reverted { message: String, data: Bytes },
    /// -32015: any other VM failure (out of gas, invalid opcode, ...).
    #[error("{0}")]
    VmError(String),
    /// -32016: the request ran past its deadline.
    #[error("request timed out after {0} ms")]
    Timeout(u64),
    /// -32005: a configured limit was exceeded (not the per-key rate limit, which lives in the server).
    #[error("{0}")]
    LimitExceeded(String),
    /// -38026: a request asks for more than geth's fixed bounds allow (slots of
    /// eth_getStorageValues; eth_simulateV1's own are [`SimulateCode::ClientLimitExceeded`]).
    #[error("{0}")]
    ClientLimitExceeded(String),
    /// -380xx: eth_simulateV1's validation and limit errors.
    #[error("{message}")]
    Simulate { code: SimulateCode, message: String },
    /// 4445: the block exists but predates what was asked of it (a block access list before Amsterdam).
    #[error("{0}")]
    PreForkBlock(String),
    /// 4 (EIP-7966): eth_sendRawTransactionSync's transaction went into the pool, but no block
    /// took it within the wait; `data` is its hash, to follow it with.
    #[error(
        "the transaction was added to the transaction pool but wasn't processed in {waited:?}"
    )]
    TxSyncTimeout { hash: B256, waited: Duration },
    /// -32603: something failed inside the node.
    #[error("internal error: {0}")]
    Internal(String),
}

impl RpcError {
    pub fn invalid_params(msg: impl Into<String>) -> Self {
        Self::InvalidParams(msg.into())
    }

    pub fn internal(err: impl std::fmt::Display) -> Self {
        Self::Internal(err.to_string())
    }

    pub fn simulate(code: SimulateCode, message: impl Into<String>) -> Self {
        Self::Simulate {
            code,
            message: message.into(),
        }
    }

    /// The JSON-RPC error code of this error.
    pub const fn code(&self) -> i32 {
        match self {
            Self::InvalidParams(_) => -32602,
            Self::MethodNotAvailable(_) => -32601,
            Self::HeaderNotFound | Self::TagNotSet(_) | Self::Server(_) => -32000,
            Self::UnknownBlock => -39001,
            Self::ResourceNotFound(_) => -32001,
            Self::TransactionRejected(_) => -32003,
            Self::Reverted { .. } => 3,
            Self::VmError(_) => -32015,
            Self::Timeout(_) => -32016,
            Self::LimitExceeded(_) => -32005,
            Self::ClientLimitExceeded(_) => SimulateCode::ClientLimitExceeded.code(),
            Self::Simulate { code, .. } => code.code(),
            Self::PreForkBlock(_) => 4445,
            Self::TxSyncTimeout { .. } => 4,
            Self::Internal(_) => -32603,
        }
    }
}

impl From<RpcError> for ErrorObjectOwned {
    fn from(err: RpcError) -> Self {
        let code = err.code();
        match err {
            RpcError::Reverted { message, data } => {
                ErrorObjectOwned::owned(code, message, Some(data))
            }
            RpcError::TxSyncTimeout { hash, .. } => {
                ErrorObjectOwned::owned(code, err.to_string(), Some(hash))
            }
            other => ErrorObjectOwned::owned(code, other.to_string(), None::<()>),
        }
    }
}

impl From<crate::state::StateError> for RpcError {
    fn from(err: crate::state::StateError) -> Self {
        Self::Internal(err.to_string())
    }
}
