//! The parameters of `trace_callMany`: `[[ [call, traceTypes], ... ], block]`.

use std::fmt;

use alloy::primitives::map::HashSet;

use alloy::rpc::types::{trace::parity::TraceType, TransactionRequest};
use serde::{
    de::{self, SeqAccess, Visitor},
    Deserialize, Deserializer,
};

/// One entry of the call list: a transaction call object and the trace types wanted for it.
///
/// The trace-type list may be empty, `null` or left out: the call still runs (its state
/// changes carry over to the next call) and only its `output` is reported.
#[derive(Debug, Clone, Default)]
pub struct TraceCall {
    pub request: TransactionRequest,
    pub trace_types: HashSet<TraceType>,
}

impl<'de> Deserialize<'de> for TraceCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor;

        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = TraceCall;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a [call, traceTypes] pair")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TraceCall, A::Error> {
                let request: TransactionRequest = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &"a [call, traceTypes] pair"))?;
                let trace_types: Option<HashSet<TraceType>> = seq.next_element()?.flatten();
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &"a [call, traceTypes] pair"));
                }
                Ok(TraceCall {
                    request,
                    trace_types: trace_types.unwrap_or_default(),
                })
            }
        }

        deserializer.deserialize_seq(EntryVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entry_forms() {
        let call = json!({"from": "0x0000000000000000000000000000000000000001", "value": "0x1"});
        let full: TraceCall =
            serde_json::from_value(json!([call, ["trace", "stateDiff"]])).unwrap();
        assert_eq!(
            full.trace_types,
            HashSet::from_iter([TraceType::Trace, TraceType::StateDiff])
        );
        let bare: TraceCall = serde_json::from_value(json!([call])).unwrap();
        assert!(bare.trace_types.is_empty());
        let null: TraceCall = serde_json::from_value(json!([call, null])).unwrap();
        assert!(null.trace_types.is_empty());

        let err = serde_json::from_value::<TraceCall>(json!([call, ["foo"]])).unwrap_err();
        assert!(err.to_string().contains("unknown variant `foo`"), "{err}");
        assert!(serde_json::from_value::<TraceCall>(json!([])).is_err());
        assert!(serde_json::from_value::<TraceCall>(json!([call, [], 1])).is_err());
        assert!(serde_json::from_value::<TraceCall>(json!(call)).is_err());
        let err = serde_json::from_value::<TraceCall>(json!([{"gas": "zz"}, []])).unwrap_err();
        assert!(
            err.to_string().contains("gas") || err.to_string().contains("hex"),
            "{err}"
        );
    }
}
