//! The block parameter every method takes: a number (hex or decimal, string or JSON number),
//! a tag, a 32-byte block hash, or an EIP-1898 object.
//!
//! alloy's `BlockId` rejects decimal numbers, which the hosted service accepts, so the
//! parameter is parsed here, once, with messages that say what was wrong.

use alloy::primitives::B256;
use serde::{de, Deserialize, Deserializer};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockTag {
    Latest,
    Earliest,
    Pending,
    Safe,
    Finalized,
}

impl BlockTag {
    /// The tag as a request writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Latest => "latest",
            Self::Earliest => "earliest",
            Self::Pending => "pending",
            Self::Safe => "safe",
            Self::Finalized => "finalized",
        }
    }
}

impl std::fmt::Display for BlockTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockParam {
    Number(u64),
    Tag(BlockTag),
    Hash { hash: B256, require_canonical: bool },
}

impl Default for BlockParam {
    fn default() -> Self {
        Self::Tag(BlockTag::Latest)
    }
}

impl BlockParam {
    pub const LATEST: Self = Self::Tag(BlockTag::Latest);
    pub const PENDING: Self = Self::Tag(BlockTag::Pending);

    /// Parses a JSON value; the error message is meant for the user.
    pub fn from_value(value: &Value) -> Result<Self, String> {
        match value {
            Value::Number(n) => n.as_u64().map(Self::Number).ok_or_else(|| {
                format!("invalid block number {n}: must be a non-negative integer below 2^64")
            }),
            Value::String(s) => Self::parse_str(s),
            Value::Object(map) => {
                let hash = map.get("blockHash");
                let number = map.get("blockNumber");
                match (hash, number) {
                    (Some(_), Some(_)) => Err(
                        "invalid block parameter: blockHash and blockNumber are mutually exclusive"
                            .into(),
                    ),
                    (Some(Value::String(h)), None) => {
                        let hash = parse_hash(h)?;
                        let require_canonical = match map.get("requireCanonical") {
                            None | Some(Value::Null) => false,
                            Some(Value::Bool(b)) => *b,
                            Some(_) => {
                                return Err("invalid requireCanonical: must be a boolean".into())
                            }
                        };
                        Ok(Self::Hash {
                            hash,
                            require_canonical,
                        })
                    }
                    (Some(_), None) => {
                        Err("invalid blockHash: must be a 0x-prefixed 32-byte hex string".into())
                    }
                    (None, Some(n)) => match Self::from_value(n)? {
                        Self::Hash { .. } => {
                            Err("invalid blockNumber: expected a number or tag, got a hash".into())
                        }
                        other => Ok(other),
                    },
                    (None, None) => {
                        Err("invalid block parameter: object needs blockHash or blockNumber".into())
                    }
                }
            }
            Value::Null => Err("missing block parameter".into()),
            other => Err(format!(
                "invalid block parameter {other}: expected a number, tag or hash"
            )),
        }
    }

    fn parse_str(s: &str) -> Result<Self, String> {
        match s {
            "latest" => return Ok(Self::Tag(BlockTag::Latest)),
            "earliest" => return Ok(Self::Tag(BlockTag::Earliest)),
            "pending" => return Ok(Self::Tag(BlockTag::Pending)),
            "safe" => return Ok(Self::Tag(BlockTag::Safe)),
            "finalized" => return Ok(Self::Tag(BlockTag::Finalized)),
            _ => {}
        }
        if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            if hex.len() == 64 {
                return Ok(Self::Hash {
                    hash: parse_hash(s)?,
                    require_canonical: false,
                });
            }
            if hex.is_empty() {
                return Err(format!("invalid block number \"{s}\": empty hex string"));
            }
            if hex.len() > 16 {
                return Err(format!(
                    "invalid block number \"{s}\": hex number larger than 64 bits"
                ));
            }
            return u64::from_str_radix(hex, 16)
                .map(Self::Number)
                .map_err(|_| format!("invalid block number \"{s}\": not a hex number"));
        }
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            return s
                .parse::<u64>()
                .map(Self::Number)
                .map_err(|_| format!("invalid block number \"{s}\": larger than 64 bits"));
        }
        Err(format!(
            "invalid block parameter \"{s}\": expected a hex or decimal number, a block hash, or one of latest, earliest, pending, safe, finalized"
        ))
    }
}

fn parse_hash(s: &str) -> Result<B256, String> {
    let hex = s
        .strip_prefix("0x")
        .ok_or_else(|| format!("invalid block hash \"{s}\": missing 0x prefix"))?;
    if hex.len() != 64 {
        return Err(format!("invalid block hash \"{s}\": must be 32 bytes"));
    }
    s.parse::<B256>()
        .map_err(|_| format!("invalid block hash \"{s}\": not hex"))
}

impl<'de> Deserialize<'de> for BlockParam {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(&value).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_every_form() {
        let p = |v: Value| BlockParam::from_value(&v);
        assert_eq!(p(json!("0x10")), Ok(BlockParam::Number(16)));
        assert_eq!(p(json!("16")), Ok(BlockParam::Number(16)));
        assert_eq!(p(json!(16)), Ok(BlockParam::Number(16)));
        assert_eq!(p(json!("pending")), Ok(BlockParam::Tag(BlockTag::Pending)));
        let h = format!("0x{}", "ab".repeat(32));
        assert_eq!(
            p(json!(h)),
            Ok(BlockParam::Hash {
                hash: h.parse().unwrap(),
                require_canonical: false
            })
        );
        assert_eq!(
            p(json!({"blockHash": h, "requireCanonical": true})),
            Ok(BlockParam::Hash {
                hash: h.parse().unwrap(),
                require_canonical: true
            })
        );
        assert_eq!(p(json!({"blockNumber": "0x2"})), Ok(BlockParam::Number(2)));
        assert!(p(json!("0x1ffffffffffffffff"))
            .unwrap_err()
            .contains("64 bits"));
        assert!(p(json!("0xabc")).is_ok());
        assert!(p(json!(format!("0x{}", "ab".repeat(31)))).is_err());
        assert!(p(json!("lates")).unwrap_err().contains("latest"));
        assert!(p(json!(-1)).is_err());
        assert!(p(json!(null)).is_err());
    }
}
