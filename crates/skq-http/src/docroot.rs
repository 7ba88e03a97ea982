//! The document root: looking a relative path up without leaving it.
//!
//! The root directory is opened once; every lookup is `openat2(root, rel,
//! RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, so the kernel refuses any
//! resolution that would leave the root (`..` reached through a symlink, an
//! absolute symlink, a symlink to outside) with `EXDEV`, in one system call
//! and without a race between check and open. Where `openat2` is missing
//! (`ENOSYS`: old kernel or a seccomp filter) the fallback canonicalises
//! the path and checks it is still below the canonical root before opening.

use std::fs::{File, Metadata};
use std::io;
use std::path::{Path, PathBuf};

use skq_sys::fs::{is_not_a_directory, is_unsupported, open_beneath};

/// What a lookup found.
#[derive(Debug)]
pub enum Lookup {
    /// A regular file, open for reading, with its metadata.
    File(File, Metadata),
    /// A directory.
    Dir,
    /// Nothing there.
    NotFound,
    /// Something that may not be served: outside the root, not a regular
    /// file, or unreadable.
    Forbidden,
}

/// An open document root.
#[derive(Debug)]
pub struct DocRoot {
    dir: File,
    canonical: PathBuf,
    openat2: bool,
}

impl DocRoot {
    /// Opens `path`, which must be a readable directory. The error is one
    /// line naming the flag.
    pub fn open(path: &Path) -> Result<DocRoot, String> {
        let canonical = path
            .canonicalize()
            .map_err(|e| format!("--root {}: {e}", path.display()))?;
        if !canonical.is_dir() {
            return Err(format!("--root {}: not a directory", path.display()));
        }
        let dir = File::open(&canonical).map_err(|e| format!("--root {}: {e}", path.display()))?;
        std::fs::read_dir(&canonical).map_err(|e| format!("--root {}: {e}", path.display()))?;
        let openat2 = !matches!(
            open_beneath(&dir, Path::new(".")),
            Err(e) if is_unsupported(&e)
        );
        Ok(DocRoot {
            dir,
            canonical,
            openat2,
        })
    }

    /// The canonical root path.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// Looks `rel` (no `..` segments; empty for the root) up.
    pub fn lookup(&self, rel: &Path) -> Lookup {
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let opened = if self.openat2 {
            open_beneath(&self.dir, rel)
        } else {
            self.open_checked(rel)
        };
        let file = match opened {
            Ok(f) => f,
            Err(e) => {
                return match e.kind() {
                    io::ErrorKind::NotFound => Lookup::NotFound,
                    // ENOTDIR: a path through a file (`/a.txt/b`).
                    _ if is_not_a_directory(&e) => Lookup::NotFound,
                    _ => Lookup::Forbidden,
                };
            }
        };
        match file.metadata() {
            Ok(m) if m.is_file() => Lookup::File(file, m),
            Ok(m) if m.is_dir() => Lookup::Dir,
            _ => Lookup::Forbidden,
        }
    }

    fn open_checked(&self, rel: &Path) -> io::Result<File> {
        let full = self.canonical.join(rel).canonicalize()?;
        if !full.starts_with(&self.canonical) {
            return Err(io::Error::from(io::ErrorKind::PermissionDenied));
        }
        File::open(full)
    }
}
