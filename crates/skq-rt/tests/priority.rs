//! Priority classes through the runtime: harvest and delivery order, and
//! a class that falls back.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use skq_rt::{Class, Config, Events, Flags, Interest, Policy, Skq};

#[test]
fn a_high_source_ready_after_regular_ones_is_delivered_first_then_drops_back() {
    for policy in [Policy::Vanilla, Policy::Shared, Policy::Hybrid] {
        let skq = Skq::new(Config::new(policy, 1)).unwrap();
        let mut pairs = Vec::new();
        let mut ids = Vec::new();
        for token in 0..6u64 {
            let (tx, rx) = UnixStream::pair().unwrap();
            rx.set_nonblocking(true).unwrap();
            let id = skq
                .register(rx.as_raw_fd(), token, Interest::READABLE, Flags::NONE, None)
                .unwrap();
            ids.push(id);
            pairs.push((tx, rx));
        }
        assert!(skq.set_class(ids[5], Class::High).unwrap());
        assert!(!skq.set_class(ids[5], Class::High).unwrap(), "no change");
        for (tx, _) in pairs.iter_mut() {
            tx.write_all(b"x").unwrap();
        }
        let mut worker = skq.worker(0);
        let mut events = Events::with_capacity(1);
        let timeout = Some(Duration::from_secs(5));
        assert_eq!(worker.wait(&mut events, timeout).unwrap(), 1);
        let ev = *events.iter().next().unwrap();
        assert_eq!((ev.token, ev.high), (5, true), "{policy}");
        let mut rest = Vec::new();
        for _ in 0..5 {
            assert_eq!(worker.wait(&mut events, timeout).unwrap(), 1);
            rest.push(events.iter().next().unwrap().token);
        }
        rest.sort_unstable();
        assert_eq!(rest, vec![0, 1, 2, 3, 4], "every source exactly once");
        // The level falls back: the next readiness of source 5 is regular.
        let _ = skq.set_class(ids[5], Class::Regular).unwrap();
        worker.release();
        pairs[5].0.write_all(b"y").unwrap();
        assert_eq!(worker.wait(&mut events, timeout).unwrap(), 1);
        let ev = *events.iter().next().unwrap();
        assert_eq!((ev.token, ev.high), (5, false), "{policy}");
        worker.release();
        for ((_, rx), id) in pairs.iter().zip(&ids) {
            skq.deregister(*id, rx.as_raw_fd()).unwrap();
        }
    }
}
