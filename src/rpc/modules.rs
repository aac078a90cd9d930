//! The module registry: every RPC module's methods merged into one set for the server.

use anyhow::Context as _;
use jsonrpsee::Methods;
use simnode_api::{MethodParams, ModuleContext};

/// The param-count tables of the modules [`all_modules`] registers, in the same order.
pub const MODULE_METHOD_PARAMS: &[MethodParams] = &[
    simnode_eth::METHOD_PARAMS,
    simnode_simulate::METHOD_PARAMS,
    simnode_receipts::METHOD_PARAMS,
    simnode_trace::METHOD_PARAMS,
    simnode_debug::METHOD_PARAMS,
    simnode_txpool::METHOD_PARAMS,
    simnode_otterscan::METHOD_PARAMS,
];

/// All methods simnode serves. Registering a module is one `merge` here and its table in
/// [`MODULE_METHOD_PARAMS`]; a name served twice is a start-up error rather than one module
/// silently shadowing another.
pub fn all_modules(ctx: &ModuleContext) -> anyhow::Result<Methods> {
    let mut methods = Methods::new();
    methods
        .merge(simnode_eth::rpc_module(ctx.clone()))
        .context("registering the eth module")?;
    methods
        .merge(simnode_simulate::rpc_module(ctx.clone()))
        .context("registering the simulate module")?;
    methods
        .merge(simnode_receipts::rpc_module(ctx.clone()))
        .context("registering the receipts module")?;
    methods
        .merge(simnode_trace::rpc_module(ctx.clone()))
        .context("registering the trace module")?;
    methods
        .merge(simnode_debug::rpc_module(ctx.clone()))
        .context("registering the debug module")?;
    methods
        .merge(simnode_txpool::rpc_module(ctx.clone()))
        .context("registering the txpool module")?;
    methods
        .merge(simnode_otterscan::rpc_module(ctx.clone()))
        .context("registering the otterscan module")?;
    Ok(methods)
}
