//! `skq_virtual_source_*`: fd-less sources activated directly from any
//! thread (skq-rt's [`skq_rt::VirtualSource`]): no eventfd, no epoll; an
//! activation makes no system call unless it must wake an idle worker.
//! Delivered with SKQ_READY_USER | SKQ_READY_READABLE. Activations while the
//! source is queued merge into that delivery; one while it is being
//! processed is redelivered once after the worker's release.

use std::ffi::c_int;

use skq_rt::{Flags, VirtualSource};

use crate::api::{instance, skq_t, SKQ_HIGH_PRIORITY};
use crate::{fail, guard, handle, into_handle, io_code, take_handle, Handle};
use crate::{SKQ_EBADHANDLE, SKQ_EINVAL, SKQ_ESTALE, SKQ_OK};

/// A virtual source (opaque): a source without an fd.
pub struct skq_virtual_source_t {
    _opaque: [u8; 0],
}

#[repr(C)]
struct VirtualBox {
    magic: u64,
    vs: VirtualSource,
}
// SAFETY: repr(C) with the magic first.
unsafe impl Handle for VirtualBox {
    const MAGIC: u64 = 0x736b_715f_7669_7274; // "skq_virt"
}

/// Creates a virtual source registered with `token` and `flags` (0 or
/// SKQ_HIGH_PRIORITY; not PINNED: it has no registrar).
///
/// # Safety
/// `skq` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_virtual_source_new(
    skq: *mut skq_t,
    token: u64,
    flags: u32,
    out: *mut *mut skq_virtual_source_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let inst = match unsafe { instance(skq) } {
            Ok(i) => i,
            Err(c) => return c,
        };
        if flags & !SKQ_HIGH_PRIORITY != 0 {
            return fail(
                SKQ_EINVAL,
                "unknown flag bits (or PINNED) for a virtual source",
            );
        }
        if out.is_null() {
            return fail(SKQ_EINVAL, "out is NULL");
        }
        match inst.skq.virtual_source(token, Flags(flags as u8)) {
            Ok(vs) => {
                let b = into_handle(VirtualBox {
                    magic: VirtualBox::MAGIC,
                    vs,
                });
                // SAFETY: non-NULL and writable.
                unsafe { out.write(b as *mut skq_virtual_source_t) };
                SKQ_OK
            }
            Err(e) => io_code(&e),
        }
    })
}

/// Activates a virtual source (any thread, including a worker's handler):
/// it is delivered to the worker the policy chooses, which is woken if
/// idle. SKQ_ESTALE cannot happen while the handle lives.
///
/// # Safety
/// `vs` is NULL or a live virtual-source handle.
#[no_mangle]
pub unsafe extern "C" fn skq_virtual_source_activate(vs: *mut skq_virtual_source_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        match unsafe { handle::<VirtualBox>(vs.cast()) } {
            Some(v) => match v.vs.activate() {
                skq_rt::Activation::Stale => fail(SKQ_ESTALE, "virtual source deregistered"),
                _ => SKQ_OK,
            },
            None => fail(SKQ_EBADHANDLE, "not an skq_virtual_source_t"),
        }
    })
}

/// Stores a virtual source's source id in `*out_id`.
///
/// # Safety
/// `vs` is NULL or a live virtual-source handle; `out_id` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_virtual_source_id(
    vs: *mut skq_virtual_source_t,
    out_id: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let Some(v) = (unsafe { handle::<VirtualBox>(vs.cast()) }) else {
            return fail(SKQ_EBADHANDLE, "not an skq_virtual_source_t");
        };
        if out_id.is_null() {
            return fail(SKQ_EINVAL, "out_id is NULL");
        }
        // SAFETY: non-NULL and writable.
        unsafe { out_id.write(v.vs.id().as_u64()) };
        SKQ_OK
    })
}

/// Deregisters a virtual source: its queued delivery is dropped, and no
/// later registration reusing its slot receives its activations.
///
/// # Safety
/// `vs` is NULL or a handle from skq_virtual_source_new.
#[no_mangle]
pub unsafe extern "C" fn skq_virtual_source_free(vs: *mut skq_virtual_source_t) -> c_int {
    guard(|| {
        // SAFETY: NULL or from skq_virtual_source_new (possibly freed: checked).
        match unsafe { take_handle::<VirtualBox>(vs.cast()) } {
            Some(b) => {
                drop(b);
                SKQ_OK
            }
            None => fail(SKQ_EBADHANDLE, "not a live skq_virtual_source_t"),
        }
    })
}
