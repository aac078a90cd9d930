//! Fee suggestions and eth_feeHistory, from stored blocks and receipts.

use alloy::{
    consensus::{Header, Transaction as _},
    rpc::types::FeeHistory,
};
use serde_json::Value;
use simnode_api::{BlockParam, ChainSpec, ModuleContext, RpcError, RpcResult};

/// Most blocks one eth_feeHistory request covers (geth's limit).
pub const MAX_FEE_HISTORY: u64 = 1024;
/// Blocks the tip oracle samples.
const ORACLE_BLOCKS: u64 = 20;
/// The tip suggested when recent blocks paid none (1 wei, so that a tx is never free).
const MIN_TIP: u128 = 1;

/// Blob base fee for the block after `latest`, 0 before Cancun.
pub fn blob_base_fee(spec: &ChainSpec, latest: &Header) -> u128 {
    match (
        spec.blob_params_at(latest.timestamp),
        latest.excess_blob_gas,
    ) {
        (Some(params), Some(excess)) => params.calc_blob_fee(excess),
        _ => 0,
    }
}

/// The 60th percentile of the tips paid in recent blocks (geth's oracle percentile).
pub fn suggested_tip(ctx: &ModuleContext) -> RpcResult<u128> {
    let latest = ctx.chain.head().latest;
    let mut tips = Vec::new();
    for number in latest.saturating_sub(ORACLE_BLOCKS - 1)..=latest {
        let Some(block) = ctx.chain.block(number)? else {
            continue;
        };
        let base = block.header.base_fee_per_gas;
        tips.extend(
            block
                .body
                .transactions
                .iter()
                .filter_map(|tx| tx.effective_tip_per_gas(base.unwrap_or(0))),
        );
    }
    if tips.is_empty() {
        return Ok(MIN_TIP);
    }
    tips.sort_unstable();
    Ok(tips[(tips.len() - 1) * 60 / 100].max(MIN_TIP))
}

fn parse_count(count: &Value) -> RpcResult<u64> {
    let bad = || RpcError::invalid_params(format!("invalid block count {count}"));
    match count {
        Value::Number(n) => n.as_u64().ok_or_else(bad),
        Value::String(s) => match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).map_err(|_| bad()),
            None => s.parse().map_err(|_| bad()),
        },
        _ => Err(bad()),
    }
}

pub fn fee_history(
    ctx: &ModuleContext,
    count: &Value,
    newest: &BlockParam,
    percentiles: Option<&[f64]>,
) -> RpcResult<FeeHistory> {
    let count = parse_count(count)?.min(MAX_FEE_HISTORY);
    if let Some(p) = percentiles {
        if p.len() > 100 {
            return Err(RpcError::invalid_params(format!(
                "too many percentiles: {} > 100",
                p.len()
            )));
        }
        for (i, v) in p.iter().enumerate() {
            if !(0.0..=100.0).contains(v) || (i > 0 && *v < p[i - 1]) {
                return Err(RpcError::invalid_params(format!(
                    "invalid reward percentile: {v}"
                )));
            }
        }
    }
    let newest = ctx.chain.resolve(newest)?.ok_or(RpcError::HeaderNotFound)?;
    if count == 0 {
        return Ok(FeeHistory::default());
    }
    let oldest = newest.saturating_sub(count - 1);
    let mut history = FeeHistory {
        oldest_block: oldest,
        ..Default::default()
    };
    let mut rewards = Vec::new();
    let mut last_header = None;
    for number in oldest..=newest {
        let block = ctx.chain.block(number)?.ok_or(RpcError::HeaderNotFound)?;
        let header = block.header.inner();
        history
            .base_fee_per_gas
            .push(header.base_fee_per_gas.unwrap_or_default() as u128);
        history
            .gas_used_ratio
            .push(ratio(header.gas_used, header.gas_limit));
        history
            .base_fee_per_blob_gas
            .push(blob_base_fee(&ctx.spec, header));
        let max_blob_gas = ctx
            .spec
            .blob_params_at(header.timestamp)
            .map(|p| p.max_blob_gas_per_block())
            .unwrap_or(0);
        history
            .blob_gas_used_ratio
            .push(ratio(header.blob_gas_used.unwrap_or(0), max_blob_gas));
        if let Some(p) = percentiles {
            rewards.push(block_rewards(ctx, &block, p)?);
        }
        last_header = Some(header.clone());
    }
    if let Some(last) = last_header {
        history
            .base_fee_per_gas
            .push(ctx.spec.next_base_fee(&last).unwrap_or_default() as u128);
        let next_ts = last.timestamp + 12;
        let next_blob = match (
            ctx.spec.blob_params_at(next_ts),
            ctx.spec.next_excess_blob_gas(&last, next_ts),
        ) {
            (Some(params), Some(excess)) => params.calc_blob_fee(excess),
            _ => 0,
        };
        history.base_fee_per_blob_gas.push(next_blob);
    }
    if percentiles.is_some() {
        history.reward = Some(rewards);
    }
    Ok(history)
}

fn ratio(used: u64, limit: u64) -> f64 {
    if limit == 0 {
        0.0
    } else {
        used as f64 / limit as f64
    }
}

/// Tips at the given percentiles, weighted by the gas each transaction used (as geth does).
fn block_rewards(
    ctx: &ModuleContext,
    block: &simnode_api::StoredBlock,
    percentiles: &[f64],
) -> RpcResult<Vec<u128>> {
    if block.body.transactions.is_empty() {
        return Ok(vec![0; percentiles.len()]);
    }
    let receipts = ctx
        .chain
        .receipts(block.number())?
        .ok_or(RpcError::HeaderNotFound)?;
    let base = block.header.base_fee_per_gas.unwrap_or(0);
    let mut prev = 0u64;
    let mut sorted: Vec<(u128, u64)> = block
        .body
        .transactions
        .iter()
        .zip(receipts.iter())
        .map(|(tx, r)| {
            let used = r.cumulative_gas_used().saturating_sub(prev);
            prev = r.cumulative_gas_used();
            (tx.effective_tip_per_gas(base).unwrap_or(0), used)
        })
        .collect();
    sorted.sort_unstable_by_key(|(tip, _)| *tip);
    let total = block.header.gas_used as f64;
    let mut out = Vec::with_capacity(percentiles.len());
    let (mut idx, mut sum) = (0usize, sorted.first().map(|s| s.1).unwrap_or(0));
    for p in percentiles {
        let threshold = total * p / 100.0;
        while (sum as f64) < threshold && idx + 1 < sorted.len() {
            idx += 1;
            sum += sorted[idx].1;
        }
        out.push(sorted[idx].0);
    }
    Ok(out)
}
