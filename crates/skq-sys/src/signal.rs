//! SIGINT/SIGTERM taken synchronously, for orderly shutdown of servers,
//! and the wake-up signal that ends one thread's blocking poll.
//!
//! A server blocks the two signals in its main thread before spawning workers
//! (every thread inherits the mask), then waits for them with
//! [`wait_for_termination`]; no handler runs asynchronously.
//!
//! The wake-up signal ([`WakeSignal`]) is a real-time signal that ends one
//! thread's blocking poll (`Epoll::wait_wakeable` with the [`PollMask`] that
//! [`WakeSignal::arm_here`] returns). A wake-up sent while the thread is
//! not in its poll must end its next poll at once, so none is lost. Two
//! ways to get that:
//!
//! - **The wake-up window** (x86-64). The signal stays unblocked in the
//!   thread; its handler sets a flag of the thread and, when the thread was
//!   interrupted between the check of that flag and the `syscall`
//!   instruction of its poll, moves it past the poll as if the poll had
//!   been interrupted (`EINTR`). The poll's check of the flag and its
//!   system call are a few instructions of assembly, so the handler can
//!   tell (by the interrupted instruction's address) whether the poll has
//!   begun; a signal that arrives earlier leaves the flag set, a signal
//!   that arrives during the poll ends it, and one in between is moved past
//!   it. The poll itself is then a plain `epoll_pwait2` with no signal mask:
//!   the masked one swaps the thread's mask twice under the kernel's signal
//!   lock on every blocking poll (0.12–0.14 µs a poll on one VM, 0.09–0.27 µs on
//!   another, indicative: its host failed the quiet-host probe;
//!   `examples/wake_cost.rs`; `docs/ARCHITECTURE.md`, "The wake-up
//!   window"), while targeted wake-ups are rare (none per reply in the RPC
//!   server's main-job setting). The
//!   handler runs with `SA_RESTART`, so a wake-up that races the end of a
//!   poll and lands while the thread runs other code restarts an
//!   interrupted restartable call; calls the kernel never restarts
//!   (`nanosleep`, `poll`, timed waits) return `EINTR` then, as for any
//!   signal, and `skq-sys`'s own sleeps retry.
//! - **The poll mask** (other architectures). The thread keeps the signal
//!   blocked except inside its poll (`epoll_pwait2` with a mask without
//!   it), so a wake-up sent while the thread runs stays pending until its
//!   next poll and interrupts nothing else.

use std::io;
use std::mem::MaybeUninit;
use std::time::Duration;

/// The number of SIGINT (Ctrl-C), as [`wait_for_termination`] reports it.
pub const SIGINT: i32 = libc::SIGINT;
/// The number of SIGTERM.
pub const SIGTERM: i32 = libc::SIGTERM;

/// Blocks SIGINT and SIGTERM in the calling thread (and in every thread it
/// spawns afterwards), so that [`wait_for_termination`] can collect them.
pub fn block_termination_signals() -> io::Result<()> {
    let set = termination_set();
    // SAFETY: `set` is an initialised sigset_t; the old-mask pointer may be null.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Waits for a blocked SIGINT/SIGTERM, at most `timeout` (`None`: forever).
/// Returns the signal, or `None` when the time ran out.
pub fn wait_for_termination(timeout: Option<Duration>) -> io::Result<Option<i32>> {
    let set = termination_set();
    let r = match timeout {
        Some(t) => {
            let ts = libc::timespec {
                tv_sec: t.as_secs() as libc::time_t,
                tv_nsec: t.subsec_nanos() as libc::c_long,
            };
            // SAFETY: `set` and `ts` are live; the siginfo pointer may be null.
            unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) }
        }
        // SAFETY: `set` is live; the siginfo pointer may be null.
        None => unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) },
    };
    if r > 0 {
        return Ok(Some(r));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
        _ => Err(e),
    }
}

fn termination_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set before sigaddset adds two valid
    // signal numbers to it; only then is it read.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGINT);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
        set.assume_init()
    }
}

/// How a thread's blocking polls let the wake-up signal in
/// ([`WakeSignal::arm_here`]): through the wake-up window (x86-64), or
/// with the thread's own mask without the signal.
#[derive(Clone, Copy)]
pub struct PollMask(pub(crate) PollWake);

#[derive(Clone, Copy)]
pub(crate) enum PollWake {
    /// The signal is unblocked in the thread; polls go through
    /// [`window::syscall`].
    #[cfg(target_arch = "x86_64")]
    Window,
    /// The signal is blocked in the thread; polls run with this mask.
    Mask(libc::sigset_t),
}

impl std::fmt::Debug for PollMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PollMask")
    }
}

/// A real-time signal used as a per-thread doorbell (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct WakeSignal {
    sig: libc::c_int,
    /// This process's id, read once: glibc does not cache `getpid`, and a
    /// system call per wake-up showed in the async server's profile.
    pid: libc::pid_t,
}

#[cfg(not(target_arch = "x86_64"))]
extern "C" fn ignore_wake(_: libc::c_int) {}

impl WakeSignal {
    /// Installs the handler for `SIGRTMIN + offset` (once per process;
    /// installing it again is harmless): on x86-64 the wake-up window's
    /// (module `window`), with `SA_RESTART` (the polls it ends are never
    /// restarted by the kernel); elsewhere one that does nothing, without
    /// `SA_RESTART`, since the signal is meant to end a wait.
    pub fn install(offset: i32) -> io::Result<WakeSignal> {
        let sig = libc::SIGRTMIN() + offset;
        if sig > libc::SIGRTMAX() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("wake-up signal SIGRTMIN+{offset} is above SIGRTMAX"),
            ));
        }
        // SAFETY: a zeroed sigaction is valid; the handler is an
        // async-signal-safe function that does nothing; `sa_mask` is
        // initialised by sigemptyset before use.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            #[cfg(target_arch = "x86_64")]
            {
                sa.sa_sigaction = window::handler as window::Handler as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                sa.sa_sigaction = ignore_wake as extern "C" fn(libc::c_int) as usize;
                sa.sa_flags = 0;
            }
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: getpid has no arguments and cannot fail.
        let pid = unsafe { libc::getpid() };
        Ok(WakeSignal { sig, pid })
    }

    /// The signal's number.
    pub fn number(&self) -> i32 {
        self.sig
    }

    /// Prepares the calling thread for wake-ups in its blocking polls and
    /// returns how those polls let the signal in (see the module docs):
    /// on x86-64 the signal is unblocked in the thread (the wake-up
    /// window); elsewhere it is blocked, and the returned mask is the
    /// thread's mask without it.
    pub fn arm_here(&self) -> io::Result<PollMask> {
        #[cfg(target_arch = "x86_64")]
        {
            self.change_mask(libc::SIG_UNBLOCK)?;
            Ok(PollMask(PollWake::Window))
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.mask_here()
    }

    /// Blocks the signal in the calling thread and returns the mask its
    /// polls would run with (the thread's mask without it): the poll mask
    /// of other architectures, for comparisons with the wake-up window on
    /// x86-64 (`examples/wake_cost.rs`). A thread must not mix the two.
    #[doc(hidden)]
    pub fn mask_here(&self) -> io::Result<PollMask> {
        let mut poll = self.change_mask(libc::SIG_BLOCK)?;
        // SAFETY: `poll` is an initialised set.
        unsafe { libc::sigdelset(&mut poll, self.sig) };
        Ok(PollMask(PollWake::Mask(poll)))
    }

    /// Blocks (`SIG_BLOCK`) or unblocks (`SIG_UNBLOCK`) the signal in the
    /// calling thread; returns the thread's mask from before.
    fn change_mask(&self, how: libc::c_int) -> io::Result<libc::sigset_t> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        let mut old = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: `set` is initialised by sigemptyset before use, and `old`
        // by a successful pthread_sigmask before it is read.
        unsafe {
            libc::sigemptyset(set.as_mut_ptr());
            libc::sigaddset(set.as_mut_ptr(), self.sig);
            let r = libc::pthread_sigmask(how, set.as_ptr(), old.as_mut_ptr());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            Ok(old.assume_init())
        }
    }

    /// Sends the signal to thread `tid` of this process.
    pub fn send(&self, tid: i32) -> io::Result<()> {
        // SAFETY: tgkill takes plain integers; a thread that exited makes it
        // fail with ESRCH, reported to the caller.
        let r = unsafe { libc::syscall(libc::SYS_tgkill, self.pid, tid, self.sig) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// How many wake-ups so far arrived between a poll's check for an earlier
/// wake-up and its system call, and were moved past the call by the
/// handler (the race the wake-up window closes; always 0 where polls use
/// the signal mask instead). A diagnostic for tests and profiles.
#[doc(hidden)]
pub fn window_cancels() -> u64 {
    #[cfg(target_arch = "x86_64")]
    return window::cancels();
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// The calling thread's kernel thread id.
pub fn thread_id() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// The wake-up window (x86-64; see the module docs): a system call that a
/// wake-up signal ends however close to its start the signal arrives.
#[cfg(target_arch = "x86_64")]
pub(crate) mod window {
    use std::sync::atomic::{AtomicU8, Ordering};

    thread_local! {
        /// Set by the handler: a wake-up reached this thread since its last
        /// poll ended. Const-initialised without a destructor, so the
        /// handler's access is a plain thread-local address.
        static WOKEN: AtomicU8 = const { AtomicU8::new(0) };
    }

    // skq_sys_wake_window(flag, nr, a1, a2, a3, a4) -> rax: the system call
    // `nr` with arguments a1..a4 and two zeros (epoll_pwait2's and
    // epoll_pwait's signal mask and its size), unless `*flag` is non-zero
    // when the `syscall` instruction is reached: then -EINTR without a
    // call. `_begin` to `_end` is the window in which the handler moves an
    // interrupted thread to `_cancel`: after the check of the flag and
    // before the call has run (an interrupted call returns to `_end`, with
    // -EINTR from the kernel). System V arguments rdi, rsi, rdx, rcx, r8,
    // r9; the kernel's rdi, rsi, rdx, r10, r8, r9; `syscall` clobbers rcx
    // and r11, which hold nothing then. No stack use.
    std::arch::global_asm!(
        ".pushsection .text.skq_sys_wake_window,\"ax\",@progbits",
        ".p2align 4",
        ".globl skq_sys_wake_window",
        ".hidden skq_sys_wake_window",
        ".type skq_sys_wake_window,@function",
        "skq_sys_wake_window:",
        ".cfi_startproc",
        "mov r11, rdi",
        "mov rax, rsi",
        "mov rdi, rdx",
        "mov rsi, rcx",
        "mov rdx, r8",
        "mov r10, r9",
        "xor r8d, r8d",
        "xor r9d, r9d",
        ".globl skq_sys_wake_window_begin",
        ".hidden skq_sys_wake_window_begin",
        "skq_sys_wake_window_begin:",
        "cmp byte ptr [r11], 0",
        "jne skq_sys_wake_window_cancel",
        "syscall",
        ".globl skq_sys_wake_window_end",
        ".hidden skq_sys_wake_window_end",
        "skq_sys_wake_window_end:",
        "ret",
        ".globl skq_sys_wake_window_cancel",
        ".hidden skq_sys_wake_window_cancel",
        "skq_sys_wake_window_cancel:",
        "mov rax, -4",
        "ret",
        ".cfi_endproc",
        ".size skq_sys_wake_window, .-skq_sys_wake_window",
        ".popsection",
    );

    extern "C" {
        fn skq_sys_wake_window(
            flag: *const AtomicU8,
            nr: libc::c_long,
            a1: libc::c_long,
            a2: libc::c_long,
            a3: libc::c_long,
            a4: libc::c_long,
        ) -> libc::c_long;
        static skq_sys_wake_window_begin: u8;
        static skq_sys_wake_window_end: u8;
        static skq_sys_wake_window_cancel: u8;
    }

    /// Wake-ups that found their thread inside the window (the handler
    /// moved it past its call): how often the race the window closes
    /// happens ([`super::window_cancels`]).
    static CANCELS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    pub(crate) fn cancels() -> u64 {
        CANCELS.load(Ordering::Relaxed)
    }

    pub(crate) type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

    /// The wake-up signal's handler: marks the thread woken and, if it was
    /// interrupted inside the window, moves it to the window's cancel path.
    /// Async-signal-safe: a thread-local store and the interrupted
    /// context's instruction pointer.
    pub(crate) extern "C" fn handler(
        _: libc::c_int,
        _: *mut libc::siginfo_t,
        uc: *mut libc::c_void,
    ) {
        let _ = WOKEN.try_with(|f| f.store(1, Ordering::Relaxed));
        if uc.is_null() {
            return;
        }
        // SAFETY: with SA_SIGINFO the kernel passes the interrupted
        // context as a live ucontext_t; only its instruction pointer is
        // read and, inside the window, replaced by another instruction of
        // the same function (whose registers are as the window left them).
        unsafe {
            let uc = &mut *uc.cast::<libc::ucontext_t>();
            let rip = &mut uc.uc_mcontext.gregs[libc::REG_RIP as usize];
            let begin = std::ptr::addr_of!(skq_sys_wake_window_begin) as libc::greg_t;
            let end = std::ptr::addr_of!(skq_sys_wake_window_end) as libc::greg_t;
            if *rip >= begin && *rip < end {
                *rip = std::ptr::addr_of!(skq_sys_wake_window_cancel) as libc::greg_t;
                CANCELS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// System call `nr` (an epoll wait) with arguments a1..a4 and a null
    /// signal mask, ended by a wake-up that reached the thread since its
    /// last call here returned (the thread must have run
    /// [`super::WakeSignal::arm_here`]). Returns the kernel's answer
    /// (negative: -errno; -EINTR for a wake-up).
    ///
    /// # Safety
    /// As for the system call `nr` with these arguments.
    pub(crate) unsafe fn syscall(
        nr: libc::c_long,
        a1: libc::c_long,
        a2: libc::c_long,
        a3: libc::c_long,
        a4: libc::c_long,
    ) -> libc::c_long {
        WOKEN.with(|f| {
            // SAFETY: the caller's contract for the call; `f` lives as long
            // as this thread.
            let r = unsafe { skq_sys_wake_window(f, nr, a1, a2, a3, a4) };
            // The wake-ups that reached the thread until now ended this
            // poll or arrived after it returned: the waker's work was
            // pushed before it signalled, so the caller's next look at its
            // queue sees it.
            f.store(0, Ordering::Relaxed);
            r
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn addr(sym: *const u8) -> libc::greg_t {
            sym as libc::greg_t
        }

        /// The handler with a context interrupted at `rip`: where it
        /// resumes the thread, and whether it marked the thread woken.
        fn handled_at(rip: libc::greg_t) -> (libc::greg_t, u8) {
            WOKEN.with(|f| f.store(0, Ordering::Relaxed));
            // SAFETY: an all-zero ucontext_t is a valid value of the type.
            let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
            uc.uc_mcontext.gregs[libc::REG_RIP as usize] = rip;
            handler(
                0,
                std::ptr::null_mut(),
                (&mut uc as *mut libc::ucontext_t).cast(),
            );
            let woken = WOKEN.with(|f| f.swap(0, Ordering::Relaxed));
            (uc.uc_mcontext.gregs[libc::REG_RIP as usize], woken)
        }

        #[test]
        fn the_handler_moves_only_a_thread_inside_the_window_past_its_call() {
            // SAFETY: only the symbols' addresses are taken.
            #[allow(unused_unsafe)]
            let (begin, end, cancel, entry) = unsafe {
                (
                    addr(std::ptr::addr_of!(skq_sys_wake_window_begin)),
                    addr(std::ptr::addr_of!(skq_sys_wake_window_end)),
                    addr(std::ptr::addr_of!(skq_sys_wake_window_cancel)),
                    addr(skq_sys_wake_window as *const u8),
                )
            };
            // The window: the flag's check, the branch and the `syscall`
            // instruction (cmp byte [r11], 0: 4 bytes; jne: 2 or 6; syscall: 2).
            assert!(entry < begin && begin < end && end < cancel);
            assert!(
                (8..=12).contains(&(end - begin)),
                "window of {} bytes",
                end - begin
            );
            for rip in [begin, begin + 4, end - 2, end - 1] {
                assert_eq!(
                    handled_at(rip),
                    (cancel, 1),
                    "interrupted at begin+{}",
                    rip - begin
                );
            }
            // Before the window (the flag, set now, is checked there), at
            // the call's return (the kernel's answer stands) and elsewhere:
            // resumed where it was, marked woken.
            for rip in [entry, begin - 1, end, cancel, 0x1000] {
                assert_eq!(handled_at(rip), (rip, 1));
            }
        }

        #[test]
        fn a_set_flag_ends_the_call_before_it_is_made() {
            // getppid through the window: made with the flag clear, not
            // made (-EINTR) with it set; the flag is clear afterwards.
            // SAFETY: getppid takes no arguments.
            let ppid = unsafe { syscall(libc::SYS_getppid, 0, 0, 0, 0) };
            // SAFETY: as above.
            assert_eq!(ppid, unsafe { libc::getppid() } as libc::c_long);
            WOKEN.with(|f| f.store(1, Ordering::Relaxed));
            // SAFETY: as above.
            let r = unsafe { syscall(libc::SYS_getppid, 0, 0, 0, 0) };
            assert_eq!(r, -(libc::EINTR as libc::c_long));
            assert_eq!(WOKEN.with(|f| f.load(Ordering::Relaxed)), 0);
        }
    }
}
