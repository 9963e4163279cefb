//! Host bindings of the `hcp:capability` world, generated from `wit/`.
//!
//! Imports are async (host calls may wait on I/O) and trappable: the outer
//! `wasmtime::Result` is a host fault, the inner WIT `result` is what the
//! guest sees.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "capability",
    imports: { default: async | trappable },
    exports: { default: async },
});
