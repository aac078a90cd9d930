//! The inspector every simulated call runs under: it enforces the request deadline, collects
//! the call's logs and, with `traceTransfers`, records ETH transfers as ERC-20 `Transfer` logs from
//! `0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE`, ordered with the real logs.
//!
//! Logs are kept per call frame so that a reverted or failed frame drops its logs (real and
//! transfer) together, as geth's simulate tracer does. Value moved by DELEGATECALL or CALLCODE
//! never leaves the executing account and is not reported; SELFDESTRUCT payouts are, the
//! contract's whole balance to the beneficiary as geth reports them, also when the beneficiary
//! is the contract itself (revm journals no transfer then, so the opcode is watched rather
//! than revm's self-destruct hook).

use std::time::Instant;

use alloy::primitives::{Address, Log, LogData, B256, U256};
use revm::{
    bytecode::opcode::SELFDESTRUCT,
    context::JournalTr,
    context_interface::ContextTr,
    interpreter::{
        interpreter::EthInterpreter,
        interpreter_types::{Jumps, LoopControl},
        CallInputs, CallOutcome, CallScheme, CreateInputs, CreateOutcome, CreateScheme,
        InstructionResult, Interpreter, InterpreterAction,
    },
    Inspector,
};
use simnode_api::vm_messages::LastInstruction;

/// Sender of the ETH transfer logs.
pub const TRANSFER_LOG_EMITTER: Address = Address::new([0xee; 20]);

/// `keccak256("Transfer(address,address,uint256)")`.
pub const TRANSFER_EVENT_TOPIC: B256 = B256::new([
    0xdd, 0xf2, 0x52, 0xad, 0x1b, 0xe2, 0xc8, 0x9b, 0x69, 0xc2, 0xb0, 0x68, 0xfc, 0x37, 0x8d, 0xaa,
    0x95, 0x2b, 0xa7, 0xf1, 0x63, 0xc4, 0xa1, 0x16, 0x28, 0xf5, 0x5a, 0x4d, 0xf5, 0x23, 0xb3, 0xef,
]);

/// How many interpreter steps run between two looks at the clock (a power of two).
const STEPS_PER_CLOCK_CHECK: u32 = 4096;

#[derive(Debug)]
pub struct SimInspector {
    trace_transfers: bool,
    deadline: Instant,
    steps: u32,
    timed_out: bool,
    /// Logs captured in this block so far, failed frames included: the geth that recorded the
    /// execution-apis fixtures numbers them so (`ethSimulate-use-as-many-features-as-possible`
    /// pins it: failed calls' transfer logs leave gaps). Newer geth gives a failed frame's
    /// numbers back; the fixtures are what clients are checked against.
    count: u64,
    /// Logs of the open call frames with their block-wide index, innermost last.
    frames: Vec<Vec<(Log, u64)>>,
    /// Logs of the last finished transaction (empty when it failed).
    finished: Vec<(Log, u64)>,
    /// The SELFDESTRUCT about to run (contract, beneficiary, the contract's balance), reported
    /// once it has.
    self_destruct: Option<(Address, Address, U256)>,
    /// The instruction last begun: the one a call halted on, whose name and stack geth's
    /// messages give.
    last: LastInstruction,
    /// Where the block's overrides moved heavy precompiles (see
    /// [`simnode_api::guard::too_late_to_call`]).
    pub moved_heavy: Vec<Address>,
}

impl SimInspector {
    pub fn new(trace_transfers: bool, deadline: Instant) -> Self {
        Self {
            trace_transfers,
            deadline,
            steps: 0,
            timed_out: false,
            count: 0,
            frames: Vec::new(),
            finished: Vec::new(),
            self_destruct: None,
            last: LastInstruction::default(),
            moved_heavy: Vec::new(),
        }
    }

    /// The instruction last begun.
    pub fn last_instruction(&self) -> LastInstruction {
        self.last
    }

    /// Starts numbering logs of a new block.
    pub fn start_block(&mut self) {
        self.count = 0;
        self.reset();
    }

    /// Forgets the logs of the previous transaction.
    pub fn reset(&mut self) {
        self.frames.clear();
        self.finished.clear();
    }

    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// Real (and with `traceTransfers` transfer) logs of the last transaction, in execution
    /// order, with their index in the block.
    pub fn take_logs(&mut self) -> Vec<(Log, u64)> {
        std::mem::take(&mut self.finished)
    }

    fn push_transfer(&mut self, from: Address, to: Address, value: U256) {
        if !self.trace_transfers || value.is_zero() {
            return;
        }
        let log = Log {
            address: TRANSFER_LOG_EMITTER,
            data: LogData::new_unchecked(
                vec![TRANSFER_EVENT_TOPIC, from.into_word(), to.into_word()],
                B256::from(value).0.to_vec().into(),
            ),
        };
        self.capture(log);
    }

    fn capture(&mut self, log: Log) {
        if let Some(frame) = self.frames.last_mut() {
            frame.push((log, self.count));
            self.count += 1;
        }
    }

    fn enter(&mut self) {
        self.frames.push(Vec::new());
    }

    fn exit(&mut self, ok: bool) {
        let Some(frame) = self.frames.pop() else {
            return;
        };
        match self.frames.last_mut() {
            Some(parent) if ok => parent.extend(frame),
            Some(_) => {}
            None => self.finished = if ok { frame } else { Vec::new() },
        }
    }
}

impl<CTX: ContextTr> Inspector<CTX, EthInterpreter> for SimInspector {
    fn step(&mut self, interp: &mut Interpreter<EthInterpreter>, context: &mut CTX) {
        self.last.step(interp, context);
        self.steps = self.steps.wrapping_add(1);
        if self.timed_out || self.steps & (STEPS_PER_CLOCK_CHECK - 1) == 0 {
            if !self.timed_out && Instant::now() >= self.deadline {
                self.timed_out = true;
            }
            if self.timed_out {
                interp.halt(InstructionResult::OutOfGas);
                return;
            }
        }
        if self.trace_transfers && interp.bytecode.opcode() == SELFDESTRUCT {
            let contract = interp.input.target_address;
            let beneficiary = interp
                .stack
                .peek(0)
                .map(|word| Address::from_word(word.into()));
            let balance = context
                .journal_mut()
                .load_account(contract)
                .map(|acc| acc.data.info.balance);
            if let (Ok(beneficiary), Ok(balance)) = (beneficiary, balance) {
                self.self_destruct = Some((contract, beneficiary, balance));
            }
        }
    }

    fn step_end(&mut self, interp: &mut Interpreter<EthInterpreter>, _context: &mut CTX) {
        if let Some((contract, beneficiary, balance)) = self.self_destruct.take() {
            let done = matches!(
                interp.bytecode.action(),
                Some(InterpreterAction::Return(result))
                    if result.result == InstructionResult::SelfDestruct
            );
            if done {
                self.push_transfer(contract, beneficiary, balance);
            }
        }
    }

    fn log(&mut self, _context: &mut CTX, log: Log) {
        self.capture(log);
    }

    fn call(&mut self, _context: &mut CTX, inputs: &mut CallInputs) -> Option<CallOutcome> {
        self.enter();
        // A precompile call cannot be stopped once begun: one that may take long does not
        // begin this close to the deadline (a first try on the RPC thread gives way instead).
        if self.timed_out
            || simnode_api::guard::too_late_to_call(
                &inputs.bytecode_address,
                &self.moved_heavy,
                self.deadline,
            )
        {
            self.timed_out = true;
            return Some(simnode_api::guard::call_not_begun(inputs));
        }
        if inputs.scheme == CallScheme::Call {
            if let Some(value) = inputs.transfer_value() {
                self.push_transfer(inputs.transfer_from(), inputs.transfer_to(), value);
            }
        }
        None
    }

    fn call_end(&mut self, _context: &mut CTX, _inputs: &CallInputs, outcome: &mut CallOutcome) {
        self.exit(outcome.result.result.is_ok());
    }

    fn create(&mut self, context: &mut CTX, inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        self.enter();
        if self.trace_transfers
            && !inputs.value().is_zero()
            && !matches!(inputs.scheme(), CreateScheme::Custom { .. })
        {
            let nonce = context
                .journal_mut()
                .load_account(inputs.caller())
                .map(|acc| acc.data.info.nonce);
            if let Ok(nonce) = nonce {
                let to = inputs.created_address(nonce);
                self.push_transfer(inputs.caller(), to, inputs.value());
            }
        }
        None
    }

    fn create_end(
        &mut self,
        _context: &mut CTX,
        _inputs: &CreateInputs,
        outcome: &mut CreateOutcome,
    ) {
        self.exit(outcome.result.result.is_ok());
    }
}
