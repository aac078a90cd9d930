//! Names the parameter behind a -32602 that came from decoding the params array.
//!
//! Methods decode positional params with jsonrpsee's `#[rpc]` macros, one element after the
//! other (`Params::sequence`), which report serde's reason with a
//! position relative to the element it was decoding ("invalid string length at line 1
//! column 6") and nothing about which element or field that was. The raw params are at hand
//! in the middleware, so the position can be traced back: elements are decoded in order, and
//! serde reports a typed error right after the token it rejected (a string, number, literal,
//! key, or the end of an object for a missing field). The first element that has a token
//! ending at that position is the one that failed, and the token's path names the field:
//! `invalid argument 0 (to): invalid string length`, the way geth numbers arguments.

/// The message for a -32602 whose reason is `serde_msg`: the argument and field named when
/// the position traces back, else the reason itself (our own types, such as block
/// parameters, already say what is wrong and quote the value).
pub fn describe(params: Option<&str>, serde_msg: &str) -> String {
    let reason = split_position(serde_msg).map_or(serde_msg, |(reason, _, _)| reason);
    if reason == "No more params" {
        // jsonrpsee ran out of elements for a required argument: the next one is missing.
        let given = params
            .and_then(|p| serde_json::from_str::<Vec<serde::de::IgnoredAny>>(p).ok())
            .map_or(0, |elements| elements.len());
        return format!("missing value for required argument {given}");
    }
    if reason.starts_with("invalid argument ") {
        // A type that decodes through a `Value` (no positions) names its argument and field
        // itself; serde's position is then the end of that whole argument.
        return reason.to_string();
    }
    params
        .and_then(|p| name_param_error(p, serde_msg))
        .unwrap_or_else(|| format!("invalid params: {reason}"))
}

/// Rewrites serde's message (`reason at line L column C`) for `params` (the raw JSON array) into
/// one naming the argument and field, or `None` when the position cannot be traced.
pub fn name_param_error(params: &str, serde_msg: &str) -> Option<String> {
    let (reason, line, column) = split_position(serde_msg)?;
    let bytes = params.as_bytes();
    let mut scan = Scanner { s: bytes, i: 0 };
    scan.ws();
    if scan.peek()? != b'[' {
        // Named params (an object) are decoded as a whole: the position is absolute.
        let offset = offset_of(params, line, column)?;
        let path = Scanner { s: bytes, i: 0 }.value(&mut String::new(), offset, 0)??;
        return Some(format!(
            "invalid params ({}): {reason}",
            path.trim_start_matches('.')
        ));
    }
    relative_to_element(params, &mut scan, reason, line, column)
}

/// `Params::sequence` decodes one element at a time: the position is relative to the start of
/// the element that failed. (A method decoding the whole array at once with `Params::parse`
/// gets absolute positions; none of ours does, and guessing between the two would misname.)
fn relative_to_element(
    params: &str,
    scan: &mut Scanner<'_>,
    reason: &str,
    line: usize,
    column: usize,
) -> Option<String> {
    let mut index = 0usize;
    loop {
        // jsonrpsee decodes each element from just after the `[` or `,` before it.
        let start = scan.i + 1;
        scan.i = start;
        scan.ws();
        if scan.peek()? == b']' {
            return None;
        }
        let element_text = params.get(start..)?;
        let offset = offset_of(element_text, line, column)?;
        if let Some(path) = scan.value(&mut String::new(), start + offset, 0)? {
            let field = path.trim_start_matches('.');
            return Some(if field.is_empty() {
                format!("invalid argument {index}: {reason}")
            } else {
                format!("invalid argument {index} ({field}): {reason}")
            });
        }
        scan.ws();
        match scan.peek()? {
            b',' => index += 1,
            _ => return None,
        }
    }
}

/// `"reason at line 1 column 6"` -> `("reason", 1, 6)`.
fn split_position(msg: &str) -> Option<(&str, usize, usize)> {
    let at = msg.rfind(" at line ")?;
    let rest = &msg[at + " at line ".len()..];
    let (line, column) = rest.split_once(" column ")?;
    Some((
        &msg[..at],
        line.trim().parse().ok()?,
        column.trim().parse().ok()?,
    ))
}

/// Byte offset in `text` of serde's (1-based line, column); serde's column after a token is
/// the byte length of the line up to and including the token, i.e. the token's end.
fn offset_of(text: &str, line: usize, column: usize) -> Option<usize> {
    let line_start = if line <= 1 {
        0
    } else {
        text.match_indices('\n').nth(line - 2)?.0 + 1
    };
    Some(line_start + column)
}

/// How deep the walk goes (serde_json's own recursion limit): params nested deeper never
/// decoded far enough to point at a field, and walking them would use up the thread's stack.
const MAX_DEPTH: usize = 128;

/// A minimal JSON walker over already-valid JSON that finds the token (scalar, key or
/// container) ending at a byte offset, and the path of the value (or key) it belongs to. It
/// keeps only the path it is on, so its memory is that of the nesting, not of the params.
struct Scanner<'a> {
    s: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// Walks one value at the cursor (`depth` containers down): `Some(Some(path))` for the
    /// first token that ends at `target`, in the order tokens end; `Some(None)` when none in
    /// it does; `None` when the walk cannot go on (not JSON it knows, or too deep).
    fn value(&mut self, path: &mut String, target: usize, depth: usize) -> Option<Option<String>> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'{' => {
                self.i += 1;
                loop {
                    self.ws();
                    match self.peek()? {
                        b'}' => break,
                        b',' => {
                            self.i += 1;
                            continue;
                        }
                        b'"' => {}
                        _ => return None,
                    }
                    let key_start = self.i + 1;
                    self.string()?;
                    let key = std::str::from_utf8(self.s.get(key_start..self.i - 1)?).ok()?;
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    if self.i == target {
                        return Some(Some(path.clone()));
                    }
                    self.ws();
                    if self.peek()? != b':' {
                        return None;
                    }
                    self.i += 1;
                    if let Some(found) = self.value(path, target, depth + 1)? {
                        return Some(Some(found));
                    }
                    path.truncate(len);
                }
                self.i += 1;
            }
            b'[' => {
                self.i += 1;
                let mut n = 0usize;
                loop {
                    self.ws();
                    match self.peek()? {
                        b']' => break,
                        b',' => {
                            self.i += 1;
                            n += 1;
                            continue;
                        }
                        _ => {}
                    }
                    let len = path.len();
                    path.push_str(&format!("[{n}]"));
                    if let Some(found) = self.value(path, target, depth + 1)? {
                        return Some(Some(found));
                    }
                    path.truncate(len);
                }
                self.i += 1;
            }
            b'"' => self.string()?,
            _ => {
                while matches!(self.peek(), Some(c) if !matches!(c, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r'))
                {
                    self.i += 1;
                }
            }
        }
        Some((self.i == target).then(|| path.clone()))
    }

    /// Skips a string (cursor on its opening quote) and leaves the cursor after the closing one.
    fn string(&mut self) -> Option<()> {
        self.i += 1;
        loop {
            match self.peek()? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                _ => self.i += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::{
        primitives::{Address, B256},
        rpc::types::TransactionRequest,
    };
    use jsonrpsee::types::Params;

    /// Decodes `params` the way a method does (positional, in order) and names the error.
    fn named<A, B>(params: &str) -> String
    where
        A: serde::de::DeserializeOwned,
        B: serde::de::DeserializeOwned,
    {
        let p = Params::new(Some(params));
        let mut seq = p.sequence();
        let err = match seq.next::<A>() {
            Err(e) => e,
            Ok(_) => seq.next::<B>().err().expect("params should not decode"),
        };
        let data = err.data().map(|d| d.get().trim_matches('"').to_owned());
        let msg = data.expect("serde reason in data");
        name_param_error(params, &msg).unwrap_or_else(|| panic!("not traced: {msg}"))
    }

    #[test]
    fn names_a_short_address_in_the_first_argument() {
        let m = named::<Address, String>(r#"["0x12", "latest"]"#);
        assert!(m.starts_with("invalid argument 0: "), "{m}");
        assert!(!m.contains("column"), "{m}");
    }

    #[test]
    fn names_the_second_argument_even_when_the_first_is_longer() {
        let m = named::<Address, B256>(r#"["0x000000000000000000000000000000000000dEaD", "0x12"]"#);
        assert!(m.starts_with("invalid argument 1: "), "{m}");
    }

    #[test]
    fn names_the_field_of_a_call_object() {
        let m = named::<TransactionRequest, String>(
            r#"[{"from": "0x000000000000000000000000000000000000dEaD", "to": "0x1234"}, "latest"]"#,
        );
        assert!(m.starts_with("invalid argument 0 (to): "), "{m}");
        let m = named::<TransactionRequest, String>(
            "[\n  {\"gas\": \"0x1\",\n   \"value\": \"nope\"}\n]",
        );
        assert!(m.starts_with("invalid argument 0 (value): "), "{m}");
    }

    #[test]
    fn names_nested_paths_and_wrong_types() {
        let m = named::<Vec<TransactionRequest>, String>(r#"[[{}, {"nonce": true}]]"#);
        assert!(m.starts_with("invalid argument 0 ([1].nonce): "), "{m}");
        let m = named::<u64, u64>(r#"[1, "x"]"#);
        assert!(m.starts_with("invalid argument 1: invalid type"), "{m}");
    }

    #[test]
    fn untraceable_positions_give_none() {
        assert_eq!(name_param_error("[1]", "no position here"), None);
        assert_eq!(name_param_error("[1]", "bad at line 1 column 99"), None);
        assert_eq!(
            describe(Some("[1]"), "invalid block \"x\""),
            "invalid params: invalid block \"x\""
        );
        assert_eq!(
            describe(None, "bad at line 1 column 2"),
            "invalid params: bad"
        );
        assert_eq!(
            describe(
                Some("[{}]"),
                "invalid argument 0 (to): bad at line 1 column 2"
            ),
            "invalid argument 0 (to): bad"
        );
    }

    /// Params nested past serde's limit are not walked (a walk 15,000 deep overflowed the
    /// thread's stack and took the node down), and wide params cost the walk no more memory
    /// than their nesting (it once kept a copy of the path for every value).
    #[test]
    fn deep_or_wide_params_are_walked_within_bounds() {
        let deep = format!("[{}{}]", "[".repeat(20_000), "]".repeat(20_000));
        assert_eq!(name_param_error(&deep, "bad at line 1 column 20001"), None);
        let objects = format!("[{}{}]", r#"{"a":"#.repeat(20_000), "}".repeat(20_000));
        let end = 6 * 20_000;
        assert_eq!(
            name_param_error(&objects, &format!("bad at line 1 column {end}")),
            None
        );
        // Within the limit, a deep field is still named.
        let nested = format!("[{}1{}]", r#"{"a":"#.repeat(100), "}".repeat(100));
        let column = 5 * 100 + 1;
        let named = name_param_error(&nested, &format!("bad at line 1 column {column}"));
        let field = vec!["a"; 100].join(".");
        assert_eq!(named, Some(format!("invalid argument 0 ({field}): bad")));
        // 40,000-character key over 10,000 values: the walk keeps one path.
        let key = "k".repeat(40_000);
        let wide = format!(
            r#"[{{"to":{{"{key}":[{}]}}}}]"#,
            vec!["1"; 10_000].join(",")
        );
        let started = std::time::Instant::now();
        assert_eq!(name_param_error(&wide, "bad at line 1 column 3"), None);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    /// A required argument left out is named as geth names it.
    #[test]
    fn a_missing_argument_is_named() {
        assert_eq!(
            describe(Some(r#"["latest"]"#), "No more params"),
            "missing value for required argument 1"
        );
        assert_eq!(
            describe(None, "No more params"),
            "missing value for required argument 0"
        );
    }
}
