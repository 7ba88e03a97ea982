//! Priority through a real skq server: requests classified by the
//! protocol's classifier callback, connections whose level follows their
//! requests, and diffusion keeping batch requests off reserved workers.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::Duration;

use skq_net::classify::{Class, Classifier, Prefixes};
use skq_net::{Cx, Driver, Protocol, Served, Server, ServerConfig};

/// Lines `<kind><conn>:<seq>\n`, kind `B` batch, `H` high, `R` regular;
/// the reply echoes the line. Records which worker served which class.
struct Lines {
    classes: Prefixes,
    served: Mutex<Vec<(usize, Class, u8)>>,
}

impl Protocol for Lines {
    type Session = ();

    fn open(&self, _worker: usize) {}

    fn serve(&self, _: &mut (), input: &[u8], out: &mut Vec<u8>, cx: &mut Cx<'_>) -> Served {
        let Some(end) = input.iter().position(|&b| b == b'\n') else {
            return Served::NeedInput { consumed: 0 };
        };
        self.served
            .lock()
            .unwrap()
            .push((cx.worker(), cx.class(), input[0]));
        std::thread::sleep(Duration::from_micros(if input[0] == b'B' {
            300
        } else {
            20
        }));
        out.extend_from_slice(&input[..=end]);
        Served::Request { consumed: end + 1 }
    }

    fn classifier(&self) -> Option<&dyn Classifier> {
        Some(&self.classes)
    }
}

fn lines() -> Lines {
    Lines {
        classes: Prefixes::new(vec![
            (b"B".to_vec(), Class::Batch),
            (b"H".to_vec(), Class::High),
        ])
        .unwrap(),
        served: Mutex::new(Vec::new()),
    }
}

#[test]
fn with_diffusion_batch_requests_run_only_on_batch_workers_none_lost_or_reordered() {
    for mode in ["hybrid", "best2+steal", "vanilla"] {
        let mut cfg = ServerConfig::with_mode(mode.parse().unwrap(), 3);
        cfg.sched.batch_workers = vec![2];
        let proto = std::sync::Arc::new(lines());
        let server = Server::start(&cfg, proto.clone()).unwrap();
        let addr = server.local_addr();
        let clients: Vec<_> = (0..6)
            .map(|c| {
                std::thread::spawn(move || {
                    let s = TcpStream::connect(addr).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    let mut w = s.try_clone().unwrap();
                    let mut r = BufReader::new(s);
                    let mut seq = 0;
                    for round in 0..15 {
                        // A pipelined burst mixing the three classes, then
                        // one request at a time.
                        let mut burst = String::new();
                        let kinds = ["B", "R", "H", "B", "H", "R"];
                        for k in 0..(1 + (round + c) % 6) {
                            burst.push_str(&format!("{}{c}:{seq}\n", kinds[(k + c) % 6]));
                            seq += 1;
                        }
                        w.write_all(burst.as_bytes()).unwrap();
                        for want in burst.lines() {
                            let mut got = String::new();
                            r.read_line(&mut got).unwrap();
                            assert_eq!(got.trim_end(), want, "in order, exactly once");
                        }
                    }
                    seq
                })
            })
            .collect();
        let sent: u64 = clients.into_iter().map(|t| t.join().unwrap()).sum();
        let stats = server.shutdown();
        assert_eq!(stats.requests, sent);
        let served = proto.served.lock().unwrap();
        assert_eq!(served.len() as u64, sent);
        for &(w, class, kind) in served.iter() {
            let want = match kind {
                b'B' => Class::Batch,
                b'H' => Class::High,
                _ => Class::Regular,
            };
            assert_eq!(class, want, "the callback classified the request");
            if class == Class::Batch {
                assert_eq!(w, 2, "{mode}: a batch request ran on reserved worker {w}");
            }
        }
        assert!(served.iter().any(|&(w, _, _)| w != 2), "{mode}");
    }
}

#[test]
fn other_drivers_refuse_diffusion_and_ignore_nothing_silently() {
    let mut cfg = ServerConfig::new(Driver::Tokio, 2);
    cfg.sched.batch_workers = vec![1];
    let e = cfg.validate().unwrap_err().to_string();
    assert!(e.contains("--batch-workers needs the skq driver"), "{e}");
    let mut cfg = ServerConfig::new(Driver::Skq, 2);
    cfg.sched.batch_workers = vec![2];
    assert!(cfg.validate().unwrap_err().to_string().contains("worker 2"));
}
