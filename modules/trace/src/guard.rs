//! An inspector that stops a traced call when the request runs past its deadline or when the
//! trace being recorded grows past its size bound.
//!
//! It runs beside the [`TracingInspector`](revm_inspectors::tracing::TracingInspector), which
//! counts the byte buffers it copies (call inputs, memory writes) against its own budget; this
//! one counts what that budget does not see: one recorded step per executed opcode when a
//! vmTrace is asked for, and one call node per frame. Stopping uses revm's external-error path:
//! the context error is set and the interpreter halts, so the whole transaction returns
//! `Err(EVMError::Custom)` at once instead of unwinding frame by frame.

use std::time::Instant;

use revm::{
    context_interface::{ContextError, ContextTr},
    interpreter::{CallInputs, CallOutcome, CreateInputs, CreateOutcome, Interpreter},
    Inspector,
};
use revm_inspectors::tracing::types::{CallTraceNode, CallTraceStep};

/// Bytes one recorded vmTrace step costs beyond its byte buffers: the step itself plus its
/// pushed stack items and the rendered instruction.
pub(crate) const STEP_BYTES: usize = std::mem::size_of::<CallTraceStep>() + 64;
/// Bytes one call node costs beyond its input and output.
pub(crate) const NODE_BYTES: usize = std::mem::size_of::<CallTraceNode>();
/// How many opcodes run between two looks at the clock.
const CLOCK_EVERY: u32 = 2048;

/// Why a call was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abort {
    Deadline,
    TraceTooLarge,
}

#[derive(Debug)]
pub(crate) struct Guard {
    deadline: Instant,
    until_clock: u32,
    /// Whether every step is recorded (vmTrace) and so counts against `max_bytes`.
    count_steps: bool,
    /// Whether call nodes are recorded (any trace type) and so count against `max_bytes`.
    count_nodes: bool,
    /// Bytes counted so far in this request (carried from call to call).
    pub(crate) bytes: usize,
    max_bytes: usize,
    pub(crate) abort: Option<Abort>,
}

impl Guard {
    pub(crate) fn new(deadline: Instant, bytes: usize, max_bytes: usize) -> Self {
        Self {
            deadline,
            until_clock: 0,
            count_steps: false,
            count_nodes: false,
            bytes,
            max_bytes,
            abort: None,
        }
    }

    pub(crate) fn counting(mut self, steps: bool, nodes: bool) -> Self {
        self.count_steps = steps;
        self.count_nodes = nodes;
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
            *context.error() = Err(ContextError::Custom(format!(
                "trace call stopped: {reason:?}"
            )));
        }
        interp.halt_fatal();
    }
}

impl<CTX: ContextTr> Inspector<CTX> for Guard {
    fn initialize_interp(&mut self, interp: &mut Interpreter, context: &mut CTX) {
        self.halt_if_aborted(interp, context);
    }

    #[inline]
    fn step(&mut self, interp: &mut Interpreter, context: &mut CTX) {
        if self.count_steps {
            self.add(STEP_BYTES);
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
        if self.count_nodes {
            self.add(NODE_BYTES);
        }
        None
    }

    fn call_end(&mut self, _context: &mut CTX, _inputs: &CallInputs, outcome: &mut CallOutcome) {
        if self.count_nodes {
            self.add(outcome.result.output.len());
        }
    }

    fn create(&mut self, _context: &mut CTX, _inputs: &mut CreateInputs) -> Option<CreateOutcome> {
        if self.count_nodes {
            self.add(NODE_BYTES);
        }
        None
    }

    fn create_end(
        &mut self,
        _context: &mut CTX,
        _inputs: &CreateInputs,
        outcome: &mut CreateOutcome,
    ) {
        if self.count_nodes {
            self.add(outcome.result.output.len());
        }
    }
}
