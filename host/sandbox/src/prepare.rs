//! From a checked manifest to a capability ready to run: audit the imports
//! against the grants (from the binary, before compiling), compile (or load
//! from the cache), link exactly the granted interfaces and the inert ones,
//! pre-instantiate.

use crate::audit::{self, SurfaceReport};
use crate::bindings::CapabilityPre;
use crate::engine::SharedEngine;
use crate::task::TaskState;
use hcp_contracts::manifest::{Grants, Manifest};
use std::sync::Arc;
use wasmtime::component::{Component, Linker};

/// Why a capability could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The component does not compile.
    #[error("{capability}: the component does not compile: {error:#}")]
    Compile {
        /// `name@version`.
        capability: String,
        /// wasmtime's error.
        error: wasmtime::Error,
    },
    /// A function past the bounds on code ([`crate::code_bounds`]):
    /// refused before it is compiled.
    #[error("{capability}: {error}")]
    CodeBounds {
        /// `name@version`.
        capability: String,
        /// The function and the bound.
        error: crate::code_bounds::CodeBoundsError,
    },
    /// The compile guard ([`crate::CompileGuard`]) refused it: over its
    /// limits, or it does not compile.
    #[error("{capability}: {reason}")]
    Guarded {
        /// `name@version`.
        capability: String,
        /// Why.
        reason: String,
    },
    /// Imports outside the grants.
    #[error("{}", refusal_message(.0))]
    Refused(Box<SurfaceReport>),
    /// A filesystem grant reaches one of the host's own directories.
    #[error(
        "{capability}: the grant of {grant} reaches the host's own directory {host_dir} (its \
         data directory, compiled-code cache or policies, which a guest must never see): grant \
         a directory apart from them"
    )]
    HostDirectory {
        /// `name@version`.
        capability: String,
        /// The granted host directory.
        grant: String,
        /// The host's directory it reaches.
        host_dir: String,
    },
    /// The component does not fit the world (missing or mistyped `run`).
    #[error(
        "{capability}: the component does not implement world hcp:capability/capability: {error:#}"
    )]
    Link {
        /// `name@version`.
        capability: String,
        /// wasmtime's error.
        error: wasmtime::Error,
    },
}

fn refusal_message(report: &SurfaceReport) -> String {
    let mut msg = format!(
        "{}@{}: refused: the component imports interfaces its manifest does not grant:",
        report.capability, report.version
    );
    for (name, reason) in report.refused() {
        msg.push_str(&format!("\n  {name}: {reason}"));
    }
    msg
}

/// Compiles the manifest's component (through the cache), after checking
/// its code against the bounds of [`crate::code_bounds`].
pub(crate) fn compile(
    engine: &SharedEngine,
    manifest: &Manifest,
) -> Result<Component, PrepareError> {
    guard(
        engine,
        &manifest.id(),
        &manifest.component.digest,
        &manifest.component.bytes,
    )?;
    Component::from_binary(&engine.engine, &manifest.component.bytes).map_err(|error| {
        PrepareError::Compile {
            capability: manifest.id(),
            error,
        }
    })
}

/// What comes before compiling `bytes` (of `capability`, whose digest is
/// `digest`) in this process: the bounds on code ([`crate::code_bounds`]),
/// then the engine's compile guard, once per component, which leaves the
/// compiled code in the cache.
pub(crate) fn guard(
    engine: &SharedEngine,
    capability: &str,
    digest: &str,
    bytes: &[u8],
) -> Result<(), PrepareError> {
    crate::code_bounds::check(bytes).map_err(|error| PrepareError::CodeBounds {
        capability: capability.to_owned(),
        error,
    })?;
    let Some(guard) = &engine.config.compile_guard else {
        return Ok(());
    };
    let done = |g: &std::sync::Mutex<std::collections::HashSet<String>>| {
        g.lock().unwrap_or_else(|e| e.into_inner()).contains(digest)
    };
    if done(&engine.guarded) {
        return Ok(());
    }
    guard
        .compile(capability, bytes)
        .map_err(|reason| PrepareError::Guarded {
            capability: capability.to_owned(),
            reason,
        })?;
    engine
        .guarded
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(digest.to_owned());
    Ok(())
}

/// Audits the manifest's component against its grants from its binary,
/// before anything is compiled (a refused component costs no compilation).
/// `None` when the binary cannot be read as a component: compiling it then
/// says why.
pub(crate) fn audit(manifest: &Manifest) -> Option<SurfaceReport> {
    let (imports, exports) = audit::imports_and_exports(&manifest.component.bytes).ok()?;
    Some(SurfaceReport::of(manifest, imports, exports))
}

/// Audits a compiled component: for a binary [`audit`] could not read but
/// wasmtime compiled.
pub(crate) fn audit_compiled(
    engine: &SharedEngine,
    manifest: &Manifest,
    component: &Component,
) -> SurfaceReport {
    let ty = component.component_type();
    let imports = ty
        .imports(&engine.engine)
        .map(|(n, _)| n.to_owned())
        .collect();
    let exports = ty
        .exports(&engine.engine)
        .map(|(n, _)| n.to_owned())
        .collect();
    SurfaceReport::of(manifest, imports, exports)
}

/// Links exactly the interfaces `grants` allow, plus `wasi:filesystem` and
/// `wasi:sockets` inert when not granted, nothing else: each sandbox unit
/// ([`crate::units::UNITS`]) adds its own. An import the audit let through
/// but the linker lacks fails `instantiate_pre`.
pub(crate) fn linker(
    engine: &SharedEngine,
    grants: &Grants,
) -> wasmtime::Result<Linker<TaskState>> {
    let mut l = Linker::<TaskState>::new(&engine.engine);
    for unit in crate::units::UNITS {
        (unit.link)(&mut l, engine, grants)?;
    }
    Ok(l)
}

/// How a prepared capability is instantiated for each task.
pub(crate) enum Instantiation {
    /// Imports resolved and type-checked once.
    Pre(CapabilityPre<TaskState>),
    /// `Linker::instantiate` for every task (the benchmark's baseline).
    Plain(Box<(Linker<TaskState>, Component)>),
}

/// Links a component, pre-instantiating it unless the engine is configured
/// for the plain baseline. Either way the `run` export is checked here.
pub(crate) fn instantiation(
    engine: &SharedEngine,
    manifest: &Arc<Manifest>,
    component: &Component,
) -> Result<Instantiation, PrepareError> {
    let link = |error| PrepareError::Link {
        capability: manifest.id(),
        error,
    };
    let linker = linker(engine, &manifest.grants).map_err(link)?;
    let pre = CapabilityPre::new(linker.instantiate_pre(component).map_err(link)?).map_err(link)?;
    Ok(if engine.config.pre_instantiate {
        Instantiation::Pre(pre)
    } else {
        Instantiation::Plain(Box::new((linker, component.clone())))
    })
}

impl Instantiation {
    pub(crate) async fn instantiate(
        &self,
        store: &mut wasmtime::Store<TaskState>,
    ) -> wasmtime::Result<crate::bindings::Capability> {
        match self {
            Self::Pre(pre) => pre.instantiate_async(store).await,
            Self::Plain(plain) => {
                let (linker, component) = &**plain;
                crate::bindings::Capability::instantiate_async(store, component, linker).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SandboxConfig;

    /// The imports and exports read from the binary, before compiling, are
    /// the ones wasmtime finds in the compiled component, in its order.
    #[test]
    fn the_binary_names_what_the_compiled_component_imports() {
        let engine = SharedEngine::new(SandboxConfig {
            cache_dir: Some(hcp_tests::cache_dir()),
            pooling: false,
            epoch_interruption: false,
            ..SandboxConfig::default()
        })
        .expect("engine");
        for path in [
            hcp_tests::PROBE,
            hcp_tests::TRIVIAL,
            hcp_tests::UNDECLARED_IMPORT,
            hcp_tests::NO_RUN_EXPORT,
            hcp_tests::SLEEPER,
            hcp_tests::DOCUMENT_ANALYSIS,
            hcp_tests::CVD_MATERIAL_SYNTHESIS,
            hcp_tests::HID_ASSISTANT,
        ] {
            let bytes = std::fs::read(path).expect("guest");
            let (imports, exports) = audit::imports_and_exports(&bytes).expect(path);
            let component = Component::from_binary(&engine.engine, &bytes).expect("compiles");
            let ty = component.component_type();
            let compiled: Vec<String> = ty
                .imports(&engine.engine)
                .map(|(n, _)| n.to_owned())
                .collect();
            assert_eq!(imports, compiled, "{path}");
            let compiled: Vec<String> = ty
                .exports(&engine.engine)
                .map(|(n, _)| n.to_owned())
                .collect();
            assert_eq!(exports, compiled, "{path}");
            assert!(!imports.is_empty(), "{path}");
        }
    }

    #[test]
    fn what_is_not_a_component_has_no_imports_to_read() {
        for bytes in [
            &b""[..],
            b"not wasm at all",
            // A core module.
            b"\0asm\x01\0\0\0",
            // A component cut short.
            b"\0asm\x0d\0\x01\0\x0a\x05",
        ] {
            assert!(audit::imports_and_exports(bytes).is_err(), "{bytes:?}");
        }
    }
}
