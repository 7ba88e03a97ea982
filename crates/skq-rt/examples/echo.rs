//! A small echo server on the typed registration API, with a built-in client
//! so that it runs to completion on its own (a CI smoke test).
//!
//! The listener and every connection are `Registered<_>` handles: the
//! listener is registered through the registry with token 0; each accepted
//! connection is registered by the accepting worker (`Worker::register`) and
//! kept in a table keyed by its token. Closing a connection is removing it
//! from the table: the handle's drop deregisters the socket, then closes it.
//!
//! `cargo run -p skq-rt --example echo [workers] [clients] [messages]`
//! (defaults 2, 8, 50). Exits 0 once every client got every echo back.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use skq_rt::{Config, Event, Events, Flags, Interest, Policy, Registered, Skq, Worker};

const LISTENER: u64 = 0;

/// One connection: the registered socket and the bytes not yet echoed.
/// A source is never handed to two workers at once, so `out` is never
/// contended; the mutex only makes `Conn` shareable.
struct Conn {
    sock: Registered<TcpStream>,
    out: Mutex<Vec<u8>>,
}

/// What the workers share.
struct Server {
    listener: Registered<TcpListener>,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Tokens are never reused, so an event that was already delivered when
    /// its connection was removed can only miss in the table, never hit a
    /// newer connection.
    next_token: AtomicU64,
}

fn main() -> io::Result<()> {
    let arg = |i: usize, default: usize| -> usize {
        std::env::args()
            .nth(i)
            .map(|a| {
                a.parse()
                    .expect("usage: echo [workers] [clients] [messages]")
            })
            .unwrap_or(default)
    };
    let (workers, clients, messages) = (arg(1, 2), arg(2, 8), arg(3, 50));

    let skq = Skq::new(Config::new(Policy::Hybrid, workers)).map_err(io::Error::other)?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let server = Arc::new(Server {
        listener: skq
            .registry()
            .register(listener, LISTENER, Interest::READABLE, Flags::NONE)?,
        conns: Mutex::new(HashMap::new()),
        next_token: AtomicU64::new(LISTENER + 1),
    });

    let pool: Vec<_> = (0..workers)
        .map(|w| {
            let worker = skq.worker(w);
            let server = server.clone();
            thread::spawn(move || serve(worker, &server))
        })
        .collect();

    let echoed = run_clients(addr, clients, messages);
    skq.shutdown();
    for t in pool {
        t.join().expect("worker panicked")?;
    }
    let left = server.conns.lock().unwrap().len();
    println!(
        "echo: {workers} workers, {clients} clients x {messages} messages, {echoed} bytes echoed ({left} connections not yet closed at shutdown)"
    );
    // Dropping the server drops every handle: deregister, then close.
    Ok(())
}

/// One worker's loop, until shutdown.
fn serve(mut worker: Worker, server: &Server) -> io::Result<()> {
    let mut events = Events::with_capacity(64);
    while worker.wait(&mut events, None)? > 0 {
        for ev in &events {
            if ev.token == LISTENER {
                accept(&worker, server)?;
            } else {
                let conn = server.conns.lock().unwrap().get(&ev.token).cloned();
                // None: the connection was closed after this event was queued.
                if let Some(conn) = conn {
                    if !echo(&conn, ev) {
                        server.conns.lock().unwrap().remove(&ev.token);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Accepts until `EAGAIN`; the accepting worker is each connection's
/// registrar.
fn accept(worker: &Worker, server: &Server) -> io::Result<()> {
    loop {
        let stream = match server.listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        };
        stream.set_nonblocking(true)?;
        let token = server.next_token.fetch_add(1, Ordering::Relaxed);
        // Register under the table lock: another worker may get the new
        // connection's first event at once, and must find it in the table.
        let mut conns = server.conns.lock().unwrap();
        let sock = worker.register(
            stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
            Flags::NONE,
        )?;
        let conn = Conn {
            sock,
            out: Mutex::new(Vec::new()),
        };
        conns.insert(token, Arc::new(conn));
    }
}

/// Reads until `EAGAIN`, writes back what it can, keeps the rest for the
/// next writable edge. Returns false when the connection is done.
fn echo(conn: &Conn, ev: &Event) -> bool {
    let mut out = conn.out.lock().unwrap();
    let mut sock: &TcpStream = &conn.sock;
    if ev.ready.is_readable() {
        let mut buf = [0u8; 4096];
        loop {
            match sock.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
    while !out.is_empty() {
        match sock.write(&out) {
            Ok(n) => {
                out.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// Blocking clients, one thread each: send messages of growing size, check
/// each echo, close. Returns the bytes echoed; panics on a wrong echo or
/// after 10 s without progress.
fn run_clients(addr: SocketAddr, clients: usize, messages: usize) -> u64 {
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            thread::spawn(move || {
                let mut s = TcpStream::connect(addr).expect("connect");
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut total = 0u64;
                for m in 0..messages {
                    let msg: Vec<u8> = (0..1 + m * 97).map(|i| (c * 31 + m + i) as u8).collect();
                    s.write_all(&msg).expect("send");
                    let mut back = vec![0u8; msg.len()];
                    s.read_exact(&mut back).expect("echo");
                    assert_eq!(back, msg, "client {c} message {m}");
                    total += msg.len() as u64;
                }
                total
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("client failed"))
        .sum()
}
