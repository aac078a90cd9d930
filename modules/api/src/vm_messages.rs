//! geth's wording of what went wrong in a call, shared by every module that reports one
//! (eth_call and eth_estimateGas errors, eth_simulateV1's per-call `error`, trace_callMany's
//! refusals): clients match on these strings, so there is one copy of them.

use alloy::primitives::{Address, U256};
use revm::context::result::{HaltReason, InvalidTransaction, OutOfGasError};

/// `Error(string)`, the selector of `revert("...")` and `require(..., "...")`.
const ERROR_SELECTOR: [u8; 4] = [0x08, 0xc3, 0x79, 0xa0];
/// `Panic(uint256)`, the selector of failed asserts and checked arithmetic.
const PANIC_SELECTOR: [u8; 4] = [0x4e, 0x48, 0x7b, 0x71];

/// "execution reverted", followed by the reason when the revert data is an `Error(string)` or
/// a `Panic(uint256)`, as geth writes it.
pub fn revert_message(output: &[u8]) -> String {
    match revert_reason(output) {
        Some(reason) => format!("execution reverted: {reason}"),
        None => "execution reverted".to_owned(),
    }
}

fn revert_reason(output: &[u8]) -> Option<String> {
    let (selector, body) = (output.get(..4)?, output.get(4..)?);
    if selector == ERROR_SELECTOR {
        let offset = abi_usize(body.get(..32)?)?;
        let len = abi_usize(body.get(offset..offset.checked_add(32)?)?)?;
        let start = offset.checked_add(32)?;
        let bytes = body.get(start..start.checked_add(len)?)?;
        // geth's strings are bytes; invalid UTF-8 reaches the client as U+FFFD.
        return Some(String::from_utf8_lossy(bytes).into_owned());
    }
    if selector == PANIC_SELECTOR {
        let code = U256::from_be_slice(body.get(..32)?);
        let text = match code.saturating_to::<u64>() {
            0x00 => "generic panic",
            0x01 => "assert(false)",
            0x11 => "arithmetic underflow or overflow",
            0x12 => "division or modulo by zero",
            0x21 => "enum overflow",
            0x22 => "invalid encoded storage byte array accessed",
            0x31 => "out-of-bounds array access; popping on an empty array",
            0x32 => "out-of-bounds access of an array or bytesN",
            0x41 => "out of memory",
            0x51 => "uninitialized function",
            _ => return Some(format!("unknown panic code: {code:#x}")),
        };
        return Some(text.to_owned());
    }
    None
}

/// An ABI offset or length word, if it is small enough to index with.
fn abi_usize(word: &[u8]) -> Option<usize> {
    let v = U256::from_be_slice(word);
    (v <= U256::from(u32::MAX)).then(|| v.saturating_to::<usize>())
}

/// Whether geth would see `reason` as `vm.ErrOutOfGas` (a memory size past uint64 is its
/// "gas uint64 overflow" instead).
pub fn is_out_of_gas(reason: &HaltReason) -> bool {
    matches!(reason, HaltReason::OutOfGas(why) if *why != OutOfGasError::InvalidOperand)
}

/// geth's message for a call the EVM halted (its `vm.Err*` texts, without the operands geth
/// adds to a few of them).
pub fn halt_message(reason: &HaltReason) -> String {
    match reason {
        HaltReason::OutOfGas(OutOfGasError::InvalidOperand) => "gas uint64 overflow",
        HaltReason::OutOfGas(_) => "out of gas",
        // geth names the opcode; revm says which only for the designated INVALID (0xfe).
        HaltReason::InvalidFEOpcode => "invalid opcode: INVALID",
        HaltReason::OpcodeNotFound | HaltReason::NotActivated => "invalid opcode",
        HaltReason::InvalidJump => "invalid jump destination",
        HaltReason::StackUnderflow => "stack underflow",
        HaltReason::StackOverflow => "stack limit reached 1024 (1023)",
        HaltReason::OutOfOffset => "return data out of bounds",
        HaltReason::CreateCollision => "contract address collision",
        HaltReason::PrecompileErrorWithContext(why) => return precompile_message(why).to_owned(),
        HaltReason::PrecompileError => "precompiled contract failed",
        HaltReason::NonceOverflow => "nonce uint64 overflow",
        HaltReason::CreateContractSizeLimit => "max code size exceeded",
        HaltReason::CreateContractStartingWithEF => "invalid code: must not begin with 0xef",
        HaltReason::CreateInitCodeSizeLimit => "max initcode size exceeded",
        // A value transfer that would overflow the receiver's balance; geth has no such case.
        HaltReason::OverflowPayment => "balance overflow",
        HaltReason::StateChangeDuringStaticCall | HaltReason::CallNotAllowedInsideStatic => {
            "write protection"
        }
        HaltReason::OutOfFunds => "insufficient balance for transfer",
        HaltReason::CallTooDeep => "max call depth exceeded",
    }
    .to_owned()
}

/// geth's error for a precompile's failure revm describes as `why` (revm's words for its
/// `PrecompileHalt`s), where geth's is known; "precompiled contract failed" otherwise.
fn precompile_message(why: &str) -> &'static str {
    const GETH: &[(&str, &str)] = &[
        ("wrong input length for blake2", "invalid input length"),
        (
            "wrong final indicator flag for blake2",
            "invalid final flag",
        ),
        ("invalid blob input length", "invalid input length"),
        ("mismatched blob version", "mismatched versioned hash"),
        (
            "verifying blob kzg proof failed",
            "error verifying kzg proof",
        ),
        (
            "bn254 invalid pair length",
            "bad elliptic curve pairing size",
        ),
        (
            "bls12-381 fp 64 top bytes of input are not zero",
            "invalid field element top bytes",
        ),
        (
            "bls12-381 g1 point not in correct subgroup",
            "g1 point is not on correct subgroup",
        ),
        (
            "bls12-381 g2 point not in correct subgroup",
            "g2 point is not on correct subgroup",
        ),
    ];
    if why.starts_with("bls12-381 ") && why.ends_with(" input length error") {
        return "invalid input length";
    }
    GETH.iter()
        .find(|(revm, _)| *revm == why)
        .map_or("precompiled contract failed", |(_, geth)| geth)
}

/// geth's message for a call that halted with `reason`: a directly called precompile's own
/// reason when `precompile` has it (see [`precompile_failure`]), else [`halt_message`] with the
/// operands geth adds when the halt was on an instruction it names, the one `last` saw begin
/// ("invalid opcode: opcode 0xc not defined", "invalid opcode: PUSH0" before Shanghai, "stack
/// underflow (0 <=> 2)").
pub fn halt_words(reason: &HaltReason, last: LastInstruction, precompile: Option<&str>) -> String {
    if let (HaltReason::PrecompileError, Some(why)) = (reason, precompile) {
        return why.to_owned();
    }
    let LastInstruction { opcode, stack_len } = last;
    let known = revm::bytecode::opcode::OpCode::new(opcode);
    match reason {
        HaltReason::OpcodeNotFound | HaltReason::NotActivated => match known {
            Some(op) => format!("invalid opcode: {}", op.as_str()),
            None => format!("invalid opcode: opcode {opcode:#x} not defined"),
        },
        HaltReason::StackUnderflow => match known {
            Some(op) => format!("stack underflow ({stack_len} <=> {})", op.inputs()),
            None => halt_message(reason),
        },
        other => halt_message(other),
    }
}

/// geth's error for `tx` halted with `reason` when it called a precompile (as fork `spec` has
/// them) directly and that failed: the precompile run again on the input to learn why, since
/// the EVM's precompile table reports no reason. `None` for any other halt, and when the run
/// does not halt (out of gas).
pub fn precompile_failure(
    reason: &HaltReason,
    spec: revm::primitives::hardfork::SpecId,
    tx: &revm::context::TxEnv,
) -> Option<&'static str> {
    use revm::precompile::{PrecompileSpecId, Precompiles};
    let (HaltReason::PrecompileError, revm::primitives::TxKind::Call(address)) = (reason, tx.kind)
    else {
        return None;
    };
    let precompile = Precompiles::new(PrecompileSpecId::from_spec_id(spec)).get(&address)?;
    let output = precompile.execute(&tx.data, tx.gas_limit, 0).ok()?;
    let halt = output.halt_reason().filter(|halt| !halt.is_oog())?;
    Some(precompile_message(&halt.to_string()))
}

/// Whether geth's message for `reason` names the instruction halted on (see [`halt_words`]),
/// which a run without [`LastInstruction`] cannot say.
pub fn names_the_instruction(reason: &HaltReason) -> bool {
    matches!(
        reason,
        HaltReason::OpcodeNotFound | HaltReason::NotActivated | HaltReason::StackUnderflow
    )
}

/// An inspector keeping the instruction last begun (opcode, stack height): when a call halts,
/// the one it halted on, for [`halt_words`].
#[derive(Debug, Default, Clone, Copy)]
pub struct LastInstruction {
    pub opcode: u8,
    pub stack_len: usize,
}

impl<CTX> revm::Inspector<CTX, revm::interpreter::interpreter::EthInterpreter> for LastInstruction {
    fn step(
        &mut self,
        interp: &mut revm::interpreter::Interpreter<revm::interpreter::interpreter::EthInterpreter>,
        _context: &mut CTX,
    ) {
        use revm::interpreter::interpreter_types::Jumps;
        self.opcode = interp.bytecode.opcode();
        self.stack_len = interp.stack.len();
    }
}

/// geth's refusal of a call or transaction naming another chain's id (its `CallDefaults`).
pub fn chain_id_mismatch(have: u64, want: u64) -> String {
    format!("chainId does not match node's (have={have}, want={want})")
}

/// geth's refusal of a transaction whose fee cap is under the block's base fee.
pub fn fee_cap_below_base_fee(caller: Address, fee_cap: u128, base_fee: u64) -> String {
    format!(
        "max fee per gas less than block base fee: address {caller}, maxFeePerGas: {fee_cap}, baseFee: {base_fee}"
    )
}

/// geth's refusal of a transaction past EIP-7825's cap on its gas.
pub fn gas_limit_over_cap(gas_limit: u64, cap: u64) -> String {
    format!("transaction gas limit too high (cap: {cap}, tx: {gas_limit})")
}

/// geth's wording for transactions that fail validation.
pub fn invalid_tx_message(err: &InvalidTransaction, caller: Address) -> String {
    match err {
        InvalidTransaction::LackOfFundForMaxFee { fee, balance } => {
            format!("insufficient funds for gas * price + value: address {caller} have {balance} want {fee}")
        }
        // revm's integers cannot hold gas * price + value; geth computes it in 256 bits and
        // finds the balance short, so its error is the insufficient-funds one.
        InvalidTransaction::OverflowPaymentInTransaction => format!(
            "insufficient funds for gas * price + value: address {caller}: the upfront cost overflows the EVM's integers"
        ),
        // geth's state transition says "have/want"; its pool's "gas N, minimum needed M" is
        // for sent transactions (eth module's send).
        InvalidTransaction::CallGasCostMoreThanGasLimit {
            initial_gas,
            gas_limit,
        } => {
            format!("intrinsic gas too low: have {gas_limit}, want {initial_gas}")
        }
        InvalidTransaction::GasFloorMoreThanGasLimit {
            gas_floor,
            gas_limit,
        } => {
            format!("insufficient gas for floor data gas cost: have {gas_limit}, want {gas_floor}")
        }
        InvalidTransaction::PriorityFeeGreaterThanMaxFee => {
            format!("max priority fee per gas higher than max fee per gas: address {caller}")
        }
        InvalidTransaction::GasPriceLessThanBasefee => {
            format!("max fee per gas less than block base fee: address {caller}")
        }
        InvalidTransaction::NonceTooLow { tx, state } => {
            format!("nonce too low: address {caller}, tx: {tx} state: {state}")
        }
        InvalidTransaction::NonceTooHigh { tx, state } => {
            format!("nonce too high: address {caller}, tx: {tx} state: {state}")
        }
        InvalidTransaction::CreateInitCodeSizeLimit => "max initcode size exceeded".into(),
        InvalidTransaction::RejectCallerWithCode => format!("sender not an eoa: address {caller}"),
        // A field of a transaction type the block's fork does not have.
        InvalidTransaction::Eip2930NotSupported | InvalidTransaction::AccessListNotSupported => {
            format!("transaction type not supported: access list tx (sender {caller})")
        }
        InvalidTransaction::Eip4844NotSupported
        | InvalidTransaction::BlobVersionedHashesNotSupported
        | InvalidTransaction::MaxFeePerBlobGasNotSupported => {
            format!("transaction type not supported: blob tx (sender {caller})")
        }
        InvalidTransaction::Eip7702NotSupported
        | InvalidTransaction::AuthorizationListNotSupported => {
            format!("transaction type not supported: setcode tx (sender {caller})")
        }
        InvalidTransaction::BlobGasPriceGreaterThanMax {
            block_blob_gas_price,
            tx_max_fee_per_blob_gas,
        } => format!(
            "max fee per blob gas less than block blob gas fee: address {caller} blobGasFeeCap: {tx_max_fee_per_blob_gas}, blobBaseFee: {block_blob_gas_price}"
        ),
        InvalidTransaction::BlobVersionNotSupported => {
            "blob transaction has a blob hash of invalid version".into()
        }
        InvalidTransaction::BlobCreateTransaction => "blob transaction of type create".into(),
        InvalidTransaction::TooManyBlobs { have, max } => {
            format!("blob transaction has too many blobs: have {have}, max {max}")
        }
        InvalidTransaction::EmptyAuthorizationList => {
            format!("EIP-7702 transaction with empty auth list (sender {caller})")
        }
        InvalidTransaction::TxGasLimitGreaterThanCap { gas_limit, cap } => {
            gas_limit_over_cap(*gas_limit, *cap)
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_string(reason: &[u8]) -> Vec<u8> {
        let mut data = ERROR_SELECTOR.to_vec();
        data.extend_from_slice(&U256::from(32).to_be_bytes::<32>());
        data.extend_from_slice(&U256::from(reason.len()).to_be_bytes::<32>());
        let mut padded = reason.to_vec();
        padded.resize(reason.len().div_ceil(32) * 32, 0);
        data.extend_from_slice(&padded);
        data
    }

    #[test]
    fn an_overflowing_payment_reads_as_insufficient_funds() {
        let message = invalid_tx_message(
            &InvalidTransaction::OverflowPaymentInTransaction,
            Address::repeat_byte(0xc0),
        );
        assert!(
            message.starts_with("insufficient funds for gas * price + value: address 0x"),
            "{message}"
        );
    }

    #[test]
    fn revert_reasons_decode_like_geth() {
        assert_eq!(revert_message(&[]), "execution reverted");
        let error = error_string(b"no");
        assert_eq!(revert_message(&error), "execution reverted: no");
        // Truncated payloads fall back to the bare message.
        assert_eq!(revert_message(&error[..40]), "execution reverted");
        assert_eq!(
            revert_message(&error_string(&[b'a', 0xff])),
            "execution reverted: a\u{fffd}"
        );
        let mut panic = PANIC_SELECTOR.to_vec();
        panic.extend_from_slice(&U256::from(0x11).to_be_bytes::<32>());
        assert_eq!(
            revert_message(&panic),
            "execution reverted: arithmetic underflow or overflow"
        );
        panic[35] = 0x99;
        assert_eq!(
            revert_message(&panic),
            "execution reverted: unknown panic code: 0x99"
        );
        // Any other selector is custom error data: no reason.
        assert_eq!(revert_message(&[1, 2, 3, 4, 5]), "execution reverted");
    }
}
