//! Memory, table and instance limits of one task, enforced by wasmtime's
//! resource-limiter hook. Memory is bounded in total over all linear memories
//! of the component, and a refused growth is remembered so the trap it leads
//! to is reported as what it is.

use hcp_contracts::manifest::Limits;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;

/// Live guest resources one task may hold at once: every entry of its
/// resource table (open descriptors, sockets, streams, pollables, name
/// lookups, HTTP requests and responses). A task at the limit gets an error
/// (`new-socket-limit` for a socket) or, where the interface has none,
/// fails `execution_error` saying so; the host's own descriptors stay
/// bounded.
pub const MAX_TABLE_ENTRIES: usize = 512;

/// The resource table of one task, capped at [`MAX_TABLE_ENTRIES`].
pub(crate) fn task_table() -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(MAX_TABLE_ENTRIES);
    table
}

/// The limiter of one task's store.
#[derive(Debug)]
pub(crate) struct TaskLimiter {
    memory_limit: u64,
    memory_used: u64,
    table_elements: u64,
    instances: usize,
    /// A growth this limiter refused: (desired total bytes, limit).
    pub(crate) memory_refused: Option<u64>,
    pub(crate) table_refused: Option<u64>,
}

impl TaskLimiter {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            memory_limit: limits.memory_bytes,
            memory_used: 0,
            table_elements: limits.table_elements,
            instances: usize::try_from(limits.instances).unwrap_or(usize::MAX),
            memory_refused: None,
            table_refused: None,
        }
    }

    pub(crate) fn memory_limit(&self) -> u64 {
        self.memory_limit
    }
}

impl ResourceLimiter for TaskLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current) as u64;
        let total = self.memory_used.saturating_add(growth);
        if total > self.memory_limit {
            self.memory_refused = Some(total);
            return Ok(false);
        }
        self.memory_used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.table_elements {
            self.table_refused = Some(desired as u64);
            return Ok(false);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        self.instances.saturating_mul(4)
    }

    fn memories(&self) -> usize {
        self.instances
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_bounded_in_total() {
        let mut l = TaskLimiter::new(&Limits {
            memory_bytes: 100,
            ..Limits::DEFAULT
        });
        assert!(l.memory_growing(0, 60, None).expect("ok"));
        assert!(l.memory_growing(0, 30, None).expect("ok"));
        assert!(!l.memory_growing(30, 41, None).expect("ok"));
        assert_eq!(l.memory_refused, Some(101));
        assert!(l.memory_growing(30, 40, None).expect("ok"));
    }

    /// A core module with a GC array type whose `alloc` export allocates an
    /// array of that many bytes and keeps it in a global.
    fn gc_module() -> Vec<u8> {
        use wasm_encoder::{
            CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection,
            GlobalSection, GlobalType, HeapType, Instruction, Module, RefType, StorageType,
            TypeSection, ValType,
        };
        let bytes = HeapType::Concrete(0);
        let mut types = TypeSection::new();
        types.ty().array(&StorageType::I8, true);
        types.ty().function([ValType::I32], []);
        let mut functions = FunctionSection::new();
        functions.function(1);
        let mut globals = GlobalSection::new();
        globals.global(
            GlobalType {
                val_type: ValType::Ref(RefType {
                    nullable: true,
                    heap_type: bytes,
                }),
                mutable: true,
                shared: false,
            },
            &ConstExpr::ref_null(bytes),
        );
        let mut exports = ExportSection::new();
        exports.export("alloc", ExportKind::Func, 0);
        let mut alloc = Function::new([]);
        alloc
            .instruction(&Instruction::LocalGet(0))
            .instruction(&Instruction::ArrayNewDefault(0))
            .instruction(&Instruction::GlobalSet(0))
            .instruction(&Instruction::End);
        let mut code = CodeSection::new();
        code.function(&alloc);
        let mut module = Module::new();
        module
            .section(&types)
            .section(&functions)
            .section(&globals)
            .section(&exports)
            .section(&code);
        module.finish()
    }

    /// The engine accepts the GC proposal (wasmtime's `gc` feature), and a
    /// GC heap is memory like any other: the task's budget covers it.
    #[test]
    fn a_gc_heap_counts_against_the_memory_budget() {
        let shared =
            crate::engine::SharedEngine::new(crate::SandboxConfig::default()).expect("engine");
        let module =
            wasmtime::Module::new(&shared.engine, gc_module()).expect("a GC module compiles");
        let budget = 16u64 << 20;
        let run = |len: i32| {
            let mut store = wasmtime::Store::new(
                &shared.engine,
                TaskLimiter::new(&Limits {
                    memory_bytes: budget,
                    ..Limits::DEFAULT
                }),
            );
            store.limiter(|l| l);
            store.set_epoch_deadline(1_000);
            let instance = wasmtime::Instance::new(&mut store, &module, &[]).expect("instantiate");
            let alloc = instance
                .get_typed_func::<i32, ()>(&mut store, "alloc")
                .expect("alloc");
            let out = alloc.call(&mut store, len);
            (out, store.into_data().memory_refused)
        };
        let (out, refused) = run(1 << 20);
        assert!(out.is_ok(), "1 MiB within a 16 MiB budget: {out:?}");
        assert_eq!(refused, None);
        let (out, refused) = run(64 << 20);
        assert!(out.is_err(), "64 MiB past a 16 MiB budget was allocated");
        let refused = refused.expect("the limiter refused the GC heap's growth");
        assert!(refused > budget, "{refused}");
    }

    /// A core module with a shared linear memory (the threads proposal)
    /// whose `grow` export grows it by that many pages.
    fn shared_memory_module() -> Vec<u8> {
        use wasm_encoder::{
            CodeSection, ExportKind, ExportSection, Function, FunctionSection, Instruction,
            MemorySection, MemoryType, Module, TypeSection, ValType,
        };
        let mut types = TypeSection::new();
        types.ty().function([ValType::I32], [ValType::I32]);
        let mut functions = FunctionSection::new();
        functions.function(0);
        let mut memories = MemorySection::new();
        memories.memory(MemoryType {
            minimum: 1,
            maximum: Some(65_536),
            memory64: false,
            shared: true,
            page_size_log2: None,
        });
        let mut exports = ExportSection::new();
        exports.export("grow", ExportKind::Func, 0);
        let mut grow = Function::new([]);
        grow.instruction(&Instruction::LocalGet(0))
            .instruction(&Instruction::MemoryGrow(0))
            .instruction(&Instruction::End);
        let mut code = CodeSection::new();
        code.function(&grow);
        let mut module = Module::new();
        module
            .section(&types)
            .section(&functions)
            .section(&memories)
            .section(&exports)
            .section(&code);
        module.finish()
    }

    /// wasmtime grows a shared memory without asking the store's limiter
    /// (`SharedMemory::grow` passes none), so a shared memory would escape
    /// the task's memory budget. The engine refuses one when it is
    /// instantiated, with the pooling allocator (the host's) and without
    /// it: an error, not a panic, and no memory.
    #[test]
    fn a_shared_memory_is_refused_since_no_budget_would_bound_it() {
        for pooling in [true, false] {
            let shared = crate::engine::SharedEngine::new(crate::SandboxConfig {
                pooling,
                epoch_interruption: false,
                ..crate::SandboxConfig::default()
            })
            .expect("engine");
            let mut store = wasmtime::Store::new(
                &shared.engine,
                TaskLimiter::new(&Limits {
                    memory_bytes: 16 << 20,
                    ..Limits::DEFAULT
                }),
            );
            store.limiter(|l| l);
            let instance = wasmtime::Module::new(&shared.engine, shared_memory_module())
                .and_then(|module| wasmtime::Instance::new(&mut store, &module, &[]));
            let Err(e) = instance else {
                panic!("pooling {pooling}: a module with a shared memory was instantiated");
            };
            assert!(
                format!("{e:#}").contains("shared"),
                "pooling {pooling}: refused for another reason: {e:#}"
            );
        }
    }
}
