//! `read-directory` of the governed view (`super::GovernedFs`): a listing
//! of one directory, read from it as the guest asks for each entry: its
//! own descriptor on the directory and a buffer of one `getdents` call (at
//! most about 24 KiB).
//!
//! wasmtime-wasi's `read-directory` reads the whole directory into the
//! host's memory before the guest reads its first entry; a task holding
//! many listings of a large directory held as many copies of it, outside
//! every limit of the task. Held in the task's resource table (at most
//! [`crate::limits::MAX_TABLE_ENTRIES`] entries) under the handle type of
//! `directory-entry-stream`, whose two functions are the only ones that
//! reach it.

use wasmtime::component::Resource;
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::{self, ErrorCode};

/// A listing of one directory (see the module's doc).
pub(super) struct Listing {
    dir: rustix::fs::Dir,
}

impl Listing {
    /// A listing of `dir`, read from a descriptor of its own.
    pub(super) fn of(dir: &wasmtime_wasi::filesystem::Dir) -> std::io::Result<Self> {
        use rustix::fs::{Mode, OFlags};
        // A descriptor of its own, opened for reading: the directory's may
        // be an `O_PATH` one, which cannot be read.
        let own = rustix::fs::openat(
            &*dir.dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self {
            dir: rustix::fs::Dir::new(own)?,
        })
    }

    /// The next entry, `.` and `..` left out.
    pub(super) fn next(&mut self) -> FsResult<Option<types::DirectoryEntry>> {
        loop {
            let entry = match self.dir.read() {
                None => return Ok(None),
                Some(entry) => entry.map_err(std::io::Error::from)?,
            };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name =
                String::from_utf8(name.to_vec()).map_err(|_| ErrorCode::IllegalByteSequence)?;
            let kind = match entry.file_type() {
                // Not told by this filesystem: asked of the entry itself.
                rustix::fs::FileType::Unknown => {
                    let at = self.dir.fd().map_err(std::io::Error::from)?;
                    rustix::fs::statat(at, name.as_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                        .map(|stat| rustix::fs::FileType::from_raw_mode(stat.st_mode))
                        .map_err(std::io::Error::from)?
                }
                kind => kind,
            };
            return Ok(Some(types::DirectoryEntry {
                type_: descriptor_type(kind),
                name,
            }));
        }
    }
}

fn descriptor_type(kind: rustix::fs::FileType) -> types::DescriptorType {
    use rustix::fs::FileType;
    use types::DescriptorType;
    match kind {
        FileType::RegularFile => DescriptorType::RegularFile,
        FileType::Directory => DescriptorType::Directory,
        FileType::Symlink => DescriptorType::SymbolicLink,
        FileType::Fifo => DescriptorType::Fifo,
        FileType::Socket => DescriptorType::Socket,
        FileType::CharacterDevice => DescriptorType::CharacterDevice,
        FileType::BlockDevice => DescriptorType::BlockDevice,
        FileType::Unknown => DescriptorType::Unknown,
    }
}

/// The listing behind a `directory-entry-stream` handle.
pub(super) fn listing(stream: &Resource<types::DirectoryEntryStream>) -> Resource<Listing> {
    Resource::new_borrow(stream.rep())
}
