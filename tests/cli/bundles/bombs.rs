//! Compile bombs: components cheap to write and costly to compile. A
//! 238 KB bundle with one function of 49,000 locals kept `hcp review` busy
//! past 240 s and `hcp surface` past 600 s, holding the capabilities' lock
//! so that an install waited. Each command here runs under a timeout and is
//! killed past it. (The function written here compiles in seconds: on the
//! code before the bounds the review passed it as installable, which is
//! how the test fails there; the shape that takes minutes was not
//! reproduced.)

use super::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest any command here may take.
const TIMEOUT: Duration = Duration::from_secs(20);

/// The `trivial` guest with a core module appended (defined, never
/// instantiated: the component still runs as `trivial`) whose one function
/// declares `locals` i32 locals and, in a loop, copies each into the next:
/// about 8 bytes of code per local, every local live around the loop.
fn with_slow_function(locals: u32) -> Vec<u8> {
    use wasm_encoder::{
        BlockType, CodeSection, Function, FunctionSection, Instruction, Module, ModuleSection,
        TypeSection, ValType,
    };
    let mut types = TypeSection::new();
    types.ty().function([], []);
    let mut functions = FunctionSection::new();
    functions.function(0);
    let mut f = Function::new([(locals, ValType::I32)]);
    f.instruction(&Instruction::Loop(BlockType::Empty));
    for i in 0..locals.saturating_sub(1) {
        f.instruction(&Instruction::LocalGet(i))
            .instruction(&Instruction::LocalSet(i + 1));
    }
    f.instruction(&Instruction::Br(0))
        .instruction(&Instruction::End)
        .instruction(&Instruction::End);
    let mut code = CodeSection::new();
    code.function(&f);
    let mut module = Module::new();
    module.section(&types).section(&functions).section(&code);
    let mut appended = wasm_encoder::Component::new();
    appended.section(&ModuleSection(&module));
    let appended = appended.finish();
    let mut component = std::fs::read(hcp_tests::TRIVIAL).expect("the trivial guest");
    // Both begin with the same 8 bytes: the magic and the component version.
    component.extend_from_slice(&appended[8..]);
    component
}

/// An unsigned bundle of `trivial` whose component is `component`.
fn bundle_of(lab: &Lab, name: &str, component: &[u8]) -> PathBuf {
    let dir = lab.plugin(name, |m| m);
    std::fs::write(dir.join("trivial.wasm"), component).expect("write");
    lab.pack(&dir, &format!("{name}.hcpb"))
}

/// `hcp args` with `env` set, killed past [`TIMEOUT`]: its output, or a
/// panic saying it hung.
fn within_timeout(lab: &Lab, env: &[(&str, &str)], args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(args)
        .env("HCP_DATA_DIR", lab.hcp.data.path())
        .env("HCP_CACHE_DIR", hcp_tests::cache_dir())
        .envs(env.iter().copied())
        .current_dir(REPO_ROOT)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run hcp");
    loop {
        if child.try_wait().expect("wait").is_some() {
            let out = child.wait_with_output().expect("output");
            return (out, started.elapsed());
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "hcp {args:?} was still running after {TIMEOUT:?} (killed)\nstdout:\n{}\nstderr:\n{}",
                stdout(&out),
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A component with a function of 49,000 locals (about 390 KB) is refused
/// by `hcp review`, `hcp surface` and `hcp install` before it is compiled,
/// in well under the timeout, each naming the bound; nothing is installed.
#[test]
fn a_function_of_49000_locals_is_refused_before_it_is_compiled() {
    let lab = Lab::new();
    let bomb = with_slow_function(49_000);
    let bundle = bundle_of(&lab, "bomb", &bomb);
    let bound = "function 0 of core module 3 declares 49000 locals, more than the 4096 this host \
                 compiles (a function of that many locals can keep the compiler busy for \
                 minutes): refused before compiling";
    // Which core module it is depends on the guest's own: find the index
    // the message names rather than assume it.
    let (out, took) = within_timeout(&lab, &[], &["review", s(&bundle)]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("FAIL  audit"))
        .unwrap_or_else(|| panic!("no failed audit:\n{text}"));
    let module = line
        .split("of core module ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{line}"));
    let expected = bound.replace("core module 3", &format!("core module {module}"));
    assert!(
        line.ends_with(&format!("trivial@1.0.0: {expected}")),
        "{line}"
    );
    assert!(took < Duration::from_secs(10), "review took {took:?}");

    let (out, took) = within_timeout(&lab, &[], &["surface", s(&bundle)]);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stderr(&out), format!("error: trivial@1.0.0: {expected}\n"));
    assert!(took < Duration::from_secs(10), "surface took {took:?}");

    let (out, took) = within_timeout(&lab, &[], &["install", "--allow-unsigned", s(&bundle)]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        lab.portable(&stderr(&out)),
        format!("error: <work>/bomb.hcpb: trivial@1.0.0: {expected}\nnothing was installed\n")
    );
    assert!(took < Duration::from_secs(10), "install took {took:?}");
    lab.nothing_half_installed(&[]);
}
