//! TCP on loopback: echo with many connections, connect errors, the
//! futures-io and tokio traits.

use std::io;

use skq_async::net::{TcpListener, TcpStream};
use skq_async::Builder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn echo_server(l: TcpListener, conns: usize) -> io::Result<usize> {
    let mut hs = Vec::new();
    for _ in 0..conns {
        let (mut s, _) = l.accept().await?;
        hs.push(skq_async::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut total = 0usize;
            loop {
                let n = s.read(&mut buf).await?;
                if n == 0 {
                    s.shutdown().await?;
                    return Ok::<_, io::Error>(total);
                }
                s.write_all(&buf[..n]).await?;
                total += n;
            }
        }));
    }
    let mut total = 0;
    for h in hs {
        total += h.await.unwrap()?;
    }
    Ok(total)
}

fn payload(conn: usize, msg: usize) -> Vec<u8> {
    // Sizes from 1 byte to 200 KiB, so some writes hit EAGAIN.
    let len = 1 + (conn * 7919 + msg * 104_729) % (200 * 1024);
    (0..len).map(|i| (i ^ conn ^ msg) as u8).collect()
}

#[test]
fn echo_many_connections() {
    const CONNS: usize = 64;
    const MSGS: usize = 8;
    for mode in ["hybrid", "best2", "shared"] {
        let rt = Builder::new().workers(2).mode(mode).build().unwrap();
        let (served, sent) = rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let server = skq_async::spawn(echo_server(l, CONNS));
            let clients: Vec<_> = (0..CONNS)
                .map(|c| {
                    skq_async::spawn(async move {
                        let s = TcpStream::connect(addr).await?;
                        s.set_nodelay(true)?;
                        // Writer and reader in two tasks: a large message
                        // does not fit the socket buffers.
                        let (mut rd, mut wr) = s.into_split();
                        let writer = skq_async::spawn(async move {
                            for m in 0..MSGS {
                                wr.write_all(&payload(c, m)).await?;
                            }
                            wr.shutdown().await?;
                            Ok::<_, io::Error>(())
                        });
                        let mut sent = 0;
                        for m in 0..MSGS {
                            let p = payload(c, m);
                            let mut back = vec![0u8; p.len()];
                            rd.read_exact(&mut back).await?;
                            assert!(back == p, "connection {c} message {m} corrupted");
                            sent += p.len();
                        }
                        writer.await.unwrap()?;
                        let mut rest = Vec::new();
                        rd.read_to_end(&mut rest).await?;
                        assert!(rest.is_empty());
                        Ok::<_, io::Error>(sent)
                    })
                })
                .collect();
            let mut sent = 0;
            for c in clients {
                sent += c.await.unwrap().unwrap();
            }
            (server.await.unwrap().unwrap(), sent)
        });
        assert_eq!(served, sent, "mode {mode}");
    }
}

#[test]
fn connect_to_a_closed_port_fails() {
    let rt = Builder::new().workers(1).build().unwrap();
    rt.block_on(async {
        // Bind then drop to get a port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = TcpStream::connect(("127.0.0.1", port)).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    });
}

#[test]
fn futures_io_round_trip_with_a_std_peer() {
    use futures_io::{AsyncRead, AsyncWrite};
    use std::io::{Read, Write};
    use std::pin::Pin;
    let rt = Builder::new().workers(2).build().unwrap();
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut c, _) = std_listener.accept().unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).unwrap();
        c.write_all(&buf).unwrap();
        buf
    });
    let back = rt.block_on(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut sent = 0;
        while sent < 5 {
            sent += std::future::poll_fn(|cx| Pin::new(&mut s).poll_write(cx, &b"hello"[sent..]))
                .await
                .unwrap();
        }
        let mut buf = [0u8; 5];
        let mut got = 0;
        while got < 5 {
            got += std::future::poll_fn(|cx| Pin::new(&mut s).poll_read(cx, &mut buf[got..]))
                .await
                .unwrap();
        }
        std::future::poll_fn(|cx| Pin::new(&mut s).poll_close(cx))
            .await
            .unwrap();
        buf
    });
    assert_eq!(&back, b"hello");
    assert_eq!(&peer.join().unwrap(), b"hello");
}

#[test]
fn io_objects_need_a_runtime() {
    let e = TcpStream::from_std(
        std::net::TcpStream::connect(
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap(),
        )
        .unwrap(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("not inside an skq-async runtime"));
}

#[test]
fn tokio_util_codec_round_trip() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_util::codec::{Framed, LinesCodec};
    let rt = Builder::new().workers(2).build().unwrap();
    let lines = rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = skq_async::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let mut f = Framed::new(s, LinesCodec::new());
            let mut n = 0;
            while let Some(line) = f.next().await {
                f.send(line.unwrap().to_uppercase()).await.unwrap();
                n += 1;
            }
            n
        });
        let mut c = Framed::new(TcpStream::connect(addr).await.unwrap(), LinesCodec::new());
        let mut back = Vec::new();
        for i in 0..200 {
            c.send(format!("line {i}")).await.unwrap();
            back.push(c.next().await.unwrap().unwrap());
        }
        c.get_mut().shutdown_write().unwrap();
        assert!(c.next().await.is_none());
        assert_eq!(server.await.unwrap(), 200);
        back
    });
    assert_eq!(lines.len(), 200);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l, &format!("LINE {i}"));
    }
}

#[test]
fn a_task_whose_io_is_always_ready_yields_to_the_others() {
    // One worker. The reader's socket is at end of stream, so every read is
    // ready at once: without the poll budget it would never give the worker
    // back and the other task could not run.
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let rt = Builder::new().workers(1).build().unwrap();
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || drop(std_listener.accept().unwrap()));
    let (started, flag) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (st, f) = (started.clone(), flag.clone());
    let reader = rt.spawn(async move {
        let s = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(s.read(&mut buf).await.unwrap(), 0);
        st.store(true, Ordering::SeqCst);
        for i in 0..1_000_000u32 {
            if f.load(Ordering::SeqCst) {
                return Some(i);
            }
            assert_eq!(s.read(&mut buf).await.unwrap(), 0);
        }
        None
    });
    while !started.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    let setter = rt.spawn(async move { flag.store(true, Ordering::SeqCst) });
    rt.block_on(async {
        setter.await.unwrap();
        assert!(reader.await.unwrap().is_some(), "the reader never yielded");
    });
    peer.join().unwrap();
}

#[test]
fn a_stream_carries_a_priority_class_for_its_readiness() {
    use skq_async::Class;
    let rt = Builder::new().workers(2).mode("hybrid").build().unwrap();
    rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let server = skq_async::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            assert_eq!(s.class(), Class::Regular);
            // A high-priority connection: its socket's events and the task
            // both go high; the echo still works.
            assert!(s.set_class(Class::High).unwrap());
            assert!(skq_async::set_class(Class::High));
            assert_eq!(s.class(), Class::High);
            assert!(!s.set_class(Class::High).unwrap(), "unchanged");
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
            assert_eq!(skq_async::current_class(), Some(Class::High));
            assert!(s.set_class(Class::Regular).unwrap());
            assert_eq!(s.class(), Class::Regular);
        });
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"hello").await.unwrap();
        let mut back = [0u8; 5];
        c.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"hello");
        server.await.unwrap();
    });
}

/// Round trips of one byte between a std client thread and an echo task on
/// a runtime of `workers` in `mode`; returns the events skq delivered.
fn deliveries_for_round_trips(workers: usize, mode: &str, trips: usize) -> u64 {
    use std::io::{Read, Write};
    let rt = Builder::new().workers(workers).mode(mode).build().unwrap();
    let l = rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind on loopback");
    let addr = l.local_addr().unwrap();
    let server = rt.spawn(async move {
        let (s, _) = l.accept().await?;
        let mut buf = [0u8; 64];
        let mut echoed = 0usize;
        loop {
            let n = s.read(&mut buf).await?;
            if n == 0 {
                return Ok::<_, io::Error>(echoed);
            }
            s.write_all(&buf[..n]).await?;
            echoed += n;
        }
    });
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    // Let the accept's events settle before counting.
    c.write_all(&[0]).unwrap();
    c.read_exact(&mut [0u8; 1]).unwrap();
    let before: u64 = rt.handle().skq().stats().iter().map(|w| w.delivered).sum();
    for i in 0..trips {
        let b = [(i % 251) as u8];
        c.write_all(&b).unwrap();
        let mut back = [0u8; 1];
        c.read_exact(&mut back).unwrap();
        assert_eq!(back, b, "round trip {i}");
    }
    let after: u64 = rt.handle().skq().stats().iter().map(|w| w.delivered).sum();
    drop(c);
    assert_eq!(rt.block_on(server).unwrap().unwrap(), trips + 1);
    after - before
}

#[test]
fn a_task_woken_by_its_socket_runs_within_the_event_when_it_would_run_next() {
    // Each round trip is one readable event on the server's socket. When
    // skq would deliver the task it wakes next anyway (a lone worker, or
    // the batch's last event under a locality policy, with nothing queued),
    // the task runs within that event: one delivery per round trip rather
    // than two (the event, then the task's own). Under `shared` with two
    // workers the woken task goes through skq's queue, as the policy may
    // give it to the other worker (some of the socket's events coalesce
    // there, so fewer than two per round trip, but well above one).
    const TRIPS: usize = 200;
    for (workers, mode) in [(1, "hybrid"), (1, "shared"), (2, "hybrid"), (2, "cpu")] {
        let d = deliveries_for_round_trips(workers, mode, TRIPS);
        assert!(
            d <= (TRIPS + TRIPS / 10) as u64,
            "{workers} workers, {mode}: {d} deliveries for {TRIPS} round trips"
        );
    }
    let d = deliveries_for_round_trips(2, "shared", TRIPS);
    assert!(
        d >= (TRIPS + TRIPS / 4) as u64,
        "2 workers, shared: {d} deliveries for {TRIPS} round trips"
    );
}
