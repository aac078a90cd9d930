//! The module registry: every RPC module's methods merged into one set for the server.

use jsonrpsee::Methods;
use simnode_api::ModuleContext;

/// All methods simnode serves. Registering a module is one `merge` here.
pub fn all_modules(_ctx: &ModuleContext) -> anyhow::Result<Methods> {
    let methods = Methods::new();
    Ok(methods)
}
