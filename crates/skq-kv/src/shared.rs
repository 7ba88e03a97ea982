//! The shared architecture: one store for all workers, split into lock shards by
//! MurmurHash3 of the key, so any worker can serve any connection.
//!
//! The cache's protocol is a sans-I/O [`KvProtocol`] of the server layer
//! (`skq-net`), so every driver serves it (`--mode`): the skq runtime in any
//! scheduling mode (`vanilla`, `shared`, `queue`, `cpu`, `best2`, `hybrid`,
//! `+steal`), and the baselines without skq: `epoll-1to1` (memcached's own
//! model), `epoll-shared` (one epoll set, `EPOLLONESHOT` + re-arm; `epoll` is
//! its older name) and `tokio`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use skq_net::{Close, Cx, Protocol, Served, Server};

use crate::arena::ValueRef;
use crate::config::{KvMode, ServerConfig};
use crate::ctx::Ctx;
use crate::exec::{apply, flush_delay, get_one_within};
use crate::murmur3::murmur3_x86_32;
use crate::protocol::{Command, Parser, Step};
use crate::recycle;
use crate::reply::{value_charge, ValueSink, ZERO_COPY_MIN};
use crate::running::{Running, Workers};
use crate::store::{PartStats, Partition};

/// Reads a large value may need: the largest item plus the longest line.
const READ_SLACK: usize = 64 << 10;

/// The server layer's configuration for the cache's `--mode` and limits.
pub fn net_config(cfg: &ServerConfig) -> Result<skq_net::ServerConfig, String> {
    let KvMode::Shared(mode) = cfg.mode else {
        return Err(format!("mode `{}` is not the shared store's", cfg.mode));
    };
    let mut c = skq_net::ServerConfig::with_mode(mode, cfg.workers);
    c.addr = cfg.addr;
    c.pin = cfg.pin;
    c.max_conns = cfg.max_conns;
    // The cache answers many small requests per event: take a batch of
    // events per wait, as memcached does.
    c.sched.batch = 64;
    c.sched.batch_workers = cfg.batch_workers.clone();
    cfg.sched.apply(&mut c.sched);
    // memcached's idle_timeout: between commands, and while a command is partly
    // received (memcached closes a partial command line too); never while replies wait
    // for the client to read them (no send limit).
    c.timeouts.idle = cfg.idle_timeout;
    c.timeouts.request = cfg.idle_timeout;
    Ok(c)
}

/// Starts the shared-architecture server on the driver `cfg.mode` names.
pub fn start(cfg: ServerConfig) -> anyhow::Result<Running> {
    let net = net_config(&cfg)
        .and_then(|n| n.validate().map(|()| n).map_err(|e| e.to_string()))
        .map_err(|e| anyhow::anyhow!("--mode {}: {e}", cfg.mode))?;
    let rules = cfg.priority.clone();
    let store = SharedStore::new(cfg.limit_bytes, cfg.limits.max_item_size);
    let workers = cfg.workers;
    let ctx = Arc::new(Ctx::new(cfg));
    let proto = Arc::new(KvProtocol {
        ctx: ctx.clone(),
        store,
        rules: (!rules.is_empty()).then_some(rules),
    });
    let handle = Server::start(&net, proto)
        .map_err(|e| anyhow::anyhow!("--addr {}: cannot serve: {e}", net.addr))?;
    ctx.idle_conn_bytes.store(
        handle.stats().memory.idle_conn_bytes as usize,
        Ordering::Relaxed,
    );
    Ok(Running {
        addr: handle.local_addr(),
        ctx,
        workers: Workers::Net(handle),
        accepted: Arc::new(
            (0..workers)
                .map(|_| crossbeam_utils::CachePadded::new(Default::default()))
                .collect(),
        ),
        tick: None,
    })
}

pub use crate::config::MIN_SHARD_BYTES;
const MAX_SHARDS: usize = 16;

/// The store: partitions behind mutexes.
pub struct SharedStore {
    shards: Vec<Mutex<Partition>>,
}

impl SharedStore {
    /// Splits `limit_bytes` into up to 16 shards of at least [`MIN_SHARD_BYTES`], each
    /// enforcing the item size limit `max_item_size` on append/prepend.
    pub fn new(limit_bytes: usize, max_item_size: usize) -> SharedStore {
        let n = (limit_bytes / (2 * MIN_SHARD_BYTES)).clamp(1, MAX_SHARDS);
        SharedStore {
            shards: (0..n)
                .map(|_| Mutex::new(Partition::new(limit_bytes / n).with_max_item(max_item_size)))
                .collect(),
        }
    }

    /// The shard owning `key`, locked.
    pub fn lock(&self, key: &[u8]) -> MutexGuard<'_, Partition> {
        let i = murmur3_x86_32(key, 0) as usize % self.shards.len();
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of lock shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Every shard's counters and the mean overhead per item.
    pub fn stats(&self) -> (Vec<PartStats>, f64) {
        let mut parts = Vec::new();
        let mut overhead = 0.0;
        for s in &self.shards {
            let p = s.lock().unwrap_or_else(|p| p.into_inner());
            parts.push(p.stats());
            overhead += p.overhead_per_item();
        }
        (parts, overhead / self.shards.len() as f64)
    }

    /// `flush_all` on every shard.
    pub fn flush_all(&self, delay: u32, now: u32) {
        for s in &self.shards {
            s.lock()
                .unwrap_or_else(|p| p.into_inner())
                .flush_all(delay, now);
        }
    }
}

/// A multi-key retrieval answered in part: the keys from `next` on are still due.
#[derive(Debug)]
pub struct PendingGet {
    keys: Vec<Vec<u8>>,
    next: usize,
    cas: bool,
    touch: Option<i64>,
}

/// Per-connection state of the shared architecture: the parser and the retrieval paused
/// at the output ceiling ([`crate::protocol::Limits::max_conn_output`]).
pub struct KvSession {
    parser: Parser,
    get: Option<PendingGet>,
}

/// Where the shared architecture writes a `get` reply: the connection's output buffer,
/// with each value of [`ZERO_COPY_MIN`] bytes or more handed to the connection as a
/// shared region ([`Cx::send_shared`]) instead of copied, so it goes from the store's
/// segment to the socket.
struct ConnSink<'o, 'c, 'x> {
    out: &'o mut Vec<u8>,
    cx: &'c mut Cx<'x>,
}

impl ValueSink for ConnSink<'_, '_, '_> {
    fn bytes_mut(&mut self) -> &mut Vec<u8> {
        self.out
    }
    fn push_value(&mut self, v: ValueRef) {
        let charge = value_charge(v.len());
        self.cx
            .send_shared(self.out.len(), bytes::Bytes::from_owner(v), charge);
    }
    fn references(&self, len: usize) -> bool {
        len >= ZERO_COPY_MIN
    }
    fn charge(&self) -> usize {
        self.out.len() + self.cx.shared_charge()
    }
    fn value_charge(&self, len: usize) -> usize {
        value_charge(len)
    }
}

/// Answers the keys of `g` still due while the connection's output (its buffer and its
/// shared regions) stays under its output ceiling (the first key of a call whatever its
/// size, so each call makes progress), then `END`. Returns whether the retrieval is
/// complete.
pub fn continue_get(
    ctx: &Ctx,
    store: &SharedStore,
    cx: &mut Cx<'_>,
    g: &mut PendingGet,
    out: &mut Vec<u8>,
) -> bool {
    let worker = cx.worker();
    let c = &ctx.counters[worker];
    let now = ctx.now();
    let limit = ctx.cfg.limits.max_conn_output;
    let mut out = ConnSink { out, cx };
    let mut force = true;
    while let Some(k) = g.keys.get(g.next) {
        let fit = get_one_within(
            &mut store.lock(k),
            k,
            g.cas,
            g.touch,
            now,
            c,
            &mut out,
            limit,
            force,
        );
        if fit.is_err() {
            return false;
        }
        force = false;
        g.next += 1;
    }
    out.out.extend_from_slice(b"END\r\n");
    true
}

/// Executes one command against the shared store, writing its reply to `out`. A
/// retrieval that reached the output ceiling comes back unfinished
/// (see [`continue_get`]).
pub fn execute(
    ctx: &Ctx,
    store: &SharedStore,
    cx: &mut Cx<'_>,
    cmd: Command,
    out: &mut Vec<u8>,
) -> Option<PendingGet> {
    let c = &ctx.counters[cx.worker()];
    let now = ctx.now();
    match cmd {
        Command::Get { keys, cas, touch } => {
            let mut g = PendingGet {
                keys,
                next: 0,
                cas,
                touch,
            };
            if !continue_get(ctx, store, cx, &mut g, out) {
                return Some(g);
            }
            recycle::give_keys(g.keys);
        }
        Command::FlushAll { delay, noreply } => {
            c.cmd_flush.fetch_add(1, Ordering::Relaxed);
            store.flush_all(flush_delay(delay, now), now.rel);
            if !noreply {
                out.extend_from_slice(b"OK\r\n");
            }
        }
        cmd => {
            if !ctx.keyless(out, &cmd, || store.stats()) {
                let key = cmd.key().expect("remaining commands carry one key");
                apply(&mut store.lock(key), &cmd, now, c, out);
            }
            recycle::give(cmd);
        }
    }
    None
}

/// The memcached text protocol over the shared store.
pub struct KvProtocol {
    /// Server state (configuration, memcached's counters).
    pub ctx: Arc<Ctx>,
    /// The store.
    pub store: SharedStore,
    /// Priority rules, the classifier callback (`--priority`).
    pub rules: Option<crate::priority::Rules>,
}

impl Protocol for KvProtocol {
    type Session = KvSession;

    fn open(&self, worker: usize) -> KvSession {
        let c = &self.ctx.counters[worker];
        c.total_connections.fetch_add(1, Ordering::Relaxed);
        self.ctx.curr_conns.fetch_add(1, Ordering::Relaxed);
        KvSession {
            parser: Parser::new(self.ctx.cfg.limits),
            get: None,
        }
    }

    /// One request, or the next slice of a retrieval paused at the output ceiling
    /// (reported as a request that consumed no input: the connection layer then writes
    /// what is pending before it serves again, and stops while the peer reads nothing).
    fn serve(
        &self,
        session: &mut KvSession,
        input: &[u8],
        out: &mut Vec<u8>,
        cx: &mut Cx<'_>,
    ) -> Served {
        let w = cx.worker();
        let c = &self.ctx.counters[w];
        if let Some(mut g) = session.get.take() {
            let before = out.len();
            if continue_get(&self.ctx, &self.store, cx, &mut g, out) {
                recycle::give_keys(g.keys);
            } else {
                session.get = Some(g);
            }
            c.bytes_written
                .fetch_add((out.len() - before) as u64, Ordering::Relaxed);
            return Served::Request { consumed: 0 };
        }
        let parser = &mut session.parser;
        let mut consumed = 0;
        let served = loop {
            let (n, step) = parser.parse(&input[consumed..]);
            consumed += n;
            match step {
                Step::NeedMore => break Served::NeedInput { consumed },
                // A swallowed data block or a silent error: parse on.
                Step::Skip => {}
                Step::Reply(msg) => {
                    out.extend_from_slice(msg);
                    break Served::Request { consumed };
                }
                Step::Close(reason) => {
                    out.extend_from_slice(reason.message());
                    c.skq_protocol_closes.fetch_add(1, Ordering::Relaxed);
                    break Served::Close {
                        consumed,
                        why: Close::Protocol,
                    };
                }
                Step::Command(Command::Quit) => {
                    break Served::Close {
                        consumed,
                        why: Close::Eof,
                    };
                }
                Step::Command(cmd) => {
                    let before = out.len();
                    session.get = execute(&self.ctx, &self.store, cx, cmd, out);
                    c.bytes_written
                        .fetch_add((out.len() - before) as u64, Ordering::Relaxed);
                    break Served::Request { consumed };
                }
            }
        };
        c.bytes_read.fetch_add(consumed as u64, Ordering::Relaxed);
        served
    }

    fn close(&self, _session: KvSession, _worker: usize) {
        self.ctx.curr_conns.fetch_sub(1, Ordering::Relaxed);
    }

    /// Only `--idle-timeout` sets timeouts (idle and request), so every timed-out
    /// connection is an idle kick.
    fn timed_out(&self, worker: usize) {
        self.ctx.counters[worker]
            .idle_kicks
            .fetch_add(1, Ordering::Relaxed);
    }

    fn rejected(&self, worker: usize) {
        self.ctx.counters[worker]
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
    }

    fn rejected_fd_limit(&self, worker: usize) {
        self.rejected(worker);
        self.ctx.counters[worker]
            .skq_rejected_fd_limit
            .fetch_add(1, Ordering::Relaxed);
    }

    fn busy_message(&self) -> &'static [u8] {
        b"ERROR Too many open connections\r\n"
    }

    fn classifier(&self) -> Option<&dyn skq_net::classify::Classifier> {
        self.rules
            .as_ref()
            .map(|r| r as &dyn skq_net::classify::Classifier)
    }

    /// Pipelined cache requests are cheap: write their replies once per batch.
    fn flush_each(&self) -> bool {
        false
    }

    fn read_limit(&self) -> usize {
        let l = self.ctx.cfg.limits;
        l.max_item_size + l.max_get_line + READ_SLACK
    }
}
