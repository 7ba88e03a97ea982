//! The typed registration path: `Registry`, `Registered<S>`,
//! `Worker::register` and `UserEvent`'s drop.
//!
//! Every test holds `SERIAL` while it creates or closes fds, so that fd
//! numbers are handed out deterministically (lowest free first) and the
//! fd-reuse test can count on getting the closed number back.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use skq_rt::{
    Config, Events, Flags, Interest, Phase, Policy, Registered, Registry, Skq, SourceId, Worker,
};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Long enough that a delivery that should come does come.
const ARRIVES: Duration = Duration::from_secs(5);
/// How long to watch for a delivery that should not come.
const QUIET: Duration = Duration::from_millis(50);

fn instance(workers: usize) -> Arc<Skq> {
    Skq::new(Config::new(Policy::Hybrid, workers)).unwrap()
}

/// A connected (client, non-blocking server side) pair.
fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    (client, server)
}

/// A (writer, non-blocking reader) pair.
fn unix_pair() -> (UnixStream, UnixStream) {
    let (tx, rx) = UnixStream::pair().unwrap();
    rx.set_nonblocking(true).unwrap();
    (tx, rx)
}

/// (token, source) of one wait's events.
fn wait(w: &mut Worker, timeout: Duration) -> Vec<(u64, SourceId)> {
    let mut events = Events::with_capacity(16);
    w.wait(&mut events, Some(timeout)).unwrap();
    events.iter().map(|e| (e.token, e.source)).collect()
}

/// Reads until `EAGAIN`.
fn drain(mut r: impl Read) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return out,
            Err(e) => panic!("read: {e}"),
        }
    }
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn a_registered_tcp_stream_delivers_events_with_its_token() {
    let _g = serial();
    let skq = instance(1);
    let mut w = skq.worker(0);
    let (mut client, server) = tcp_pair();
    let peer = server.peer_addr().unwrap();
    let mut conn: Registered<TcpStream> = skq
        .registry()
        .register(server, 11, Interest::READABLE, Flags::NONE)
        .unwrap();
    assert_eq!(skq.core().phase(conn.id()), Phase::Idle);
    assert_eq!(conn.peer_addr().unwrap(), peer); // Deref to the stream
    client.write_all(b"hello").unwrap();
    assert_eq!(wait(&mut w, ARRIVES), vec![(11, conn.id())]);
    assert_eq!(drain(&mut *conn), b"hello"); // DerefMut for `Read`
    client.write_all(b"again").unwrap();
    assert_eq!(wait(&mut w, ARRIVES), vec![(11, conn.id())]);
    assert_eq!(drain(conn.get_ref()), b"again");
}

#[test]
fn dropping_the_handle_deregisters_and_a_reused_fd_number_gets_only_its_own_events() {
    let _g = serial();
    let skq = instance(1);
    let registry = skq.registry();
    let mut w = skq.worker(0);
    // The listener stays open so that the server side's fd number is the
    // lowest one freed by the drop below.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    let fd = server.as_raw_fd();
    let conn = registry
        .register(server, 1, Interest::READABLE, Flags::NONE)
        .unwrap();
    let old = conn.id();
    client.write_all(b"a").unwrap();
    assert_eq!(wait(&mut w, ARRIVES), vec![(1, old)]);
    assert_eq!(drain(&*conn), b"a");

    drop(conn);
    assert_eq!(skq.core().phase(old), Phase::Free, "the id is stale");
    // The socket was closed too: the client reads end-of-stream.
    client.set_read_timeout(Some(ARRIVES)).unwrap();
    assert_eq!(client.read(&mut [0u8; 4]).unwrap(), 0);
    let _ = client.write_all(b"late"); // may fail: the peer is gone
    assert_eq!(wait(&mut w, QUIET), vec![], "no event after drop");

    // The lowest free fd number is the one just closed: a new socket gets it
    // and registers without EEXIST (the old epoll entry is gone).
    let (a, b) = UnixStream::pair().unwrap();
    let (rx, mut tx) = if a.as_raw_fd() == fd { (a, b) } else { (b, a) };
    assert_eq!(rx.as_raw_fd(), fd, "fd number reused");
    rx.set_nonblocking(true).unwrap();
    let fresh = registry
        .register(rx, 2, Interest::READABLE, Flags::NONE)
        .unwrap();
    assert_eq!(fresh.id().index(), old.index(), "slot reused");
    assert_ne!(fresh.id(), old, "with a new generation");
    tx.write_all(b"x").unwrap();
    assert_eq!(wait(&mut w, ARRIVES), vec![(2, fresh.id())]);
    assert_eq!(drain(&*fresh), b"x");
    assert_eq!(wait(&mut w, QUIET), vec![]);
}

/// A source that records, when it is dropped, whether its registration was
/// already gone: the scheduler slot freed and the fd out of the epoll (a raw
/// registration of the still-open fd succeeds instead of failing EEXIST).
struct Probe {
    stream: UnixStream,
    skq: Arc<Skq>,
    id: Arc<Mutex<Option<SourceId>>>,
    seen: Arc<Mutex<Option<(Phase, bool)>>>,
}

impl AsFd for Probe {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let id = self.id.lock().unwrap().expect("registered");
        let phase = self.skq.core().phase(id);
        let fd = self.stream.as_raw_fd();
        let raw = self
            .skq
            .register(fd, 99, Interest::READABLE, Flags::NONE, None);
        let out_of_epoll = raw.is_ok();
        if let Ok(rid) = raw {
            self.skq.deregister(rid, fd).unwrap();
        }
        *self.seen.lock().unwrap() = Some((phase, out_of_epoll));
    }
}

#[test]
fn drop_deregisters_before_the_source_is_closed() {
    let _g = serial();
    let skq = instance(1);
    let (_tx, rx) = unix_pair();
    let id = Arc::new(Mutex::new(None));
    let seen = Arc::new(Mutex::new(None));
    let probe = Probe {
        stream: rx,
        skq: skq.clone(),
        id: id.clone(),
        seen: seen.clone(),
    };
    let reg = skq
        .registry()
        .register(probe, 1, Interest::READABLE, Flags::NONE)
        .unwrap();
    *id.lock().unwrap() = Some(reg.id());
    drop(reg);
    assert_eq!(*seen.lock().unwrap(), Some((Phase::Free, true)));
}

#[test]
fn deregister_returns_the_source_still_open() {
    let _g = serial();
    let skq = instance(1);
    let registry = skq.registry();
    let mut w = skq.worker(0);
    let (mut tx, rx) = unix_pair();
    let reg = registry
        .register(rx, 3, Interest::READABLE, Flags::NONE)
        .unwrap();
    let id = reg.id();
    tx.write_all(b"kept").unwrap();
    let rx = reg.deregister().unwrap();
    assert_eq!(skq.core().phase(id), Phase::Free);
    assert_eq!(
        wait(&mut w, QUIET),
        vec![],
        "readiness of a deregistered fd"
    );
    assert_eq!(drain(&rx), b"kept", "the source is still open");

    // Out of the epoll: it registers again, and `into_inner` works alike.
    let reg = registry
        .register(rx, 4, Interest::READABLE, Flags::NONE)
        .unwrap();
    tx.write_all(b"y").unwrap();
    assert_eq!(wait(&mut w, ARRIVES), vec![(4, reg.id())]);
    let id = reg.id();
    let rx = reg.into_inner();
    assert_eq!(skq.core().phase(id), Phase::Free);
    assert_eq!(drain(&rx), b"y");
}

#[test]
fn modify_changes_the_token() {
    let _g = serial();
    let skq = instance(1);
    let mut w = skq.worker(0);
    let (mut tx, rx) = unix_pair();
    let reg = skq
        .registry()
        .register(rx, 1, Interest::READABLE, Flags::NONE)
        .unwrap();
    reg.modify(2, Interest::READABLE, Flags::NONE).unwrap();
    tx.write_all(b"z").unwrap();
    assert_eq!(wait(&mut w, ARRIVES), vec![(2, reg.id())]);
    assert_eq!(drain(&*reg), b"z");
    // No registrar: it cannot become pinned.
    assert!(reg.modify(2, Interest::READABLE, Flags::PINNED).is_err());
}

#[test]
fn registering_through_a_worker_makes_it_the_registrar_of_pinned_sources() {
    let _g = serial();
    let skq = instance(2);
    let mut w0 = skq.worker(0);
    let mut w1 = skq.worker(1);

    // Without a registrar PINNED is refused, and the source comes back.
    let (mut tx, rx) = unix_pair();
    let err = skq
        .registry()
        .register(rx, 5, Interest::READABLE, Flags::PINNED)
        .unwrap_err();
    assert_eq!(err.error().kind(), io::ErrorKind::InvalidInput);
    let rx = err.into_source();

    let reg = w1
        .register(rx, 5, Interest::READABLE, Flags::PINNED)
        .unwrap();
    for round in 0..3 {
        tx.write_all(b"p").unwrap();
        let (mut got0, mut got1) = (Vec::new(), Vec::new());
        for _ in 0..200 {
            got0.extend(wait(&mut w0, Duration::from_millis(10)));
            got1.extend(wait(&mut w1, Duration::from_millis(10)));
            if !got1.is_empty() {
                break;
            }
        }
        assert_eq!(got0, vec![], "round {round}: pinned source on worker 0");
        assert_eq!(got1, vec![(5, reg.id())], "round {round}");
        assert_eq!(drain(&*reg), b"p");
    }
}

#[test]
fn a_registry_clone_works_from_another_thread() {
    assert_send_sync::<Registry>();
    assert_send_sync::<Registered<TcpStream>>();
    let _g = serial();
    let skq = instance(1);
    let mut w = skq.worker(0);
    // The worker blocks in epoll_wait on its own thread while another thread
    // registers through a clone.
    let waiter = thread::spawn(move || {
        let got = wait(&mut w, ARRIVES);
        (w, got)
    });
    let (mut client, server) = tcp_pair();
    let registry = skq.registry().clone();
    let reg = thread::spawn(move || {
        registry
            .register(server, 8, Interest::READABLE, Flags::NONE)
            .unwrap()
    })
    .join()
    .unwrap();
    client.write_all(b"t").unwrap();
    let (mut w, got) = waiter.join().unwrap();
    assert_eq!(got, vec![(8, reg.id())]);
    assert_eq!(drain(&*reg), b"t");

    // Dropped on yet another thread: deregistered there.
    let id = reg.id();
    thread::spawn(move || drop(reg)).join().unwrap();
    assert_eq!(skq.core().phase(id), Phase::Free);
    let _ = client.write_all(b"u");
    assert_eq!(wait(&mut w, QUIET), vec![]);
}

#[test]
fn dropping_a_handle_while_its_event_is_processed_drops_the_redelivery() {
    let _g = serial();
    let skq = instance(1);
    let mut w = skq.worker(0);
    let (mut tx, rx) = unix_pair();
    let reg = skq
        .registry()
        .register(rx, 6, Interest::READABLE, Flags::NONE)
        .unwrap();
    let id = reg.id();
    tx.write_all(b"1").unwrap();
    let mut events = Events::with_capacity(4);
    assert_eq!(w.wait(&mut events, Some(ARRIVES)).unwrap(), 1);
    // The handler stops early and more data arrives: both ask for a
    // redelivery after release...
    w.still_ready(events.iter().next().unwrap());
    tx.write_all(b"2").unwrap();
    assert_eq!(skq.core().phase(id), Phase::BusyPending);
    // ...but the handler drops the registration first.
    drop(reg);
    assert_eq!(skq.core().phase(id), Phase::Free);
    assert_eq!(wait(&mut w, QUIET), vec![], "no redelivery");
}

#[test]
fn a_user_event_deregisters_on_drop_and_close_still_works() {
    let _g = serial();
    let skq = instance(1);
    let mut w = skq.worker(0);
    let ue = skq.user_event(9, Flags::NONE).unwrap();
    let id = ue.source();
    ue.notify().unwrap();
    assert_eq!(wait(&mut w, ARRIVES), vec![(9, id)]);
    assert_eq!(ue.reset(), 1);
    ue.notify().unwrap();
    drop(ue);
    assert_eq!(skq.core().phase(id), Phase::Free);
    assert_eq!(wait(&mut w, QUIET), vec![]);

    let ue = skq.user_event(10, Flags::NONE).unwrap();
    let id = ue.source();
    ue.close(&skq).unwrap();
    assert_eq!(skq.core().phase(id), Phase::Free);
}
