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
    if let Some(obj) = raw.as_object() {
        let has_hash = obj.get("blockHash").is_some_and(|v| !v.is_null());
        let has_range = ["fromBlock", "toBlock"]
            .iter()
            .any(|k| obj.get(*k).is_some_and(|v| !v.is_null()));
        if has_hash && has_range {
            return Err(RpcError::invalid_params(
                "invalid argument 0: cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other",
            ));
        }
    }
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
