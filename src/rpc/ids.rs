//! Request ids jsonrpsee cannot carry, put right on HTTP.
//!
//! JSON-RPC 2.0 lets a client pick any string, number or null as a request's id, and geth
//! answers with the id exactly as it was sent (bools too). jsonrpsee's `Id` holds only null,
//! strings and numbers that fit a u64: a request with any other id (negative, fractional,
//! written with an exponent, past u64, a bool) fails jsonrpsee's request parse, then passes its
//! notification parse, which has no id, and is never answered. A request whose id is an array or
//! an object is not a valid request at all and must get -32600 with a null id, not silence; so
//! does one that names its id twice (jsonrpsee refuses it as a request and takes it for a
//! notification). A single request that is not UTF-8 gets -32700: jsonrpsee's notification
//! parse skips over strings without checking them, so it too would go unanswered.
//!
//! The HTTP layer looks at ids only where jsonrpsee gets them wrong: a single request only after
//! jsonrpsee found no answer for it (so an ordinary request pays nothing), a batch before it is
//! sent on (one parse of its items, which jsonrpsee parses again). A foreign id is replaced by a
//! stand-in string the request does not contain anywhere, and in the answer the stand-in is
//! replaced by the id as the client wrote it. A single request sent on again is counted once
//! against its key's limits (its first dispatch, as the notification jsonrpsee took it for, was).
//! A true notification (no id) is sent on too, with an id added and its answer dropped, since
//! jsonrpsee's service answers notifications without running them ([`notification_as_call`]).
//! WebSocket messages are read by jsonrpsee itself, past this layer: there such requests run
//! as notifications and are not answered.

use jsonrpsee::types::Id;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The one field of a request object looked at here, and whether it was given twice.
struct IdOnly<'a> {
    id: Option<&'a RawValue>,
    repeated: bool,
}

impl<'de> Deserialize<'de> for IdOnly<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = IdOnly<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a request object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut found = IdOnly {
                    id: None,
                    repeated: false,
                };
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "id" {
                        found.repeated |= found.id.is_some();
                        found.id = Some(map.next_value()?);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(found)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// What jsonrpsee makes of one request object's id.
#[derive(Debug, PartialEq, Eq)]
enum IdKind {
    /// Absent, null, a string or a u64: jsonrpsee answers with it.
    Carried,
    /// Another number, or a bool: valid, but jsonrpsee cannot hold it. Bytes `start..end` of
    /// the body.
    Foreign { start: usize, end: usize },
    /// An array or object: the request object is invalid.
    Invalid,
}

/// Where `inner` (a slice of `outer`) starts in `outer`.
fn offset_in(outer: &str, inner: &str) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

/// The id of request `object`, a slice of `body` (spans are offsets into `body`).
fn id_kind(body: &str, object: &str) -> IdKind {
    let id = match serde_json::from_str::<IdOnly<'_>>(object) {
        Ok(IdOnly { repeated: true, .. }) => return IdKind::Invalid,
        Ok(IdOnly { id: Some(id), .. }) => id,
        // No id, a null one, or something jsonrpsee refuses as well (answered as it sees fit).
        _ => return IdKind::Carried,
    };
    if serde_json::from_str::<Id<'_>>(id.get()).is_ok() {
        return IdKind::Carried;
    }
    match id.get().as_bytes().first() {
        Some(b'[' | b'{') => IdKind::Invalid,
        _ => {
            let start = offset_in(body, id.get());
            IdKind::Foreign {
                start,
                end: start + id.get().len(),
            }
        }
    }
}

/// A request body with its foreign ids replaced, and how to put them back into the answer.
#[derive(Debug, PartialEq, Eq)]
pub struct Rewrite {
    pub body: String,
    /// (stand-in as it appears in the answer, the id as the client wrote it).
    swaps: Vec<(String, String)>,
}

impl Rewrite {
    /// The answer to the rewritten body with every stand-in id replaced by the client's id.
    pub fn restore(&self, answer: &str) -> String {
        let mut out = answer.to_string();
        for (stand_in, original) in &self.swaps {
            // jsonrpsee writes `"id":` followed by the id, with no space, before the result.
            let written = format!("\"id\":{stand_in}");
            if let Some(at) = out.find(&written) {
                out.replace_range(at..at + written.len(), &format!("\"id\":{original}"));
            }
        }
        out
    }
}

/// A request object jsonrpsee answers with -32600 and a null id.
const INVALID_REQUEST: &str = r#"{"jsonrpc":"2.0","id":null}"#;

/// A body jsonrpsee answers with -32700 and a null id.
const NOT_JSON: &str = "{";

/// A prefix of stand-in ids found nowhere in `body`, so that a stand-in can only be found in
/// the answer where it was put.
fn stand_in_prefix(body: &str) -> String {
    (0u64..)
        .map(|salt| format!("simnode-id-{salt}-"))
        .find(|prefix| !body.contains(prefix.as_str()))
        .unwrap_or_default()
}

/// Builds the rewritten body from `body` and the spans to replace (ascending, not overlapping):
/// a foreign id becomes a stand-in, an invalid object becomes [`INVALID_REQUEST`].
fn rewrite(body: &str, spans: Vec<(usize, usize, bool)>) -> Option<Rewrite> {
    if spans.is_empty() {
        return None;
    }
    let prefix = stand_in_prefix(body);
    let mut out = String::with_capacity(body.len() + 32 * spans.len());
    let mut swaps = Vec::new();
    let mut at = 0;
    for (n, (start, end, foreign)) in spans.into_iter().enumerate() {
        out.push_str(&body[at..start]);
        if foreign {
            let stand_in = format!("\"{prefix}{n}\"");
            out.push_str(&stand_in);
            swaps.push((stand_in, body[start..end].to_string()));
        } else {
            out.push_str(INVALID_REQUEST);
        }
        at = end;
    }
    out.push_str(&body[at..]);
    Some(Rewrite { body: out, swaps })
}

/// For a single request object that jsonrpsee did not answer: the body to send instead, if
/// its id was the reason.
pub fn fix_single(body: &[u8]) -> Option<Rewrite> {
    let Ok(body) = std::str::from_utf8(body) else {
        // Sent on as something jsonrpsee answers with a parse error (-32700, null id).
        return Some(Rewrite {
            body: NOT_JSON.to_string(),
            swaps: Vec::new(),
        });
    };
    let object = body.trim();
    let span = match id_kind(body, object) {
        IdKind::Carried => return None,
        IdKind::Foreign { start, end } => (start, end, true),
        IdKind::Invalid => {
            let start = offset_in(body, object);
            (start, start + object.len(), false)
        }
    };
    rewrite(body, vec![span])
}

/// For a single request jsonrpsee took for a notification and [`fix_single`] left alone: the
/// body to run it as a call (an id added, the answer to be dropped), if it is a notification,
/// an object with a method and no id.
pub fn notification_as_call(body: &[u8]) -> Option<String> {
    let mut object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(body).ok()?;
    if object.contains_key("id") || !object.contains_key("method") {
        return None;
    }
    object.insert("id".into(), serde_json::Value::from("notification"));
    serde_json::to_string(&object).ok()
}

/// For a batch: the body to send instead, if any of its requests has an id jsonrpsee would
/// get wrong. A body that is not a JSON array is left to jsonrpsee.
pub fn fix_batch(body: &[u8]) -> Option<Rewrite> {
    let body = std::str::from_utf8(body).ok()?;
    let items: Vec<&RawValue> = serde_json::from_str(body).ok()?;
    let spans = items
        .iter()
        .filter_map(|item| match id_kind(body, item.get()) {
            IdKind::Carried => None,
            IdKind::Foreign { start, end } => Some((start, end, true)),
            IdKind::Invalid => {
                let start = offset_in(body, item.get());
                Some((start, start + item.get().len(), false))
            }
        })
        .collect();
    rewrite(body, spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_become_calls_and_nothing_else_does() {
        let call = notification_as_call(br#"{"jsonrpc":"2.0","method":"m","params":[1]}"#)
            .expect("a notification");
        let call: serde_json::Value = serde_json::from_str(&call).unwrap();
        assert_eq!(call["method"], "m");
        assert_eq!(call["params"], serde_json::json!([1]));
        assert!(call["id"].is_string());
        for body in [
            r#"{"jsonrpc":"2.0","id":-1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
            r#"{"jsonrpc":"2.0"}"#,
            "[]",
            "not json",
        ] {
            assert_eq!(notification_as_call(body.as_bytes()), None, "{body}");
        }
    }

    #[test]
    fn carried_ids_are_left_alone() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"m"}"#,
            "not json",
        ] {
            assert_eq!(fix_single(body.as_bytes()), None, "{body}");
        }
        assert_eq!(fix_batch(br#"[{"id":1},{"id":"a"},{"method":"n"}]"#), None);
        assert_eq!(fix_batch(b"{}"), None);
    }

    #[test]
    fn foreign_ids_get_stand_ins_and_come_back_as_written() {
        for id in ["-1", "1.5", "1e2", "18446744073709551616", "true", "-0"] {
            let body = format!(r#" {{"jsonrpc":"2.0","id":{id},"method":"m","params":[-1]}}"#);
            let fix = fix_single(body.as_bytes()).expect(id);
            assert_eq!(
                fix.body,
                r#" {"jsonrpc":"2.0","id":"simnode-id-0-0","method":"m","params":[-1]}"#
            );
            let answer = r#"{"jsonrpc":"2.0","id":"simnode-id-0-0","result":"simnode-id-0-0"}"#;
            assert_eq!(
                fix.restore(answer),
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"simnode-id-0-0"}}"#)
            );
        }
    }

    #[test]
    fn stand_ins_are_not_found_in_the_request() {
        let body = r#"{"id":-1,"method":"m","params":["simnode-id-0-x"]}"#;
        let fix = fix_single(body.as_bytes()).expect("fix");
        assert_eq!(
            fix.body,
            r#"{"id":"simnode-id-1-0","method":"m","params":["simnode-id-0-x"]}"#
        );
    }

    #[test]
    fn a_repeated_id_makes_an_invalid_request() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"m","id":null}"#,
            r#"{"jsonrpc":"2.0","i\u0064":7,"method":"m","id":7}"#,
        ] {
            let fix = fix_single(body.as_bytes()).expect(body);
            assert_eq!(fix.body, INVALID_REQUEST, "{body}");
        }
        let fix =
            fix_batch(br#"[{"id":1,"id":2,"method":"m"},{"id":3,"method":"m"}]"#).expect("fix");
        assert_eq!(
            fix.body,
            r#"[{"jsonrpc":"2.0","id":null},{"id":3,"method":"m"}]"#
        );
    }

    #[test]
    fn a_single_request_that_is_not_utf8_is_a_parse_error() {
        let fix =
            fix_single(b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"m\"}").expect("fix");
        assert_eq!(fix.body, NOT_JSON);
    }

    #[test]
    fn invalid_ids_become_invalid_requests() {
        let fix = fix_single(br#"{"jsonrpc":"2.0","id":[1],"method":"m"}"#).expect("fix");
        assert_eq!(fix.body, INVALID_REQUEST);
        let fix = fix_batch(br#"[{"id":{"a":1},"method":"m"}, {"id":-2,"method":"m"}, {"id":3}]"#)
            .expect("fix");
        assert_eq!(
            fix.body,
            r#"[{"jsonrpc":"2.0","id":null}, {"id":"simnode-id-0-1","method":"m"}, {"id":3}]"#
        );
        let answer = r#"[{"jsonrpc":"2.0","id":null,"error":{}},{"jsonrpc":"2.0","id":"simnode-id-0-1","result":1},{"jsonrpc":"2.0","id":3,"result":2}]"#;
        assert_eq!(
            fix.restore(answer),
            r#"[{"jsonrpc":"2.0","id":null,"error":{}},{"jsonrpc":"2.0","id":-2,"result":1},{"jsonrpc":"2.0","id":3,"result":2}]"#
        );
    }
}
