//! Large results handed to the HTTP front door as finished JSON text.
//!
//! jsonrpsee builds every answer by serializing the method's result into a buffer grown by
//! doubling, then parses the whole answer again to check it is JSON, then shrinks it: for a
//! result that already is JSON text (a cached block of receipts, say) that is five copies and
//! a full parse of bytes nobody changed. For a 21 MB block of receipts those took about two
//! thirds of the node's CPU per request (perf, the execution-apis chain's block 2).
//!
//! So for a single JSON-RPC request over HTTP the front door puts a [`RawAnswerSlot`] into the
//! request's extensions. A method with a large result calls [`answer`]: when the slot is there
//! the text goes into it and jsonrpsee gets a `null` stand-in; the front door then writes the
//! answer's body around the text itself. Batches and WebSocket messages have no slot, and the
//! result goes back through jsonrpsee as usual.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use jsonrpsee::types::Extensions;
use serde_json::value::RawValue;

use crate::{RpcError, RpcResult};

/// Where a method leaves its result as JSON text for the front door. One per request.
#[derive(Debug, Clone)]
pub struct RawAnswerSlot {
    /// The most bytes of result the answer may carry (`--rpc.max-response-size`); a larger
    /// result goes through jsonrpsee, which answers with its "response too big" error.
    max_bytes: usize,
    text: Arc<Mutex<Option<Bytes>>>,
}

impl RawAnswerSlot {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            text: Arc::default(),
        }
    }

    /// The result a method left here, if any.
    pub fn take(&self) -> Option<Bytes> {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn put(&self, text: Bytes) {
        *self.text.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
    }
}

/// What a method returns for a result it has as JSON text (`json` must be valid JSON): the
/// `null` stand-in when the front door offered a slot and the text went there, else the text
/// itself for jsonrpsee.
pub fn answer(extensions: &Extensions, json: Bytes) -> RpcResult<Box<RawValue>> {
    if let Some(slot) = extensions.get::<RawAnswerSlot>() {
        if json.len() <= slot.max_bytes {
            slot.put(json);
            return Ok(null());
        }
    }
    let text = String::from_utf8(Vec::from(json)).map_err(RpcError::internal)?;
    RawValue::from_string(text).map_err(RpcError::internal)
}

fn null() -> Box<RawValue> {
    // "null" is JSON.
    RawValue::from_string("null".to_owned()).unwrap_or_else(|_| unreachable!())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_a_slot_the_text_goes_there_and_null_to_jsonrpsee() {
        let slot = RawAnswerSlot::new(100);
        let mut extensions = Extensions::new();
        extensions.insert(slot.clone());
        let stand_in = answer(&extensions, Bytes::from_static(b"[1,2]")).unwrap();
        assert_eq!(stand_in.get(), "null");
        assert_eq!(slot.take().as_deref(), Some(&b"[1,2]"[..]));
        assert_eq!(slot.take(), None, "taken once");
    }

    #[test]
    fn without_a_slot_or_past_its_limit_the_text_goes_to_jsonrpsee() {
        let text = Bytes::from_static(b"{\"a\":[1,2,3]}");
        let plain = answer(&Extensions::new(), text.clone()).unwrap();
        assert_eq!(plain.get(), "{\"a\":[1,2,3]}");

        let slot = RawAnswerSlot::new(4);
        let mut extensions = Extensions::new();
        extensions.insert(slot.clone());
        let too_big = answer(&extensions, text).unwrap();
        assert_eq!(too_big.get(), "{\"a\":[1,2,3]}");
        assert_eq!(slot.take(), None);
    }
}
