//! eth_getLogs over stored receipts, with the block-range and result-size limits.

use alloy::{
    consensus::ReceiptEnvelope,
    eips::BlockNumberOrTag,
    rpc::types::{Filter, FilterBlockOption, Log},
};
use serde_json::Value;
use simnode_api::{
    block_id::BlockTag, BlockParam, ModuleContext, RpcError, RpcResult, StoredBlock,
};

/// The criteria's fields under the names alloy decodes, as geth's decoder reads them: key
/// names in any letter case (an exact match first), other keys ignored, and `null` criteria
/// as none at all.
fn criteria_fields(criteria: &Value) -> Value {
    const FIELDS: [&str; 5] = ["fromBlock", "toBlock", "address", "topics", "blockHash"];
    let Some(given) = criteria.as_object() else {
        // Not an object: left for the decoder to refuse (`null` reads as `{}`).
        return if criteria.is_null() {
            Value::Object(Default::default())
        } else {
            criteria.clone()
        };
    };
    let fields = FIELDS
        .iter()
        .filter_map(|name| {
            let value = given.get(*name).or_else(|| {
                given
                    .iter()
                    .find(|(key, _)| key.eq_ignore_ascii_case(name))
                    .map(|(_, value)| value)
            })?;
            Some((name.to_string(), value.clone()))
        })
        .collect();
    Value::Object(fields)
}

/// geth's checks of the addresses and topics, with its words: alloy's decoder says only that
/// no form matched, and takes a `null` in an address list for "any address".
fn check_values(criteria: &Value) -> Result<(), String> {
    // Tags in geth's spelling only, as the block methods take them.
    for bound in ["fromBlock", "toBlock"] {
        if let Some(Value::String(tag)) = criteria.get(bound) {
            let known = ["earliest", "latest", "pending", "safe", "finalized"];
            let hex = tag.starts_with("0x") || tag.starts_with("0X");
            if !hex && !known.contains(&tag.as_str()) {
                return Err(format!("{bound}: hex string without 0x prefix"));
            }
        }
    }
    match criteria.get("address") {
        None | Some(Value::Null) => {}
        Some(Value::String(address)) => {
            check_hex(address, 20, "address").map_err(|e| format!("invalid address: {e}"))?
        }
        Some(Value::Array(addresses)) => {
            for (i, address) in addresses.iter().enumerate() {
                let Value::String(address) = address else {
                    return Err(format!("non-string address at index {i}"));
                };
                check_hex(address, 20, "address")
                    .map_err(|e| format!("invalid address at index {i}: {e}"))?;
            }
        }
        Some(_) => return Err("invalid addresses in query".into()),
    }
    let topic = |topic: &Value| match topic {
        Value::Null => Ok(()),
        Value::String(topic) => check_hex(topic, 32, "topic"),
        _ => Err("invalid topic(s)".to_string()),
    };
    match criteria.get("topics") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(positions)) => positions.iter().try_for_each(|position| match position {
            Value::Array(alternatives) => alternatives.iter().try_for_each(topic),
            single => topic(single),
        }),
        Some(_) => Err("invalid topic(s)".into()),
    }
}

/// `text` as 0x-prefixed hex of `len` bytes, or geth's reason why not.
fn check_hex(text: &str, len: usize, what: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("empty hex string".into());
    }
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .ok_or("hex string without 0x prefix")?;
    if digits.len() % 2 == 1 {
        return Err("hex string of odd length".into());
    }
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("invalid hex string".into());
    }
    if digits.len() / 2 != len {
        return Err(format!(
            "hex has invalid length {} after decoding; expected {len} for {what}",
            digits.len() / 2
        ));
    }
    Ok(())
}

/// A log filter as the client wrote it: alloy's [`Filter`] and how many topic positions the
/// client gave. alloy keeps four positions whatever was sent, so `[null, null]` and `[]` read
/// the same to it; geth skips a log with fewer topics than positions given, wildcards or not.
#[derive(Debug, Clone)]
pub struct LogFilter {
    pub filter: Filter,
    topic_positions: usize,
}

/// Most addresses a filter may name, and alternatives one topic position may list (geth's
/// `LogQueryLimit` and `maxSubTopics`).
const MAX_ADDRESSES: usize = 1_000;
const MAX_SUB_TOPICS: usize = 1_000;
/// Most topic positions a filter may name (geth's `maxTopics`).
const MAX_TOPICS: usize = 4;

impl LogFilter {
    /// Parses filter criteria given as argument `arg`. As in geth, criteria that do not decode
    /// are -32602 naming the argument, and so are more than [`MAX_TOPICS`] topic positions or
    /// [`MAX_SUB_TOPICS`] alternatives in one (geth refuses them while decoding); more than
    /// [`MAX_ADDRESSES`] addresses is geth's -32000, refused once the criteria decoded.
    pub fn parse(criteria: &Value, arg: usize) -> RpcResult<Self> {
        let invalid = |e: &dyn std::fmt::Display| {
            RpcError::invalid_params(format!("invalid argument {arg}: {e}"))
        };
        let criteria = &criteria_fields(criteria);
        let given = |key: &str| criteria.get(key).is_some_and(|v| !v.is_null());
        if given("blockHash") && (given("fromBlock") || given("toBlock")) {
            return Err(invalid(
                &"cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other",
            ));
        }
        check_values(criteria).map_err(|e| invalid(&e))?;
        if let Some(topics) = criteria.get("topics").and_then(Value::as_array) {
            let crowded = topics
                .iter()
                .any(|t| t.as_array().is_some_and(|alts| alts.len() > MAX_SUB_TOPICS));
            if topics.len() > MAX_TOPICS || crowded {
                return Err(invalid(&"exceed max topics"));
            }
        }
        let filter = Self::from_value(criteria).map_err(|e| invalid(&e))?;
        let addresses = criteria.get("address").and_then(Value::as_array);
        if addresses.is_some_and(|a| a.len() > MAX_ADDRESSES) {
            return Err(RpcError::Server(
                "exceed max addresses or topics per search position".into(),
            ));
        }
        Ok(filter)
    }

    /// Parses filter criteria; `Err` is serde's message.
    fn from_value(criteria: &Value) -> Result<Self, serde_json::Error> {
        let filter: Filter = serde_json::from_value(criteria.clone())?;
        let topic_positions = criteria
            .get("topics")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        Ok(Self {
            filter,
            topic_positions,
        })
    }

    /// The block range a filter that follows new blocks (a polled filter or a `logs`
    /// subscription) may have, checked when it is installed, as geth's `SubscribeLogs`: from the
    /// head on (the default), between two numbers in order, or from a number on. Pending logs
    /// are gone from geth; safe, finalized and earliest are refused with the other ranges.
    pub fn check_live_range(&self) -> RpcResult<()> {
        let FilterBlockOption::Range {
            from_block,
            to_block,
        } = self.filter.block_option
        else {
            return Ok(());
        };
        use BlockNumberOrTag::{Latest, Number, Pending};
        let from = from_block.unwrap_or(Latest);
        let to = to_block.unwrap_or(Latest);
        if from == Pending || to == Pending {
            return Err(pending_logs());
        }
        match (from, to) {
            (Latest, Latest) | (Number(_), Latest) => Ok(()),
            (Number(from), Number(to)) if to >= from => Ok(()),
            _ => Err(invalid_range()),
        }
    }

    /// Whether the filter's block numbers (if it names any) take in block `number`; a tag
    /// bounds nothing here, as in geth's live filtering.
    pub fn covers_block(&self, number: u64) -> bool {
        let FilterBlockOption::Range {
            from_block,
            to_block,
        } = self.filter.block_option
        else {
            return true;
        };
        let after_from = match from_block {
            Some(BlockNumberOrTag::Number(from)) => number >= from,
            _ => true,
        };
        let before_to = match to_block {
            Some(BlockNumberOrTag::Number(to)) => number <= to,
            _ => true,
        };
        after_from && before_to
    }

    /// How many addresses and topics the filter names (what it holds for its life).
    pub fn criteria_count(&self) -> usize {
        let topics: usize = self.filter.topics.iter().map(|t| t.len()).sum();
        self.filter.address.len() + topics
    }

    pub fn matches(&self, log: &alloy::primitives::Log) -> bool {
        log.topics().len() >= self.topic_positions && self.filter.matches(log)
    }

    pub fn matches_bloom(&self, bloom: alloy::primitives::Bloom) -> bool {
        self.filter.matches_bloom(bloom)
    }
}

/// geth's refusal of a range that can hold no block.
fn invalid_range() -> RpcError {
    RpcError::invalid_params("invalid block range params")
}

/// geth answers no logs of the pending block, whether polled, followed or asked for.
fn pending_logs() -> RpcError {
    RpcError::invalid_params("pending logs are not supported")
}

/// The block number a range bound names (`None` is the head), in geth's words when a tag
/// has no block yet.
fn resolve_bound(
    ctx: &ModuleContext,
    bound: Option<BlockNumberOrTag>,
    head: u64,
) -> RpcResult<u64> {
    let (param, missing) = match bound {
        None | Some(BlockNumberOrTag::Latest) => return Ok(head),
        Some(BlockNumberOrTag::Number(n)) => return Ok(n),
        Some(BlockNumberOrTag::Pending) => return Err(pending_logs()),
        Some(BlockNumberOrTag::Earliest) => (BlockTag::Earliest, "earliest header not found"),
        Some(BlockNumberOrTag::Safe) => (BlockTag::Safe, "safe header not found"),
        Some(BlockNumberOrTag::Finalized) => (BlockTag::Finalized, "finalized header not found"),
    };
    ctx.chain
        .resolve(&BlockParam::Tag(param))?
        .ok_or_else(|| RpcError::Server(missing.into()))
}

pub fn get_logs(ctx: &ModuleContext, raw: &Value) -> RpcResult<Vec<Log>> {
    let filter = LogFilter::parse(raw, 0)?;
    let head = ctx.chain.head().latest;
    let (from, to) = match filter.filter.block_option {
        FilterBlockOption::AtBlockHash(hash) => {
            let n = ctx
                .chain
                .block_number(&hash)?
                .ok_or_else(|| RpcError::Server("unknown block".into()))?;
            (n, n)
        }
        FilterBlockOption::Range {
            from_block,
            to_block,
        } => {
            if [from_block, to_block].contains(&Some(BlockNumberOrTag::Pending)) {
                return Err(pending_logs());
            }
            if let Some(BlockNumberOrTag::Number(n)) = to_block {
                if n > head {
                    return Err(RpcError::invalid_params(
                        "block range extends beyond current head block",
                    ));
                }
            }
            let from = resolve_bound(ctx, from_block, head)?;
            let to = resolve_bound(ctx, to_block, head)?;
            // `to` is at most the head here: a start past it is a range in the wrong order.
            if from > to {
                return Err(invalid_range());
            }
            (from, to)
        }
    };
    if to - from >= ctx.limits.max_logs_block_range {
        return Err(RpcError::LimitExceeded(format!(
            "block range too large: {} blocks, at most {} allowed",
            to - from + 1,
            ctx.limits.max_logs_block_range
        )));
    }
    let mut out = Vec::new();
    for number in from..=to {
        let Some(header) = ctx.chain.header(number)? else {
            break;
        };
        if !filter.matches_bloom(header.logs_bloom) {
            continue;
        }
        let Some(block) = ctx.chain.block(number)? else {
            break;
        };
        let Some(receipts) = ctx.chain.receipts(number)? else {
            continue;
        };
        out.extend(block_logs(&filter, &block, &receipts, false));
        if out.len() > ctx.limits.max_logs {
            return Err(RpcError::LimitExceeded(format!(
                "query returned more than {} results; narrow the block range",
                ctx.limits.max_logs
            )));
        }
    }
    Ok(out)
}

/// The logs of `block` (with its `receipts`) that `filter`'s addresses and topics match, in
/// order; `removed` marks them as logs of a block that left the canonical chain.
pub(crate) fn block_logs(
    filter: &LogFilter,
    block: &StoredBlock,
    receipts: &[ReceiptEnvelope],
    removed: bool,
) -> Vec<Log> {
    if !filter.matches_bloom(block.header.logs_bloom) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut log_index = 0u64;
    for (tx_index, receipt) in receipts.iter().enumerate() {
        let count = receipt.logs().len() as u64;
        if receipt.logs().iter().any(|l| filter.matches(l)) {
            for mut log in simnode_receipts::rpc_logs(block, receipt, tx_index, log_index) {
                if filter.matches(&log.inner) {
                    log.removed = removed;
                    out.push(log);
                }
            }
        }
        log_index += count;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: &str = "0x7dcd17433742f4c0ca53122ab541d0ba67fc27df";

    fn refusal(criteria: Value) -> String {
        match LogFilter::parse(&criteria, 0) {
            Err(RpcError::InvalidParams(message)) => message,
            other => panic!("{criteria} should be -32602, got {other:?}"),
        }
    }

    #[test]
    fn a_null_in_an_address_list_is_refused_not_taken_for_any_address() {
        assert_eq!(
            refusal(json!({"address": [A, null]})),
            "invalid argument 0: non-string address at index 1"
        );
        assert_eq!(
            refusal(json!({"address": [A, "0x7dcd"]})),
            "invalid argument 0: invalid address at index 1: hex has invalid length 2 after decoding; expected 20 for address"
        );
        assert_eq!(
            refusal(json!({"address": A.trim_start_matches("0x")})),
            "invalid argument 0: invalid address: hex string without 0x prefix"
        );
        assert_eq!(
            refusal(json!({"address": 5})),
            "invalid argument 0: invalid addresses in query"
        );
        let filter = LogFilter::parse(&json!({"address": [A]}), 0).unwrap();
        assert_eq!(filter.filter.address.len(), 1);
    }

    #[test]
    fn topics_are_checked_in_geths_words() {
        assert_eq!(
            refusal(json!({"topics": ["0x1234"]})),
            "invalid argument 0: hex has invalid length 2 after decoding; expected 32 for topic"
        );
        assert_eq!(
            refusal(json!({"topics": [5]})),
            "invalid argument 0: invalid topic(s)"
        );
        assert_eq!(
            refusal(json!({"topics": [[[null]]]})),
            "invalid argument 0: invalid topic(s)"
        );
        assert_eq!(
            refusal(json!({"topics": [""]})),
            "invalid argument 0: empty hex string"
        );
        let topic = format!("0x{}", "ab".repeat(32));
        let filter = LogFilter::parse(&json!({"topics": [null, [topic, null]]}), 0).unwrap();
        assert_eq!(filter.topic_positions, 2);
    }

    #[test]
    fn criteria_keys_read_as_geth_reads_them() {
        // Any letter case, other keys ignored, null as no criteria.
        let filter = LogFilter::parse(
            &json!({"FromBlock": "0x4", "toblock": "0x5", "extra": 1}),
            0,
        )
        .unwrap();
        assert_eq!(filter.filter.get_from_block(), Some(4));
        assert_eq!(filter.filter.get_to_block(), Some(5));
        // The exact name wins over another spelling.
        let filter = LogFilter::parse(&json!({"FROMBLOCK": "0x9", "fromBlock": "0x4"}), 0).unwrap();
        assert_eq!(filter.filter.get_from_block(), Some(4));
        assert_eq!(
            refusal(json!({"fromBlock": "Latest"})),
            "invalid argument 0: fromBlock: hex string without 0x prefix"
        );
        let filter = LogFilter::parse(&Value::Null, 0).unwrap();
        assert_eq!(filter.filter, Filter::default());
        assert_eq!(
            refusal(json!({"BlockHash": format!("0x{}", "11".repeat(32)), "fromBlock": "0x1"})),
            "invalid argument 0: cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other"
        );
    }
}
