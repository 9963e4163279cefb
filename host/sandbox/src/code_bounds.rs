//! Bounds on a component's code, checked from its binary before anything
//! is compiled.
//!
//! The compiler's time grows much faster than the size of what it
//! compiles for some shapes of code: one function of 49,000 locals in a
//! 238 KB bundle kept `hcp review` compiling for minutes. Every function
//! body of every core module the component holds (nested ones included)
//! is read here, without compiling or validating it, and a function over
//! [`MAX_FUNCTION_LOCALS`] locals or [`MAX_FUNCTION_BYTES`] bytes refuses
//! the component, naming the bound. The bounds are far above what the
//! example plugins and test guests hold (at most 38 locals and 46 KB in
//! one function; componentize-py's Python runtime was not measured); they
//! bound the shapes that are cheap to write and costly to compile, not the
//! whole cost of compiling (a child process under CPU and memory limits
//! does that, where the host compiles untrusted components).

use wasmparser::{Parser, Payload};

/// Most locals one function may declare (its parameters not counted).
pub const MAX_FUNCTION_LOCALS: u64 = 4_096;

/// Largest body of one function, in bytes.
pub const MAX_FUNCTION_BYTES: usize = 2 << 20;

/// A function past a bound: the component is refused before it is
/// compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeBoundsError {
    /// Too many locals.
    #[error(
        "function {function} of core module {module} declares {locals} locals, more than the \
         {MAX_FUNCTION_LOCALS} this host compiles (a function of that many locals can keep the \
         compiler busy for minutes): refused before compiling"
    )]
    Locals {
        /// Index of the core module in the component, in binary order.
        module: usize,
        /// Index of the function among the module's bodies.
        function: usize,
        /// Locals it declares (at least; counting stops past the bound).
        locals: u64,
    },
    /// Too large a body.
    #[error(
        "function {function} of core module {module} is {bytes} bytes long, more than the \
         {MAX_FUNCTION_BYTES} this host compiles: refused before compiling"
    )]
    Size {
        /// Index of the core module in the component, in binary order.
        module: usize,
        /// Index of the function among the module's bodies.
        function: usize,
        /// Its size.
        bytes: usize,
    },
}

/// Checks every function body of `bytes` (a component or a core module)
/// against [`MAX_FUNCTION_LOCALS`] and [`MAX_FUNCTION_BYTES`]. Reads the
/// code sections only (each body's size and its local declarations), in
/// one pass: milliseconds for tens of megabytes.
///
/// Bytes that do not parse pass: compiling them fails and says why.
///
/// # Errors
///
/// The first function past a bound.
pub fn check(bytes: &[u8]) -> Result<(), CodeBoundsError> {
    // The core module being read, and the index of the next body in it.
    let mut module = None::<usize>;
    let mut modules = 0usize;
    let mut function = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else {
            return Ok(());
        };
        match payload {
            Payload::Version {
                encoding: wasmparser::Encoding::Module,
                ..
            } => {
                module = Some(modules);
                modules += 1;
                function = 0;
            }
            Payload::CodeSectionEntry(body) => {
                let module = module.unwrap_or(0);
                let size = body.range().len();
                if size > MAX_FUNCTION_BYTES {
                    return Err(CodeBoundsError::Size {
                        module,
                        function,
                        bytes: size,
                    });
                }
                let Ok(reader) = body.get_locals_reader() else {
                    return Ok(());
                };
                let mut locals = 0u64;
                for declaration in reader {
                    let Ok((count, _)) = declaration else {
                        return Ok(());
                    };
                    locals = locals.saturating_add(u64::from(count));
                    if locals > MAX_FUNCTION_LOCALS {
                        return Err(CodeBoundsError::Locals {
                            module,
                            function,
                            locals,
                        });
                    }
                }
                function += 1;
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_encoder::{
        CodeSection, Function, FunctionSection, Instruction, Module, TypeSection, ValType,
    };

    /// A core module of one function declaring `locals` i32 locals in
    /// `declarations` declarations, its body `filler` `nop`s long.
    fn module(locals: u32, declarations: u32, filler: usize) -> Vec<u8> {
        let mut types = TypeSection::new();
        types.ty().function([], []);
        let mut functions = FunctionSection::new();
        functions.function(0);
        let per = locals / declarations;
        let mut decls: Vec<(u32, ValType)> =
            (0..declarations).map(|_| (per, ValType::I32)).collect();
        if let Some(last) = decls.last_mut() {
            last.0 += locals - per * declarations;
        }
        let mut f = Function::new(decls);
        for _ in 0..filler {
            f.instruction(&Instruction::Nop);
        }
        f.instruction(&Instruction::End);
        let mut code = CodeSection::new();
        code.function(&f);
        let mut m = Module::new();
        m.section(&types).section(&functions).section(&code);
        m.finish()
    }

    #[test]
    fn functions_within_the_bounds_pass() {
        assert_eq!(check(&module(MAX_FUNCTION_LOCALS as u32, 3, 10)), Ok(()));
        assert_eq!(check(&module(0, 1, MAX_FUNCTION_BYTES - 16)), Ok(()));
    }

    #[test]
    fn a_function_of_49000_locals_is_refused_naming_the_bound() {
        let e = check(&module(49_000, 1, 0)).expect_err("passed");
        assert_eq!(
            e,
            CodeBoundsError::Locals {
                module: 0,
                function: 0,
                locals: 49_000
            }
        );
        assert!(
            e.to_string()
                .contains("more than the 4096 this host compiles"),
            "{e}"
        );
        // However the locals are declared.
        assert!(matches!(
            check(&module(49_000, 49_000, 0)),
            Err(CodeBoundsError::Locals { .. })
        ));
    }

    #[test]
    fn a_function_past_the_size_bound_is_refused() {
        let e = check(&module(0, 1, MAX_FUNCTION_BYTES + 1)).expect_err("passed");
        assert!(
            matches!(
                e,
                CodeBoundsError::Size {
                    module: 0,
                    function: 0,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn what_does_not_parse_is_left_to_the_compiler() {
        for bytes in [&b""[..], b"not wasm", b"\0asm\x01\0\0\0\x0a\xff"] {
            assert_eq!(check(bytes), Ok(()));
        }
    }
}
