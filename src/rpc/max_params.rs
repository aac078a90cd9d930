//! Refusing positional params a method does not take (see [`simnode_api::MethodParams`]).
//!
//! Modules decode params with jsonrpsee, which reads as many elements as a method needs and
//! ignores the rest. Here, before the method runs, a params array longer than the method's
//! table entry is answered with geth's -32602 "too many arguments, want at most N". Named params
//! (an object) are refused with geth's "non-array args": jsonrpsee would match the names it
//! knows and ignore the rest, so a misspelled `block` would quietly read `latest`.

use std::collections::HashMap;

use anyhow::bail;
use jsonrpsee::{
    types::{error::INVALID_PARAMS_CODE, ErrorObjectOwned},
    Methods,
};
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use simnode_api::MethodParams;

/// The most positional params of each served method. Empty (the default) checks nothing.
#[derive(Debug, Clone, Default)]
pub struct MaxParams(HashMap<&'static str, usize>);

impl MaxParams {
    /// The modules' tables merged; a method in two tables is an error, as in the registry.
    pub fn from_tables(tables: &[MethodParams]) -> anyhow::Result<Self> {
        let mut map = HashMap::new();
        for table in tables {
            for &(method, max) in *table {
                if map.insert(method, max).is_some() {
                    bail!("{method} has two param-count entries");
                }
            }
        }
        Ok(Self(map))
    }

    /// Every served method has an entry and every entry a method: a module whose table was not
    /// updated with its methods stops the node at start-up rather than going unchecked.
    pub fn verify_covers(&self, methods: &Methods) -> anyhow::Result<()> {
        let mut missing: Vec<&str> = methods
            .method_names()
            .filter(|name| !self.0.contains_key(name))
            .collect();
        if !missing.is_empty() {
            missing.sort_unstable();
            bail!(
                "methods without a param count in their module's METHOD_PARAMS: {}",
                missing.join(", ")
            );
        }
        let mut stale: Vec<&str> = self
            .0
            .keys()
            .copied()
            .filter(|name| methods.method(name).is_none())
            .collect();
        if !stale.is_empty() {
            stale.sort_unstable();
            bail!(
                "param counts for methods that are not served: {}",
                stale.join(", ")
            );
        }
        Ok(())
    }

    /// `Err` with the -32602 to answer when `params` holds more elements than `method` takes.
    pub fn check(&self, method: &str, params: Option<&RawValue>) -> Result<(), ErrorObjectOwned> {
        let (Some(&max), Some(params)) = (self.0.get(method), params) else {
            return Ok(());
        };
        let text = params.get().trim_start();
        if !text.starts_with('[') {
            // A method that takes none would not look at a string, number or bool, and one
            // reading named params ignores the names it does not know: the client would never
            // learn what was dropped. geth's answer to all of them (it takes no named params).
            if text == "null" {
                return Ok(());
            }
            return Err(ErrorObjectOwned::owned(
                INVALID_PARAMS_CODE,
                "non-array args",
                None::<()>,
            ));
        }
        // Counting needs no decoding of the elements; a malformed array is the method's to report.
        match serde_json::from_str::<Vec<IgnoredAny>>(text) {
            Ok(elements) if elements.len() > max => Err(ErrorObjectOwned::owned(
                INVALID_PARAMS_CODE,
                format!("too many arguments, want at most {max}"),
                None::<()>,
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn params_that_are_not_an_array_are_refused() {
        let max = MaxParams::from_tables(&[&[("m_none", 0), ("m_one", 1)]]).unwrap();
        for method in ["m_none", "m_one"] {
            for params in [r#""x""#, "5", "true", " false", "{}", r#" {"blok": "0x0"}"#] {
                let err = max.check(method, Some(&raw(params))).unwrap_err();
                assert_eq!(err.code(), INVALID_PARAMS_CODE, "{method} {params}");
                assert_eq!(err.message(), "non-array args");
            }
            for params in ["[]", "null", " []"] {
                assert!(
                    max.check(method, Some(&raw(params))).is_ok(),
                    "{method} {params}"
                );
            }
        }
    }

    #[test]
    fn more_elements_than_the_method_takes_are_refused() {
        let max = MaxParams::from_tables(&[&[("m_two", 2), ("m_none", 0)]]).unwrap();
        assert!(max
            .check("m_two", Some(&raw(r#"[1, {"a": [2, 3]}]"#)))
            .is_ok());
        assert!(max.check("m_two", Some(&raw("[]"))).is_ok());
        assert!(max.check("m_two", None).is_ok());
        let err = max.check("m_two", Some(&raw("[1, 2, null]"))).unwrap_err();
        assert_eq!(err.code(), INVALID_PARAMS_CODE);
        assert_eq!(err.message(), "too many arguments, want at most 2");
        let err = max.check("m_none", Some(&raw("[1]"))).unwrap_err();
        assert_eq!(err.message(), "too many arguments, want at most 0");
        // Methods without an entry are not this check's business.
        assert!(max.check("other", Some(&raw("[1, 2, 3]"))).is_ok());
    }

    #[test]
    fn tables_must_match_the_served_methods() {
        let mut module = jsonrpsee::RpcModule::new(());
        module.register_method("m_a", |_, _, _| 1).unwrap();
        module.register_method("m_b", |_, _, _| 2).unwrap();
        let methods: Methods = module.into();
        let both = MaxParams::from_tables(&[&[("m_a", 1)], &[("m_b", 0)]]).unwrap();
        assert!(both.verify_covers(&methods).is_ok());
        let short = MaxParams::from_tables(&[&[("m_a", 1)]]).unwrap();
        let err = short.verify_covers(&methods).unwrap_err().to_string();
        assert!(err.contains("m_b"), "{err}");
        let stale = MaxParams::from_tables(&[&[("m_a", 1), ("m_b", 0), ("m_c", 3)]]).unwrap();
        let err = stale.verify_covers(&methods).unwrap_err().to_string();
        assert!(err.contains("m_c"), "{err}");
        assert!(MaxParams::from_tables(&[&[("m_a", 1)], &[("m_a", 2)]]).is_err());
    }
}
