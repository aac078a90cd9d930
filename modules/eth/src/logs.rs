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

/// Most addresses and topic positions a filter may name (geth's limits).
const MAX_ADDRESSES: usize = 1_000;
const MAX_TOPICS: usize = 4;

impl LogFilter {
    /// Parses filter criteria given as argument `arg`: geth's -32000 for more than
    /// [`MAX_ADDRESSES`] addresses or [`MAX_TOPICS`] topic positions, -32602 naming the
    /// argument for criteria that do not parse.
    pub fn parse(criteria: &Value, arg: usize) -> RpcResult<Self> {
        let count = |field: &str| criteria.get(field).and_then(Value::as_array).map(Vec::len);
        if count("topics").is_some_and(|n| n > MAX_TOPICS) {
            return Err(RpcError::Server("exceed max topics".into()));
        }
        if count("address").is_some_and(|n| n > MAX_ADDRESSES) {
            return Err(RpcError::Server("exceed max addresses".into()));
        }
        Self::from_value(criteria)
            .map_err(|e| RpcError::invalid_params(format!("invalid argument {arg}: {e}")))
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

    /// geth refuses a filter that follows new blocks (a polled filter or a `logs`
    /// subscription) whose range can never hold a block, when it is installed: a number range
    /// that ends before it starts, or one from the head on to a fixed number.
    pub fn check_live_range(&self) -> RpcResult<()> {
        let FilterBlockOption::Range {
            from_block,
            to_block,
        } = self.filter.block_option
        else {
            return Ok(());
        };
        let from_head = matches!(from_block, None | Some(BlockNumberOrTag::Latest));
        let impossible = match (from_block, to_block) {
            (Some(BlockNumberOrTag::Number(from)), Some(BlockNumberOrTag::Number(to))) => to < from,
            (_, Some(BlockNumberOrTag::Number(_))) => from_head,
            _ => false,
        };
        if impossible {
            return Err(RpcError::Server(
                "invalid from and to block combination".into(),
            ));
        }
        Ok(())
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

    pub fn matches(&self, log: &alloy::primitives::Log) -> bool {
        log.topics().len() >= self.topic_positions && self.filter.matches(log)
    }

    pub fn matches_bloom(&self, bloom: alloy::primitives::Bloom) -> bool {
        self.filter.matches_bloom(bloom)
    }
}

fn resolve_bound(
    ctx: &ModuleContext,
    bound: Option<BlockNumberOrTag>,
    default_latest: u64,
) -> RpcResult<Option<u64>> {
    let param = match bound {
        None => return Ok(Some(default_latest)),
        Some(BlockNumberOrTag::Number(n)) => return Ok(Some(n)),
        Some(BlockNumberOrTag::Latest | BlockNumberOrTag::Pending) => {
            BlockParam::Tag(BlockTag::Latest)
        }
        Some(BlockNumberOrTag::Earliest) => BlockParam::Tag(BlockTag::Earliest),
        Some(BlockNumberOrTag::Safe) => BlockParam::Tag(BlockTag::Safe),
        Some(BlockNumberOrTag::Finalized) => BlockParam::Tag(BlockTag::Finalized),
    };
    ctx.chain.resolve(&param)
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
            if let Some(BlockNumberOrTag::Number(n)) = to_block {
                if n > head {
                    return Err(RpcError::invalid_params(
                        "block range extends beyond current head block",
                    ));
                }
            }
            let from = resolve_bound(ctx, from_block, head)?.ok_or(RpcError::HeaderNotFound)?;
            let to = resolve_bound(ctx, to_block, head)?.ok_or(RpcError::HeaderNotFound)?;
            if from > head {
                return Err(RpcError::invalid_params(
                    "block range extends beyond current head block",
                ));
            }
            if from > to {
                return Err(RpcError::invalid_params("invalid block range params"));
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
