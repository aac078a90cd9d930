//! Which methods each network serves.
//!
//! The table follows the hosted service simnode imitates: methods not listed are served on every
//! network; a listed method is served only on the networks named for it, and elsewhere answers
//! -32601 with a message naming the network (so a client can tell "not here" from "no such
//! method"). `--rpc.allow-method` and `--rpc.deny-method` override the table for one run.

use std::collections::BTreeSet;

use super::error::FrontDoorError;

/// (method, networks that serve it). `dev` and `custom` (a genesis.json) exist for testing, so
/// they serve everything.
const RESTRICTED: &[(&str, &[&str])] =
    &[("eth_simulateV1", &["mainnet", "sepolia", "dev", "custom"])];

#[derive(Debug, Clone)]
pub struct MethodPolicy {
    network: String,
    denied: BTreeSet<String>,
}

impl MethodPolicy {
    /// The policy of `network` (a `ChainSpec::name`: dev, mainnet, sepolia, hoodi, custom).
    pub fn for_network(network: &str, allow: &[String], deny: &[String]) -> Self {
        let mut denied: BTreeSet<String> = RESTRICTED
            .iter()
            .filter(|(_, served_on)| !served_on.contains(&network))
            .map(|(method, _)| method.to_string())
            .collect();
        for method in allow {
            denied.remove(method);
        }
        denied.extend(deny.iter().cloned());
        Self {
            network: network.to_string(),
            denied,
        }
    }

    pub fn check(&self, method: &str) -> Result<(), FrontDoorError> {
        if self.denied.contains(method) {
            return Err(FrontDoorError::MethodNotAvailable {
                method: method.to_string(),
                network: self.network.clone(),
            });
        }
        Ok(())
    }

    pub fn denied(&self) -> impl Iterator<Item = &str> {
        self.denied.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulate_is_served_on_mainnet_sepolia_dev_custom_only() {
        for network in ["mainnet", "sepolia", "dev", "custom"] {
            assert!(
                MethodPolicy::for_network(network, &[], &[])
                    .check("eth_simulateV1")
                    .is_ok(),
                "{network}"
            );
        }
        let err = MethodPolicy::for_network("hoodi", &[], &[])
            .check("eth_simulateV1")
            .unwrap_err();
        assert_eq!(err.code(), -32601);
        assert_eq!(
            err.to_string(),
            "the method eth_simulateV1 is not available on hoodi"
        );
        assert!(MethodPolicy::for_network("hoodi", &[], &[])
            .check("eth_call")
            .is_ok());
    }

    #[test]
    fn flags_override_the_table() {
        let allow = vec!["eth_simulateV1".to_string()];
        assert!(MethodPolicy::for_network("hoodi", &allow, &[])
            .check("eth_simulateV1")
            .is_ok());
        let deny = vec!["trace_callMany".to_string()];
        assert!(MethodPolicy::for_network("mainnet", &[], &deny)
            .check("trace_callMany")
            .is_err());
    }
}
