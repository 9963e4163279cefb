//! `wasi:filesystem` behind the PEP: a view that implements the p2 host
//! traits, asks the PEP before every operation that resolves a path
//! (`open-at` and the other `*-at` functions), and delegates everything to
//! wasmtime-wasi's stock view. Linked in place of the stock interface, so
//! no path is resolved unasked.
//!
//! The PEP decides on the guest path a call resolves: the guest path of
//! the descriptor it starts from (a preopen's, or the path it was opened
//! at, tracked here) joined with the call's relative path, `.` and `..`
//! resolved lexically. cap-std still confines every operation to its
//! granted directory (symbolic links included); the PEP's decision comes
//! first.
//!
//! Bytes written into files (`write`, the output streams of a file,
//! `set-size` growth) pass the PEP as `fs.write` against the byte budget
//! (see [`crate::fs_write`]), and so does each file, directory or link a
//! task makes, as one block ([`ENTRY_BYTES`]).

mod listing;

use crate::fs_write::{MeteredStream, WriteMeter};
use crate::pep::{Call, FsAccess, Op};
use crate::units::context::HcpCtx;
use listing::{Listing, listing};
use std::collections::HashMap;
use std::sync::Arc;
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    Descriptor, DescriptorFlags, ErrorCode, HostDescriptor, HostDirectoryEntryStream, OpenFlags,
    PathFlags,
};
use wasmtime_wasi::p2::bindings::filesystem::{preopens, types};
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream};

/// What making a file, directory or link costs of the write budget: a
/// filesystem block.
const ENTRY_BYTES: u64 = 4096;

/// The guest path of every open directory or file descriptor, by resource.
#[derive(Debug, Default)]
pub(crate) struct FsPaths {
    paths: HashMap<u32, Arc<str>>,
}

/// The guest path `path` resolves to from `base`, lexically.
pub(crate) fn resolve(base: &str, path: &str) -> String {
    let mut parts: Vec<&str> = if path.starts_with('/') {
        Vec::new()
    } else {
        base.split('/').filter(|c| !c.is_empty()).collect()
    };
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The governed view of one call.
pub(crate) struct GovernedFs<'a> {
    pub(crate) inner: WasiFilesystemCtxView<'a>,
    pub(crate) paths: &'a mut FsPaths,
    pub(crate) hcp: &'a mut HcpCtx,
    pub(crate) writes: &'a Arc<WriteMeter>,
}

pub(crate) struct GovernedFsData;

impl HasData for GovernedFsData {
    type Data<'a> = GovernedFs<'a>;
}

impl GovernedFs<'_> {
    fn path_of(&self, fd: &Resource<Descriptor>, path: &str) -> String {
        match self.paths.paths.get(&fd.rep()) {
            Some(base) => resolve(base, path),
            // Not a descriptor this view handed out: no guest path, no grant.
            None => format!("?/{path}"),
        }
    }

    /// Asks the PEP; a denial becomes `access` for the guest.
    fn govern(
        &mut self,
        op: Op,
        fd: &Resource<Descriptor>,
        path: &str,
        access: FsAccess,
        to: Option<String>,
    ) -> FsResult<()> {
        let target = self.path_of(fd, path);
        let call = Call::fs(op, target, access, to);
        match self.hcp.pep.check(&call) {
            Ok(signals) => {
                self.hcp.note_signals(op, signals);
                Ok(())
            }
            Err(denial) => {
                self.hcp.note_denial(&denial);
                Err(ErrorCode::Access.into())
            }
        }
    }
}

impl GovernedFs<'_> {
    /// Admits a new entry (a file, directory or link) at `path` from `fd`:
    /// it costs [`ENTRY_BYTES`] of the write budget, as a block written
    /// would. An empty file or directory was free (its path's bytes aside):
    /// a task could make millions of inodes under any budget. Over budget,
    /// the guest sees `quota`.
    fn charge_entry(&mut self, fd: &Resource<Descriptor>, path: &str) -> FsResult<()> {
        let target = self.path_of(fd, path);
        self.writes
            .charge(&target, ENTRY_BYTES)
            .map_err(|_| ErrorCode::Quota.into())
    }

    /// Admits `bytes` about to be written through `fd`; over budget, the
    /// guest sees `quota`.
    fn charge_write(&mut self, fd: &Resource<Descriptor>, bytes: u64) -> FsResult<()> {
        let target = self.path_of(fd, "");
        self.writes
            .charge(&target, bytes)
            .map_err(|_| ErrorCode::Quota.into())
    }

    /// The size of the file `fd` is open on, now (0 for a directory, or
    /// when it cannot be read: a write then pays for its own bytes only).
    fn file_size(&mut self, fd: &Resource<Descriptor>) -> u64 {
        match self.inner.table.get(fd) {
            Ok(wasmtime_wasi::filesystem::Descriptor::File(f)) => {
                f.file.metadata().map_or(0, |m| m.len())
            }
            _ => 0,
        }
    }

    /// Replaces the output stream `stream` of `fd` by one that passes the
    /// meter before each write.
    fn metered(
        &mut self,
        fd: &Resource<Descriptor>,
        stream: Resource<DynOutputStream>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let target = self.path_of(fd, "");
        let inner = self.inner.table.delete(stream)?;
        let wrapped: DynOutputStream =
            Box::new(MeteredStream::wrap(inner, self.writes.clone(), target));
        Ok(self.inner.table.push(wrapped)?)
    }
}

impl GovernedFs<'_> {
    /// Refuses to open what is neither a file, a directory nor a link to
    /// one: a FIFO, a socket or a device node, which another process may
    /// have made in a granted directory (a guest cannot make one). Opening
    /// a FIFO waits for its other end: the task, and the host thread that
    /// opens it, would wait for good, past the task's deadline.
    ///
    /// What `path` names cannot be known unless it is looked at first; a
    /// process that swaps a file for a FIFO between the two gets past this
    /// check, and the task then ends at its deadline all the same (the
    /// host's runtime does not wait for the thread left opening it).
    ///
    /// Whether something is there (an open that creates makes an entry
    /// only where nothing is).
    ///
    /// The look is a `stat` on this thread, confined to the descriptor's
    /// directory as wasmtime-wasi's `stat-at` is (cap-primitives, the same
    /// resolution of `..` and links), not one handed to the blocking pool:
    /// it never waits on what it looks at (a FIFO is not opened), and each
    /// hand-off to the pool and back cost the task more than the `stat`
    /// itself (about a fifth of what enforcement added to a task that
    /// opens files; docs/benchmarks.md, "Thirteenth round").
    fn look_before_open(
        &mut self,
        fd: &Resource<Descriptor>,
        path_flags: PathFlags,
        path: &str,
        target: &str,
    ) -> FsResult<bool> {
        use cap_primitives::fs::{FileTypeExt, FollowSymlinks};
        let Ok(wasmtime_wasi::filesystem::Descriptor::Dir(dir)) = self.inner.table.get(fd) else {
            // Not a directory: the open itself reports it.
            return Ok(false);
        };
        let follow = if path_flags.contains(PathFlags::SYMLINK_FOLLOW) {
            FollowSymlinks::Yes
        } else {
            FollowSymlinks::No
        };
        let kind = match cap_primitives::fs::stat(&dir.dir, std::path::Path::new(path), follow) {
            Ok(stat) => stat.file_type(),
            // Nothing there yet (to be created), or an error the open
            // itself reports.
            Err(_) => return Ok(false),
        };
        let kind = if kind.is_file() || kind.is_dir() || kind.is_symlink() {
            return Ok(true);
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else {
            "a FIFO, a socket or a device"
        };
        self.hcp.log.host_note(&format!(
            "refused to open {}: it is {kind}; only files and directories may be opened",
            crate::tasklog::escape_controls(target)
        ));
        self.hcp.risk_events.push("special_file".to_owned());
        Err(ErrorCode::Unsupported.into())
    }
}

impl preopens::Host for GovernedFs<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let dirs = preopens::Host::get_directories(&mut self.inner)?;
        for (fd, path) in &dirs {
            self.paths
                .paths
                .insert(fd.rep(), Arc::from(resolve("/", path)));
        }
        Ok(dirs)
    }
}

impl types::Host for GovernedFs<'_> {
    fn convert_error_code(
        &mut self,
        err: wasmtime_wasi::p2::FsError,
    ) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.inner, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        let error = self.inner.table.get(&err)?;
        if error
            .downcast_ref::<crate::fs_write::OverBudget>()
            .is_some()
        {
            return Ok(Some(ErrorCode::Quota));
        }
        types::Host::filesystem_error_code(&mut self.inner, err)
    }
}

impl HostDirectoryEntryStream for GovernedFs<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        self.inner.table.get_mut(&listing(&stream))?.next()
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        self.inner
            .table
            .delete(Resource::<Listing>::new_own(stream.rep()))?;
        Ok(())
    }
}

fn writes(oflags: OpenFlags, flags: DescriptorFlags) -> bool {
    oflags.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::EXCLUSIVE)
        || flags.intersects(DescriptorFlags::WRITE | DescriptorFlags::MUTATE_DIRECTORY)
}

impl HostDescriptor for GovernedFs<'_> {
    async fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        oflags: OpenFlags,
        flags: DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let access = if writes(oflags, flags) {
            FsAccess::Write
        } else {
            FsAccess::Read
        };
        self.govern(Op::FsOpen, &fd, &path, access, None)?;
        let target = self.path_of(&fd, &path);
        let exists = self.look_before_open(&fd, path_flags, &path, &target)?;
        if !exists && oflags.contains(OpenFlags::CREATE) {
            self.charge_entry(&fd, &path)?;
        }
        let opened = self
            .inner
            .open_at(fd, path_flags, path, oflags, flags)
            .await?;
        self.paths.paths.insert(opened.rep(), Arc::from(target));
        Ok(opened)
    }

    async fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        self.govern(Op::FsStat, &fd, &path, FsAccess::Read, None)?;
        self.inner.stat_at(fd, path_flags, path).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        self.govern(Op::FsMetadataHash, &fd, &path, FsAccess::Read, None)?;
        self.inner.metadata_hash_at(fd, path_flags, path).await
    }

    async fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        self.govern(Op::FsReadlink, &fd, &path, FsAccess::Read, None)?;
        self.inner.readlink_at(fd, path).await
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.govern(Op::FsMkdir, &fd, &path, FsAccess::Write, None)?;
        self.charge_entry(&fd, &path)?;
        self.inner.create_directory_at(fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.govern(Op::FsRmdir, &fd, &path, FsAccess::Write, None)?;
        self.inner.remove_directory_at(fd, path).await
    }

    async fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.govern(Op::FsUnlink, &fd, &path, FsAccess::Write, None)?;
        self.inner.unlink_file_at(fd, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.govern(Op::FsSetTimes, &fd, &path, FsAccess::Write, None)?;
        self.inner
            .set_times_at(fd, path_flags, path, atim, mtim)
            .await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let to = self.path_of(&new_fd, &new_path);
        self.govern(Op::FsRename, &fd, &old_path, FsAccess::Write, Some(to))?;
        self.inner.rename_at(fd, old_path, new_fd, new_path).await
    }

    async fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: PathFlags,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let to = self.path_of(&new_fd, &new_path);
        self.govern(Op::FsLink, &fd, &old_path, FsAccess::Write, Some(to))?;
        self.charge_entry(&new_fd, &new_path)?;
        self.inner
            .link_at(fd, old_path_flags, old_path, new_fd, new_path)
            .await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.govern(
            Op::FsSymlink,
            &fd,
            &dest_path,
            FsAccess::Write,
            Some(src_path.clone()),
        )?;
        self.charge_entry(&fd, &dest_path)?;
        self.inner.symlink_at(fd, src_path, dest_path).await
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.paths.paths.remove(&fd.rep());
        HostDescriptor::drop(&mut self.inner, fd)
    }

    // Operations on an open descriptor resolve no path: delegated as they are.

    async fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        self.inner.advise(fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.inner.sync_data(fd).await
    }

    async fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorFlags> {
        self.inner.get_flags(fd).await
    }

    async fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorType> {
        self.inner.get_type(fd).await
    }

    async fn set_size(&mut self, fd: Resource<Descriptor>, size: types::Filesize) -> FsResult<()> {
        // Growth counts as written: a sparse file still promises its bytes.
        let now = self.inner.stat(Resource::new_borrow(fd.rep())).await?.size;
        self.charge_write(&fd, size.saturating_sub(now))?;
        self.inner.set_size(fd, size).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.inner.set_times(fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.inner.read(fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        // A write past the end grows the file over the hole: the hole
        // counts as written, as growing it by `set-size` does.
        let hole = offset.saturating_sub(self.file_size(&fd));
        self.charge_write(&fd, (buf.len() as u64).saturating_add(hole))?;
        self.inner.write(fd, buf, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        let listing = match self.inner.table.get(&fd)? {
            wasmtime_wasi::filesystem::Descriptor::Dir(dir) => Listing::of(dir)?,
            wasmtime_wasi::filesystem::Descriptor::File(_) => {
                return Err(ErrorCode::NotDirectory.into());
            }
        };
        let held = self.inner.table.push(listing)?;
        Ok(Resource::new_own(held.rep()))
    }

    async fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.inner.sync(fd).await
    }

    async fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorStat> {
        self.inner.stat(fd).await
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        self.inner.read_via_stream(fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        let borrowed = Resource::new_borrow(fd.rep());
        // Its first write lands at `offset`: a hole past the end counts as
        // written (see `write`).
        let hole = offset.saturating_sub(self.file_size(&borrowed));
        self.charge_write(&borrowed, hole)?;
        let stream = self.inner.write_via_stream(fd, offset)?;
        self.metered(&borrowed, stream)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let borrowed = Resource::new_borrow(fd.rep());
        let stream = self.inner.append_via_stream(fd)?;
        self.metered(&borrowed, stream)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.inner.is_same_object(a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        self.inner.metadata_hash(fd).await
    }
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn paths_resolve_lexically() {
        assert_eq!(resolve("/data", "hello.txt"), "/data/hello.txt");
        assert_eq!(resolve("/data", "./a/../b"), "/data/b");
        assert_eq!(resolve("/data", "../secret.txt"), "/secret.txt");
        assert_eq!(resolve("/data", "../../../etc/passwd"), "/etc/passwd");
        assert_eq!(resolve("/data", "/etc/passwd"), "/etc/passwd");
        assert_eq!(resolve("/", "data"), "/data");
        assert_eq!(resolve("/data", ""), "/data");
    }
}
