//! Signed transactions sent as EIP-2718 bytes (`eth_sendRawTransaction`,
//! `trace_rawTransaction`).

use alloy::{consensus::TxEnvelope, eips::Decodable2718};

use crate::{RpcError, RpcResult};

/// Decodes one whole transaction: bytes that do not decode, or that go on past it, are -32602.
pub fn decode(raw: &[u8]) -> RpcResult<TxEnvelope> {
    let mut buf = raw;
    let tx = TxEnvelope::decode_2718(&mut buf)
        .map_err(|e| RpcError::invalid_params(format!("invalid transaction: {e}")))?;
    if !buf.is_empty() {
        return Err(RpcError::invalid_params(
            "invalid transaction: trailing bytes",
        ));
    }
    Ok(tx)
}
