//! simnode: an Ethereum execution node that imports, executes and stores blocks, and answers
//! JSON-RPC for simulation, tracing and receipts from its own database.
//!
//! Data flows one way: a block arrives ([`sync`]: RLP import, Engine API, dev miner), [`exec`]
//! runs and validates it, [`store`] commits it in one write transaction, and the RPC modules
//! read it through the `simnode-api` traits, served by [`rpc`].

pub mod chain;
pub mod cli;
pub mod exec;
pub mod node;
pub mod pending;
pub mod pool;
pub mod rpc;
pub mod store;
pub mod sync;
