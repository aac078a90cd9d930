//! The parameters of the debug methods, parsed as geth parses them.
//!
//! geth types these parameters strictly (`rpc.BlockNumberOrHash`, `rpc.BlockNumber`,
//! `common.Hash`): numbers are 0x-prefixed hex strings or tags, hashes are 0x-prefixed 32-byte
//! hex. Decimal strings, JSON numbers and unprefixed hex are -32602 here too, unlike the eth
//! methods, which accept decimal numbers as the hosted service does.

use alloy::primitives::B256;
use serde_json::Value;
use simnode_api::{block_id::BlockTag, BlockParam, RpcError, RpcResult};

fn invalid(msg: impl std::fmt::Display) -> RpcError {
    RpcError::invalid_params(format!("invalid argument 0: {msg}"))
}

fn tag(s: &str) -> Option<BlockTag> {
    Some(match s {
        "latest" => BlockTag::Latest,
        "earliest" => BlockTag::Earliest,
        "pending" => BlockTag::Pending,
        "safe" => BlockTag::Safe,
        "finalized" => BlockTag::Finalized,
        _ => return None,
    })
}

/// A quantity as geth's `hexutil.Uint64` reads it: 0x prefix, no leading zeros, at most 64 bits.
fn hex_u64(s: &str) -> RpcResult<u64> {
    let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) else {
        return Err(invalid("hex string without 0x prefix"));
    };
    if hex.is_empty() {
        return Err(invalid("hex string \"0x\""));
    }
    if hex.len() > 1 && hex.starts_with('0') {
        return Err(invalid("hex number with leading zero digits"));
    }
    if hex.len() > 16 {
        return Err(invalid("hex number > 64 bits"));
    }
    u64::from_str_radix(hex, 16).map_err(|_| invalid("invalid hex string"))
}

/// A 32-byte hash as geth's `common.Hash` reads it.
pub(crate) fn hash(value: &Value) -> RpcResult<B256> {
    let Value::String(s) = value else {
        return Err(invalid(format!(
            "json: cannot unmarshal {} into Go value of type common.Hash",
            json_kind(value)
        )));
    };
    let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) else {
        return Err(invalid(
            "json: cannot unmarshal hex string without 0x prefix into Go value of type common.Hash",
        ));
    };
    if hex.len() != 64 {
        return Err(invalid(format!(
            "json: cannot unmarshal hex string of odd length or wrong size ({} bytes) into Go value of type common.Hash",
            hex.len() / 2
        )));
    }
    s.parse::<B256>().map_err(|_| {
        invalid("json: cannot unmarshal invalid hex string into Go value of type common.Hash")
    })
}

/// A Go `int` (argument `index`): a JSON number without a fraction.
pub(crate) fn int(value: &Value, index: usize) -> RpcResult<i64> {
    value.as_i64().ok_or_else(|| {
        RpcError::invalid_params(format!(
            "invalid argument {index}: json: cannot unmarshal {} into Go value of type int",
            json_kind(value)
        ))
    })
}

/// Bytes as geth's `hexutil.Bytes` reads them: a 0x-prefixed hex string of even length.
pub(crate) fn bytes(value: &Value) -> RpcResult<Vec<u8>> {
    let Value::String(s) = value else {
        return Err(invalid(format!(
            "json: cannot unmarshal {} into Go value of type hexutil.Bytes",
            json_kind(value)
        )));
    };
    let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) else {
        return Err(invalid(
            "json: cannot unmarshal hex string without 0x prefix into Go value of type hexutil.Bytes",
        ));
    };
    alloy::hex::decode(hex).map_err(|_| {
        invalid("json: cannot unmarshal invalid hex string into Go value of type hexutil.Bytes")
    })
}

/// A block number or tag (`rpc.BlockNumber`): no hashes.
pub(crate) fn block_number(value: &Value) -> RpcResult<BlockParam> {
    let Value::String(s) = value else {
        return Err(invalid(format!(
            "json: cannot unmarshal {} into Go value of type string",
            json_kind(value)
        )));
    };
    if let Some(tag) = tag(s) {
        return Ok(BlockParam::Tag(tag));
    }
    hex_u64(s).map(BlockParam::Number)
}

/// A block number, tag, hash or EIP-1898 object (`rpc.BlockNumberOrHash`).
pub(crate) fn block_number_or_hash(value: &Value) -> RpcResult<BlockParam> {
    match value {
        Value::String(s) if s.len() == 66 => hash(value).map(|hash| BlockParam::Hash {
            hash,
            require_canonical: false,
        }),
        Value::String(_) => block_number(value),
        Value::Object(map) => match (map.get("blockHash"), map.get("blockNumber")) {
            (Some(_), Some(_)) => Err(invalid(
                "cannot specify both BlockHash and BlockNumber, choose one or the other",
            )),
            (Some(h), None) => {
                let require_canonical = match map.get("requireCanonical") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(invalid("requireCanonical must be a boolean")),
                };
                Ok(BlockParam::Hash {
                    hash: hash(h)?,
                    require_canonical,
                })
            }
            (None, Some(n)) => block_number(n),
            (None, None) => Err(invalid("neither BlockHash nor BlockNumber specified")),
        },
        other => Err(invalid(format!(
            "json: cannot unmarshal {} into Go value of type string",
            json_kind(other)
        ))),
    }
}

/// A required parameter: missing or `null` is -32602.
pub(crate) fn required(value: Option<Value>, what: &str) -> RpcResult<Value> {
    match value {
        None | Some(Value::Null) => Err(RpcError::invalid_params(format!(
            "missing value for required argument 0 ({what})"
        ))),
        Some(v) => Ok(v),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_must_be_prefixed_hex() {
        assert_eq!(block_number(&json!("0x2")).unwrap(), BlockParam::Number(2));
        assert_eq!(
            block_number(&json!("latest")).unwrap(),
            BlockParam::Tag(BlockTag::Latest)
        );
        for bad in [
            json!("2"),
            json!(2),
            json!("0x"),
            json!("0x02"),
            json!("0x1ffffffffffffffff"),
        ] {
            assert_eq!(block_number(&bad).unwrap_err().code(), -32602, "{bad}");
        }
        let h = format!("0x{}", "ab".repeat(32));
        assert!(block_number(&json!(h)).is_err(), "a hash is not a number");
        assert_eq!(
            block_number_or_hash(&json!(h)).unwrap(),
            BlockParam::Hash {
                hash: h.parse().unwrap(),
                require_canonical: false
            }
        );
        assert_eq!(
            block_number_or_hash(&json!({"blockNumber": "0x5"})).unwrap(),
            BlockParam::Number(5)
        );
        assert!(block_number_or_hash(&json!({"blockNumber": "5"})).is_err());
        assert!(hash(&json!("ab".repeat(32))).is_err());
        assert!(hash(&json!(format!("0x{}", "ab".repeat(31)))).is_err());
    }
}
