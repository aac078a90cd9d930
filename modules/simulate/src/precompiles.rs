//! The precompiles of a simulated block: alloy-evm's map (which supports overriding and moving
//! precompiles) with the warm set of the fork, as geth has it. A precompile moved elsewhere
//! is cold at its new address, and an address whose precompile was overridden stays warm.

use alloy_evm::precompiles::PrecompilesMap;
use revm::primitives::{Address, AddressSet};
use revm::{
    context::{Cfg, ContextTr},
    handler::PrecompileProvider,
    interpreter::{CallInputs, InterpreterResult},
};

pub struct SimPrecompiles {
    pub map: PrecompilesMap,
    warm: AddressSet,
}

impl SimPrecompiles {
    pub fn new(map: PrecompilesMap, warm: AddressSet) -> Self {
        Self { map, warm }
    }
}

impl<CTX> PrecompileProvider<CTX> for SimPrecompiles
where
    CTX: ContextTr,
    PrecompilesMap: PrecompileProvider<CTX, Output = InterpreterResult>,
{
    type Output = InterpreterResult;

    fn set_spec(&mut self, spec: <CTX::Cfg as Cfg>::Spec) -> bool {
        <PrecompilesMap as PrecompileProvider<CTX>>::set_spec(&mut self.map, spec)
    }

    fn run(
        &mut self,
        context: &mut CTX,
        inputs: &CallInputs,
    ) -> Result<Option<Self::Output>, String> {
        <PrecompilesMap as PrecompileProvider<CTX>>::run(&mut self.map, context, inputs)
    }

    fn warm_addresses(&self) -> &AddressSet {
        &self.warm
    }

    fn contains(&self, address: &Address) -> bool {
        <PrecompilesMap as PrecompileProvider<CTX>>::contains(&self.map, address)
    }
}
