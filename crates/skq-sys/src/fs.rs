//! Files: opening a path confined to a directory (`openat2` with
//! `RESOLVE_BENEATH`), page-cache advice (`posix_fadvise`) and sending a
//! file region to a socket (`sendfile`).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `struct open_how` of openat2(2) (libc's is non-exhaustive, so it cannot
/// be built by value): three u64s, the kernel's version-0 layout.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Opens `rel` (a relative path) read-only below the directory `dir`,
/// refusing any resolution that leaves it: `..` above `dir`, an absolute
/// symlink, or a symlink whose target lies outside (`EXDEV`), and magic
/// links such as `/proc/self/fd/N`. Symlinks that stay inside are followed.
/// `ENOSYS` means the kernel (or a seccomp filter) lacks `openat2`.
pub fn open_beneath(dir: &File, rel: &Path) -> io::Result<File> {
    let c = CString::new(rel.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let how = OpenHow {
        flags: (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY) as u64,
        mode: 0,
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: `dir` is an open descriptor for the duration of the call, `c`
    // is a NUL-terminated string that outlives it, and `how` is a fully
    // initialised `open_how` whose size is passed alongside it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

/// Whether `e` says the system call does not exist here (`ENOSYS`).
pub fn is_unsupported(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSYS)
}

/// Whether `e` says a path component was not a directory (`ENOTDIR`).
pub fn is_not_a_directory(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOTDIR)
}

/// Asks the kernel to drop `file`'s cached pages (`POSIX_FADV_DONTNEED`
/// over the whole file), so the next read goes to storage. Clean pages are
/// dropped at once; on tmpfs (where the page cache is the storage) it does
/// nothing.
pub fn drop_page_cache(file: &File) -> io::Result<()> {
    // SAFETY: the descriptor is open for the duration of the call; the
    // advice takes no pointers.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Sends up to `count` bytes of `file` from `*offset` to `out` (a socket)
/// with one `sendfile(2)` call, straight from the page cache; advances
/// `*offset` by the bytes sent and returns them. The file's own position is
/// untouched. 0 with `count > 0`: the file ends at `*offset`. `WouldBlock`
/// when a non-blocking `out` is full.
pub fn sendfile(
    out: BorrowedFd<'_>,
    file: &File,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    let mut off =
        libc::off_t::try_from(*offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: both descriptors are open for the call (`out` is borrowed,
    // `file` is a live reference), `off` is a valid `off_t` the kernel
    // reads and updates, and no user memory is passed.
    let n = unsafe { libc::sendfile(out.as_raw_fd(), file.as_raw_fd(), &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    *offset = off as u64;
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_beneath_refuses_escapes_and_follows_inner_links() {
        let base = std::env::temp_dir().join(format!("skq-sys-fs-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.txt"), b"inside").unwrap();
        std::fs::write(base.join("secret"), b"outside").unwrap();
        std::os::unix::fs::symlink("../secret", root.join("out")).unwrap();
        std::os::unix::fs::symlink("sub/a.txt", root.join("in")).unwrap();
        let dir = File::open(&root).unwrap();
        match open_beneath(&dir, Path::new("sub/a.txt")) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                eprintln!("openat2 unavailable here; escape checks not exercised");
            }
            r => {
                let mut s = String::new();
                io::Read::read_to_string(&mut r.unwrap(), &mut s).unwrap();
                assert_eq!(s, "inside");
                assert!(open_beneath(&dir, Path::new("in")).is_ok());
                assert!(open_beneath(&dir, Path::new("out")).is_err());
                assert!(open_beneath(&dir, Path::new("../secret")).is_err());
                assert!(open_beneath(&dir, Path::new("/etc/passwd")).is_err());
            }
        }
        let f = File::open(root.join("sub/a.txt")).unwrap();
        drop_page_cache(&f).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }
}
