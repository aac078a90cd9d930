//! A count as clients write it: a JSON number (geth's `uint64` params, Otterscan's page and
//! block numbers) or a quantity string (hex, or decimal as alloy's quantities parse).

use alloy::primitives::U64;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        const WANT: &str = "a non-negative integer or a hex quantity";
        match Value::deserialize(deserializer)? {
            Value::Number(n) => n.as_u64().map(Self).ok_or_else(|| D::Error::custom(WANT)),
            Value::String(s) => serde_json::from_value::<U64>(Value::String(s))
                .map(|q| Self(q.to::<u64>()))
                .map_err(|_| D::Error::custom(WANT)),
            _ => Err(D::Error::custom(WANT)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_are_numbers_or_quantities() {
        let parse = |v: Value| serde_json::from_value::<Count>(v).map(|c| c.0);
        assert_eq!(parse(json!(1500)).unwrap(), 1500);
        assert_eq!(parse(json!("0x5dc")).unwrap(), 1500);
        assert_eq!(parse(json!(0)).unwrap(), 0);
        for bad in [
            json!(-1),
            json!(1.5),
            json!("soon"),
            json!(true),
            json!([1]),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
    }
}
