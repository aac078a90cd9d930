//! Large results handed to the HTTP front door as finished JSON text.
//!
//! jsonrpsee builds every answer by serializing the method's result into a buffer grown by
//! doubling, then parses the whole answer again to check it is JSON, then shrinks it: for a
//! result that already is JSON text (a cached block of receipts, say) that is five copies and
//! a full parse of bytes nobody changed. For a 21 MB block of receipts those took about two
//! thirds of the node's CPU per request (perf, the execution-apis chain's block 2).
//!
//! So for a single JSON-RPC request over HTTP the front door puts a [`RawAnswerSlot`] into the
//! request's extensions. A method with a large result calls [`answer`] (a result it has as
//! text) or [`answer_value`] (one it has as a value): when the slot is there the text goes into
//! it and jsonrpsee gets a `null` stand-in; the front door then writes the answer's body around
//! the text itself. Batches and WebSocket messages have no slot, and the result goes back
//! through jsonrpsee as usual. Small results gain nothing from this (one transfer's
//! `eth_simulateV1` answer, 1.9 KB, measured the same CPU per request either way).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use jsonrpsee::types::Extensions;
use serde::Serialize;
use serde_json::value::RawValue;

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

    /// The most bytes the answer may have.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The slot the front door offered with a request, if it did.
    pub fn of(extensions: &Extensions) -> Option<Self> {
        extensions.get::<Self>().cloned()
    }

    /// The result a method left here, if any.
    pub fn take(&self) -> Option<Bytes> {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn put(&self, text: Bytes) {
        *self.text.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
    }
}

/// JSON text shared without copying (a cached answer, say): the front door sends these very
/// bytes, and jsonrpsee writes them as a raw value.
#[derive(Debug, Clone)]
pub struct SharedJson(Arc<RawValue>);

impl SharedJson {
    pub fn new(json: Box<RawValue>) -> Self {
        Self(Arc::from(json))
    }

    pub fn get(&self) -> &str {
        self.0.get()
    }
}

impl AsRef<[u8]> for SharedJson {
    fn as_ref(&self) -> &[u8] {
        self.0.get().as_bytes()
    }
}

impl Serialize for SharedJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// A result a method has as JSON text: into the slot when the front door offered one (the
/// text is not copied), else to jsonrpsee.
pub fn answer(extensions: &Extensions, json: SharedJson) -> Answer<SharedJson> {
    if let Some(slot) = extensions.get::<RawAnswerSlot>() {
        if json.get().len() <= slot.max_bytes {
            slot.put(Bytes::from_owner(json));
            return Answer::LeftInSlot;
        }
    }
    Answer::Value(json)
}

/// A method's result for jsonrpsee: the value, or the `null` stand-in of a value left as text
/// in the request's slot.
// Clone: jsonrpsee asks it of every result type.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Answer<T> {
    Value(T),
    LeftInSlot,
}

/// `value` as a method's result: serialized into `slot` when there is one (the caller's
/// thread does the serializing: call it where the work is, off the RPC threads for heavy
/// results), else given to jsonrpsee as it is. A value whose text would pass the slot's limit
/// goes to jsonrpsee too, which stops writing at the limit and answers "response too big".
pub fn answer_value<T: Serialize>(slot: Option<&RawAnswerSlot>, value: T) -> Answer<T> {
    let Some(slot) = slot else {
        return Answer::Value(value);
    };
    let mut text = BoundedText {
        bytes: Vec::new(),
        max: slot.max_bytes,
    };
    match serde_json::to_writer(&mut text, &value) {
        Ok(()) => {
            slot.put(text.bytes.into());
            Answer::LeftInSlot
        }
        Err(_) => Answer::Value(value),
    }
}

/// A buffer that refuses to grow past `max` bytes.
struct BoundedText {
    bytes: Vec<u8>,
    max: usize,
}

// serde_json writes every token with `write_all`: inlined, not the default loop over an
// outlined `write` (8% of a profile's samples; inlined, 6.8 MB of logs serialize here as fast as
// with `serde_json::to_vec`).
impl std::io::Write for BoundedText {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if self.bytes.len() + buf.len() > self.max {
            return Err(std::io::Error::other("past the response size limit"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> SharedJson {
        SharedJson::new(RawValue::from_string(text.to_owned()).unwrap())
    }

    fn written(answer: &Answer<SharedJson>) -> String {
        serde_json::to_string(answer).unwrap()
    }

    #[test]
    fn with_a_slot_the_text_goes_there_and_null_to_jsonrpsee() {
        let slot = RawAnswerSlot::new(100);
        let mut extensions = Extensions::new();
        extensions.insert(slot.clone());
        assert_eq!(written(&answer(&extensions, json("[1,2]"))), "null");
        assert_eq!(slot.take().as_deref(), Some(&b"[1,2]"[..]));
        assert_eq!(slot.take(), None, "taken once");
    }

    #[test]
    fn a_value_goes_to_the_slot_as_text_when_there_is_one_and_it_fits() {
        let value = serde_json::json!({"a": [1, 2, 3]});
        let plain = answer_value(None, value.clone());
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"a":[1,2,3]}"#);

        let slot = RawAnswerSlot::new(100);
        let left = answer_value(Some(&slot), value.clone());
        assert_eq!(serde_json::to_string(&left).unwrap(), "null");
        assert_eq!(slot.take().as_deref(), Some(&br#"{"a":[1,2,3]}"#[..]));

        let small = RawAnswerSlot::new(5);
        let too_big = answer_value(Some(&small), value);
        assert_eq!(serde_json::to_string(&too_big).unwrap(), r#"{"a":[1,2,3]}"#);
        assert_eq!(small.take(), None);
    }

    #[test]
    fn without_a_slot_or_past_its_limit_the_text_goes_to_jsonrpsee() {
        let text = r#"{"a":[1,2,3]}"#;
        assert_eq!(written(&answer(&Extensions::new(), json(text))), text);

        let slot = RawAnswerSlot::new(4);
        let mut extensions = Extensions::new();
        extensions.insert(slot.clone());
        assert_eq!(written(&answer(&extensions, json(text))), text);
        assert_eq!(slot.take(), None);
    }
}
