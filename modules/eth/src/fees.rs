//! Fee suggestions and eth_feeHistory, from stored blocks and receipts.

use alloy::{
    consensus::{Header, Transaction as _},
    primitives::Address,
    rpc::types::FeeHistory,
};
use serde_json::Value;
use simnode_api::{BlockParam, ChainSpec, ModuleContext, RpcError, RpcResult};

/// Most blocks one eth_feeHistory request covers (geth's limit).
pub const MAX_FEE_HISTORY: u64 = 1024;
/// The tip oracle follows geth's defaults, so that wallets see the suggestion they would get from geth on the
/// same chain: 20 blocks, the 3 lowest tips of each, the 60th percentile.
const ORACLE_BLOCKS: usize = 20;
const ORACLE_SAMPLES_PER_BLOCK: usize = 3;
const ORACLE_PERCENTILE: usize = 60;
/// Tips below this are dust (often zero-tip system or miner transactions) and say nothing about the market.
const ORACLE_IGNORE_UNDER: u128 = 2;
/// What a block with no usable tip counts as: geth's default miner gas price, 0.001 gwei.
const ORACLE_DEFAULT_TIP: u128 = 1_000_000;
/// No suggestion above 500 gwei, however expensive the recent blocks were.
const ORACLE_MAX_TIP: u128 = 500_000_000_000;

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

/// The tip to suggest on top of the base fee: the 60th percentile of the lowest tips recent blocks paid.
///
/// Each of the last 20 blocks gives its 3 lowest tips of at least 2 wei, leaving out the block producer's own
/// transactions; a block with none counts as the default tip. While blocks give a single value, older blocks
/// are sampled too, up to 40 in all, so a quiet chain is judged on enough data.
pub fn suggested_tip(ctx: &ModuleContext) -> RpcResult<u128> {
    oracle_tip(ctx.chain.head().latest, |number| {
        Ok(ctx
            .chain
            .block(number)?
            .map(|block| lowest_tips(&block))
            .unwrap_or_default())
    })
}

/// The oracle over `sample(number)`, a block's lowest tips, for a chain whose head is `latest`.
fn oracle_tip(latest: u64, mut sample: impl FnMut(u64) -> RpcResult<Vec<u128>>) -> RpcResult<u128> {
    let first = latest.min(ORACLE_BLOCKS as u64);
    // Blocks still to sample, newest first; genesis is never sampled.
    let mut queue: std::collections::VecDeque<u64> = (0..first).map(|i| latest - i).collect();
    let mut next_older = latest - first;
    let mut tips = Vec::new();
    while let Some(number) = queue.pop_front() {
        let mut sampled = sample(number)?;
        if sampled.is_empty() {
            sampled.push(ORACLE_DEFAULT_TIP);
        }
        if sampled.len() == 1 && tips.len() + 1 + queue.len() < 2 * ORACLE_BLOCKS && next_older > 0
        {
            queue.push_back(next_older);
            next_older -= 1;
        }
        tips.extend(sampled);
    }
    if tips.is_empty() {
        return Ok(ORACLE_DEFAULT_TIP);
    }
    tips.sort_unstable();
    Ok(tips[(tips.len() - 1) * ORACLE_PERCENTILE / 100].min(ORACLE_MAX_TIP))
}

/// A block's lowest tips worth sampling, ascending.
fn lowest_tips(block: &simnode_api::StoredBlock) -> Vec<u128> {
    let base = block.header.base_fee_per_gas.unwrap_or(0);
    let mut tips: Vec<(u128, Address)> = block
        .body
        .transactions
        .iter()
        .zip(&block.senders)
        .filter_map(|(tx, sender)| Some((tx.effective_tip_per_gas(base)?, *sender)))
        .collect();
    tips.sort_unstable_by_key(|(tip, _)| *tip);
    tips.into_iter()
        .filter(|(tip, sender)| *tip >= ORACLE_IGNORE_UNDER && *sender != block.header.beneficiary)
        .map(|(tip, _)| tip)
        .take(ORACLE_SAMPLES_PER_BLOCK)
        .collect()
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
    // geth answers no blocks before it looks at anything else (the percentiles, the block).
    if count == 0 {
        return Ok(FeeHistory::default());
    }
    // Plain errors in geth's oracle: -32000.
    if let Some(p) = percentiles {
        if p.len() > 100 {
            return Err(RpcError::Server(format!(
                "invalid reward percentile: over the query limit 100 ({})",
                p.len()
            )));
        }
        // Strictly ascending, as current geth wants them (a percentile twice asks nothing new).
        for (i, v) in p.iter().enumerate() {
            if !(0.0..=100.0).contains(v) || (i > 0 && *v <= p[i - 1]) {
                return Err(RpcError::Server(format!("invalid reward percentile: {v}")));
            }
        }
    }
    let newest = match (ctx.chain.resolve(newest)?, newest) {
        (Some(number), _) => number,
        // geth's oracle names the head a number past it is beyond.
        (None, BlockParam::Number(requested)) => {
            return Err(RpcError::Server(format!(
                "request beyond head block: requested {requested}, head {}",
                ctx.chain.head().latest
            )))
        }
        (None, _) => return Err(RpcError::HeaderNotFound),
    };
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
        // As geth: nothing for the block after one without blob gas (before Cancun).
        let next_ts = last.timestamp + 12;
        let next_blob = match (
            last.excess_blob_gas,
            ctx.spec.blob_params_at(next_ts),
            ctx.spec.next_excess_blob_gas(&last, next_ts),
        ) {
            (Some(_), Some(params), Some(excess)) => params.calc_blob_fee(excess),
            _ => 0,
        };
        history.base_fee_per_blob_gas.push(next_blob);
    }
    // geth leaves `reward` out for an empty percentile list too.
    if percentiles.is_some_and(|p| !p.is_empty()) {
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
    let mut sorted: Vec<(u128, u64)> = block
        .body
        .transactions
        .iter()
        .zip(simnode_receipts::gas_used_each(&receipts))
        .map(|(tx, used)| (tx.effective_tip_per_gas(base).unwrap_or(0), used))
        .collect();
    sorted.sort_unstable_by_key(|(tip, _)| *tip);
    Ok(tips_at(&sorted, block.header.gas_used, percentiles))
}

/// For each percentile, the tip of the transaction (in `sorted`: (tip, gas used), ascending
/// tips, not empty) within whose gas the block's `gas_used` times the percentile falls; geth
/// cuts that threshold to whole gas before comparing.
fn tips_at(sorted: &[(u128, u64)], gas_used: u64, percentiles: &[f64]) -> Vec<u128> {
    let mut out = Vec::with_capacity(percentiles.len());
    let (mut idx, mut sum) = (0usize, sorted.first().map_or(0, |s| s.1));
    for p in percentiles {
        let threshold = (gas_used as f64 * p / 100.0) as u64;
        while sum < threshold && idx + 1 < sorted.len() {
            idx += 1;
            sum += sorted[idx].1;
        }
        out.push(sorted[idx].0);
    }
    out
}

#[cfg(test)]
mod oracle_tests {
    use super::*;

    fn tip_with(latest: u64, per_block: impl Fn(u64) -> Vec<u128>) -> (u128, Vec<u64>) {
        let mut asked = Vec::new();
        let tip = oracle_tip(latest, |n| {
            asked.push(n);
            Ok(per_block(n))
        })
        .unwrap();
        (tip, asked)
    }

    #[test]
    fn reward_percentiles_cut_the_gas_threshold_to_whole_gas() {
        // Two transactions of 21,000 gas: 50.001% of 42,000 is 21,000.42, cut to 21,000, which
        // the first transaction's gas reaches.
        let sorted = [(1, 21_000), (3, 21_000)];
        assert_eq!(
            tips_at(&sorted, 42_000, &[10.0, 50.001, 50.01, 90.0]),
            [1, 1, 3, 3]
        );
    }

    #[test]
    fn a_chain_without_usable_tips_gets_the_default() {
        let (tip, asked) = tip_with(54, |_| vec![]);
        assert_eq!(tip, ORACLE_DEFAULT_TIP);
        // Single-value blocks pull in older ones, up to twice the window.
        assert_eq!(asked, (15..=54).rev().collect::<Vec<_>>());
        assert_eq!(asked.first(), Some(&54));
        assert_eq!(tip_with(0, |_| vec![7]).0, ORACLE_DEFAULT_TIP);
    }

    #[test]
    fn three_tips_a_block_stay_in_the_window_and_give_the_60th_percentile() {
        let (tip, asked) = tip_with(100, |n| vec![n as u128, n as u128 + 1, n as u128 + 2]);
        assert_eq!(asked, (81..=100).rev().collect::<Vec<_>>());
        // 60 samples 81..=102; index 59 * 60 / 100 = 35 of the sorted list.
        let mut all: Vec<u128> = (81..=100u128).flat_map(|n| [n, n + 1, n + 2]).collect();
        all.sort_unstable();
        assert_eq!(tip, all[35]);
    }

    fn block_of(beneficiary: Address, txs: &[(Address, u128)]) -> simnode_api::StoredBlock {
        use alloy::{
            consensus::{Signed, TxEip1559, TxEnvelope},
            primitives::{Signature, B256},
        };
        let transactions = txs
            .iter()
            .enumerate()
            .map(|(i, (_, tip))| {
                let tx = TxEip1559 {
                    nonce: i as u64,
                    max_fee_per_gas: 100 + tip,
                    max_priority_fee_per_gas: *tip,
                    ..Default::default()
                };
                TxEnvelope::Eip1559(Signed::new_unchecked(
                    tx,
                    Signature::test_signature(),
                    B256::with_last_byte(i as u8),
                ))
            })
            .collect();
        let header = Header {
            beneficiary,
            base_fee_per_gas: Some(100),
            ..Default::default()
        };
        simnode_api::StoredBlock {
            header: alloy::primitives::Sealed::new_unchecked(header, Default::default()),
            body: alloy::consensus::BlockBody {
                transactions,
                ommers: vec![],
                withdrawals: None,
            },
            senders: txs.iter().map(|(sender, _)| *sender).collect(),
        }
    }

    #[test]
    fn a_block_gives_its_three_lowest_tips_from_others_than_its_producer() {
        let producer = Address::with_last_byte(1);
        let user = Address::with_last_byte(2);
        let block = block_of(
            producer,
            &[
                (user, 9),
                (producer, 3),
                (user, 1),
                (user, 5),
                (user, 4),
                (user, 0),
                (user, 7),
            ],
        );
        assert_eq!(lowest_tips(&block), vec![4, 5, 7]);
        assert!(lowest_tips(&block_of(producer, &[(producer, 50), (user, 1)])).is_empty());
    }

    #[test]
    fn a_short_chain_samples_every_block_but_genesis_and_caps_the_tip() {
        let (tip, asked) = tip_with(3, |_| vec![10_000_000_000_000, 10_000_000_000_000]);
        assert_eq!(asked, vec![3, 2, 1]);
        assert_eq!(tip, ORACLE_MAX_TIP);
    }
}
