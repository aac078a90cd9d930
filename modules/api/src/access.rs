//! Whether the caller of a subscription may still be sent its data. A subscription pushes
//! without being asked, past the front door's per-request checks, so the front door leaves one
//! of these in each WebSocket connection's extensions (an API key's revocation turns it off)
//! and a module asks it before each push.

use std::sync::Arc;

/// The front door's say on a connection's pushes; in-process callers (tests) have none and
/// are always allowed.
#[derive(Clone)]
pub struct CallerAccess(Arc<dyn Fn() -> bool + Send + Sync>);

impl CallerAccess {
    pub fn new(allowed: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(allowed))
    }

    /// The access of the connection a call came on.
    pub fn of(extensions: &jsonrpsee::Extensions) -> Self {
        extensions
            .get::<Self>()
            .cloned()
            .unwrap_or_else(|| Self::new(|| true))
    }

    pub fn allowed(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for CallerAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CallerAccess")
            .field(&self.allowed())
            .finish()
    }
}
