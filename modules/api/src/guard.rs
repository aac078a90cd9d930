//! An inspector that stops an EVM run when the request runs past its deadline or when the
//! trace being recorded beside it grows past its size bound. Shared by every module that runs
//! user-controlled code under a tracer (trace_callMany, debug_trace*).
//!
//! A tracer (revm-inspectors) counts the byte buffers it copies against its own budget; this
//! guard counts what that budget does not see, at a cost per item the caller sets: one
//! recorded step per executed opcode, one node per call frame. Stopping uses revm's
//! external-error path: the context error is set and the interpreter halts, so the whole
//! transaction returns `Err(EVMError::Custom)` at once instead of unwinding frame by frame.

use std::time::Instant;

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

    fn call(&mut self, _context: &mut CTX, _inputs: &mut CallInputs) -> Option<CallOutcome> {
        if self.node_cost > 0 {
            self.add(self.node_cost);
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
