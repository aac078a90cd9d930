//! An inspector that stops an EVM run when the request runs past its deadline or when the
//! trace being recorded beside it grows past its size bound. Shared by every module that runs
//! user-controlled code under a tracer (trace_callMany, debug_trace*).
//!
//! A tracer (revm-inspectors) counts the byte buffers it copies against its own budget; this
//! guard counts what that budget does not see, at a cost per item the caller sets: one
//! recorded step per executed opcode, one node per call frame. Stopping uses revm's
//! external-error path: the context error is set and the interpreter halts, so the whole
//! transaction returns `Err(EVMError::Custom)` at once instead of unwinding frame by frame.

use std::time::{Duration, Instant};

use alloy::primitives::Address;

use revm::{
    context_interface::{ContextError, ContextTr},
    interpreter::{
        interpreter_types::LoopControl, CallInputs, CallOutcome, CreateInputs, CreateOutcome,
        Interpreter,
    },
    Inspector,
};

/// How many opcodes run between two looks at the clock.
const CLOCK_EVERY: u32 = 2048;

/// The precompiles whose run time grows with their input: modexp, BN254 pairing, blake2f (its
/// rounds), the KZG point evaluation, BLS12-381's multi-scalar multiplications and pairing.
/// One call of them can take most of a second under the gas cap, and the interpreter cannot
/// stop a precompile once it has begun.
pub const HEAVY_PRECOMPILES: [Address; 7] = [
    Address::with_last_byte(0x05),
    Address::with_last_byte(0x08),
    Address::with_last_byte(0x09),
    Address::with_last_byte(0x0a),
    Address::with_last_byte(0x0c),
    Address::with_last_byte(0x0e),
    Address::with_last_byte(0x0f),
];

/// How much time a run must have left to begin a call of a heavy precompile: a short run (a
/// request's first try on the RPC thread, with a budget of a millisecond) stops instead, and
/// is run again where it may take its time.
pub const HEAVY_CALL_ROOM: Duration = Duration::from_millis(50);

/// Whether a call of `code_address` (a heavy precompile, or one of `moved`, where a request's
/// overrides moved some) should not begin with the run's `deadline` this close.
pub fn too_late_to_call(code_address: &Address, moved: &[Address], deadline: Instant) -> bool {
    (HEAVY_PRECOMPILES.contains(code_address) || moved.contains(code_address))
        && deadline.saturating_duration_since(Instant::now()) < HEAVY_CALL_ROOM
}

/// What a call that does not begin (see [`too_late_to_call`]) returns in its place: out of gas,
/// with all its gas spent, so the run unwinds as any halted call would.
pub fn call_not_begun(inputs: &CallInputs) -> CallOutcome {
    CallOutcome::new_oog(inputs.gas_limit, inputs.return_memory_offset.clone(), 0)
}

/// Why a run was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    Deadline,
    TraceTooLarge,
}

#[derive(Debug)]
pub struct Guard {
    deadline: Instant,
    until_clock: u32,
    /// Bytes counted per executed opcode (0: steps are not recorded).
    step_cost: usize,
    /// Bytes counted per call frame, plus its output (0: frames are not recorded).
    node_cost: usize,
    /// Whether each step also counts its memory, as an answer that shows it per step (hex:
    /// two characters a byte).
    memory_step: bool,
    /// Bytes counted so far in this request (carried from call to call).
    pub bytes: usize,
    max_bytes: usize,
    pub abort: Option<Abort>,
}

impl Guard {
    /// A guard with `bytes` already used of `max_bytes`; counts nothing until
    /// [`counting`](Self::counting) says what is recorded.
    pub fn new(deadline: Instant, bytes: usize, max_bytes: usize) -> Self {
        Self {
            deadline,
            until_clock: 0,
            step_cost: 0,
            node_cost: 0,
            memory_step: false,
            bytes,
            max_bytes,
            abort: None,
        }
    }

    /// Counts `step_cost` bytes per opcode and `node_cost` per frame (0 for what the tracer
    /// beside it does not record).
    pub fn counting(mut self, step_cost: usize, node_cost: usize) -> Self {
        self.step_cost = step_cost;
        self.node_cost = node_cost;
        self
    }

    /// Counts each step's memory too (see [`Guard::memory_step`]).
    pub fn counting_memory(mut self, on: bool) -> Self {
        self.memory_step = on;
        self
    }

    fn add(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.max_bytes && self.abort.is_none() {
            self.abort = Some(Abort::TraceTooLarge);
        }
    }

    fn halt_if_aborted<CTX: ContextTr>(&self, interp: &mut Interpreter, context: &mut CTX) {
        let Some(reason) = self.abort else { return };
        if context.error().is_ok() {
            *context.error() = Err(ContextError::Custom(format!("run stopped: {reason:?}")));
        }
        // The tracer beside this guard may have halted in the same hook: replace its action
        // rather than set a second one (revm asserts there is at most one).
        interp.bytecode.action().take();
        interp.bytecode.reset_action();
        interp.halt_fatal();
    }
}

impl<CTX: ContextTr> Inspector<CTX> for Guard {
    fn initialize_interp(&mut self, interp: &mut Interpreter, context: &mut CTX) {
        self.halt_if_aborted(interp, context);
    }

    #[inline]
    fn step(&mut self, interp: &mut Interpreter, context: &mut CTX) {
        if self.step_cost > 0 {
            self.add(self.step_cost);
        }
        if self.memory_step {
            use revm::interpreter::interpreter_types::MemoryTr;
            self.add(interp.memory.size().saturating_mul(2));
        }
        if self.until_clock == 0 {
            self.until_clock = CLOCK_EVERY;
            if Instant::now() >= self.deadline && self.abort.is_none() {
                self.abort = Some(Abort::Deadline);
            }
        }
        self.until_clock -= 1;
        if self.abort.is_some() {
            self.halt_if_aborted(interp, context);
        }
    }

    fn call(&mut self, context: &mut CTX, inputs: &mut CallInputs) -> Option<CallOutcome> {
        if self.node_cost > 0 {
            self.add(self.node_cost);
        }
        if self.abort.is_none() && too_late_to_call(&inputs.bytecode_address, &[], self.deadline) {
            self.abort = Some(Abort::Deadline);
            if context.error().is_ok() {
                *context.error() = Err(ContextError::Custom("run stopped: Deadline".into()));
            }
            return Some(call_not_begun(inputs));
        }
        None
    }

    fn call_end(&mut self, _context: &mut CTX, _inputs: &CallInputs, outcome: &mut CallOutcome) {
        if self.node_cost > 0 {
            self.add(outcome.result.output.len());
        }
    }

    fn create(&mut self, _context: &mut CTX, _inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        if self.node_cost > 0 {
            self.add(self.node_cost);
        }
        None
    }

    fn create_end(
        &mut self,
        _context: &mut CTX,
        _inputs: &CreateInputs,
        outcome: &mut CreateOutcome,
    ) {
        if self.node_cost > 0 {
            self.add(outcome.result.output.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_precompiles_wait_for_a_run_with_room() {
        let blake2f = Address::with_last_byte(0x09);
        let ecrecover = Address::with_last_byte(0x01);
        let moved = Address::repeat_byte(0x42);
        let soon = Instant::now() + Duration::from_millis(1);
        let later = Instant::now() + Duration::from_secs(5);
        assert!(too_late_to_call(&blake2f, &[], soon));
        assert!(!too_late_to_call(&blake2f, &[], later));
        // A cheap precompile and ordinary accounts run whatever time is left.
        assert!(!too_late_to_call(&ecrecover, &[], soon));
        assert!(!too_late_to_call(&moved, &[], soon));
        // A heavy one moved elsewhere by a request is heavy there.
        assert!(too_late_to_call(&moved, &[moved], soon));
    }
}
