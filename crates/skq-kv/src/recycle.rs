//! Thread-local recycling of the buffers a parsed [`Command`] owns (keys, values, a
//! `get`'s key list, meta flag lists), so a steady stream of requests allocates nothing
//! per request once the thread has served a few.
//!
//! Commands own their bytes because a thread-per-core command may travel to another
//! worker. The parsers take those buffers from this module ([`bytes_from`], [`key_bytes`],
//! [`key_list`], [`meta_toks`]) and the executors hand a finished command back
//! ([`give`], [`give_keys`]). A command dropped elsewhere simply frees its buffers: that
//! is correct, only not recycled.
//!
//! Invariants (memory bound): the spares are per thread, never per connection, so an idle
//! connection holds none of them. Each thread keeps at most [`MAX_KEYS`] key buffers of at
//! most [`KEY_CAPACITY`] bytes, [`MAX_VALUES`] value buffers of at most [`VALUE_CAPACITY`]
//! bytes, [`MAX_LISTS`] key lists of at most [`LIST_CAPACITY`] entries and [`MAX_LISTS`]
//! meta flag lists of at most [`LIST_CAPACITY`] entries; anything larger, or beyond those
//! counts, is freed. A buffer is always handed out empty (cleared), so no request sees
//! another's bytes.

use std::cell::RefCell;

use crate::command::{Command, MetaTok, MAX_KEY_LEN};

/// Key buffers (keys, decoded keys, `O` opaques) a thread keeps.
pub const MAX_KEYS: usize = 64;
/// Largest key buffer kept (a key is at most [`MAX_KEY_LEN`] bytes).
pub const KEY_CAPACITY: usize = MAX_KEY_LEN + 6;
/// Value buffers a thread keeps.
pub const MAX_VALUES: usize = 8;
/// Largest value buffer kept; larger values allocate per request.
pub const VALUE_CAPACITY: usize = 4 << 10;
/// Key lists and meta flag lists a thread keeps (each kind).
pub const MAX_LISTS: usize = 4;
/// Most entries of a kept list; a longer multi-key `get` allocates its list.
pub const LIST_CAPACITY: usize = 64;

struct Spare {
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u8>>,
    lists: Vec<Vec<Vec<u8>>>,
    toks: Vec<Vec<MetaTok>>,
}

thread_local! {
    static SPARE: RefCell<Spare> = const {
        RefCell::new(Spare {
            keys: Vec::new(),
            values: Vec::new(),
            lists: Vec::new(),
            toks: Vec::new(),
        })
    };
}

/// Runs `f` on this thread's spares; `None` while the thread is being torn down (or on
/// re-entry, which does not happen: no function here calls another under the borrow).
fn with<R>(f: impl FnOnce(&mut Spare) -> R) -> Option<R> {
    SPARE
        .try_with(|s| s.try_borrow_mut().ok().map(|mut s| f(&mut s)))
        .ok()
        .flatten()
}

/// A copy of `s` in a recycled buffer: a key buffer when `s` is key-sized, a value
/// buffer otherwise.
fn take(s: &[u8], key: bool) -> Vec<u8> {
    let spare = with(|p| if key { p.keys.pop() } else { p.values.pop() }).flatten();
    match spare {
        Some(mut v) => {
            v.clear();
            v.extend_from_slice(s);
            v
        }
        None => s.to_vec(),
    }
}

/// A copy of a key (or another short token) in a recycled buffer.
pub fn key_bytes(s: &[u8]) -> Vec<u8> {
    take(s, true)
}

/// A copy of `s` (a value) in a recycled buffer.
pub fn bytes_from(s: &[u8]) -> Vec<u8> {
    take(s, s.len() <= KEY_CAPACITY)
}

/// An empty key list with room kept from an earlier `get`.
pub fn key_list() -> Vec<Vec<u8>> {
    with(|p| p.lists.pop()).flatten().unwrap_or_default()
}

/// An empty meta flag list with room kept from an earlier meta command.
pub fn meta_toks() -> Vec<MetaTok> {
    with(|p| p.toks.pop()).flatten().unwrap_or_default()
}

/// Keeps `v` for a later request if there is room for it (see the module's bound).
pub fn give_bytes(v: Vec<u8>) {
    let cap = v.capacity();
    if cap == 0 || cap > VALUE_CAPACITY {
        return;
    }
    let _ = with(|p| {
        if cap <= KEY_CAPACITY && p.keys.len() < MAX_KEYS {
            p.keys.push(v);
        } else if cap > KEY_CAPACITY && p.values.len() < MAX_VALUES {
            p.values.push(v);
        }
    });
}

/// Keeps a `get`'s key list and its keys.
pub fn give_keys(mut keys: Vec<Vec<u8>>) {
    for k in keys.drain(..) {
        give_bytes(k);
    }
    let cap = keys.capacity();
    if cap == 0 || cap > LIST_CAPACITY {
        return;
    }
    let _ = with(|p| {
        if p.lists.len() < MAX_LISTS {
            p.lists.push(keys);
        }
    });
}

/// Keeps a meta command's flag list (and its opaques).
pub fn give_toks(mut toks: Vec<MetaTok>) {
    for t in toks.drain(..) {
        if let MetaTok::Opaque(o) = t {
            give_bytes(o);
        }
    }
    let cap = toks.capacity();
    if cap == 0 || cap > LIST_CAPACITY {
        return;
    }
    let _ = with(|p| {
        if p.toks.len() < MAX_LISTS {
            p.toks.push(toks);
        }
    });
}

/// Keeps the buffers of a command that has been executed.
pub fn give(cmd: Command) {
    match cmd {
        Command::Get { keys, .. } => give_keys(keys),
        Command::Store { key, data, .. } => {
            give_bytes(key);
            give_bytes(data);
        }
        Command::MetaSet {
            key, data, flags, ..
        } => {
            give_bytes(key);
            give_bytes(data);
            give_toks(flags.toks);
        }
        Command::MetaGet { key, flags }
        | Command::MetaDelete { key, flags }
        | Command::MetaArith { key, flags, .. } => {
            give_bytes(key);
            give_toks(flags.toks);
        }
        Command::Delete { key, .. }
        | Command::Arith { key, .. }
        | Command::Touch { key, .. }
        | Command::TooLarge { key, .. } => give_bytes(key),
        _ => {}
    }
}

/// Bytes this thread's spares hold (their capacities), for tests of the bound.
pub fn spare_bytes() -> usize {
    with(|p| {
        p.keys.iter().map(Vec::capacity).sum::<usize>()
            + p.values.iter().map(Vec::capacity).sum::<usize>()
            + p.lists
                .iter()
                .map(|l| l.capacity() * std::mem::size_of::<Vec<u8>>())
                .sum::<usize>()
            + p.toks
                .iter()
                .map(|l| l.capacity() * std::mem::size_of::<MetaTok>())
                .sum::<usize>()
    })
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_empty_and_reused() {
        let k = key_bytes(b"alpha");
        let p = k.as_ptr();
        give_bytes(k);
        let k2 = key_bytes(b"be");
        assert_eq!(k2, b"be");
        assert_eq!(k2.as_ptr(), p, "the spare buffer is reused");
        give_bytes(k2);
    }

    #[test]
    fn oversized_buffers_are_not_kept() {
        let before = spare_bytes();
        give_bytes(vec![0u8; VALUE_CAPACITY + 1]);
        let mut big = key_list();
        big.extend((0..LIST_CAPACITY + 1).map(|_| Vec::new()));
        give_keys(big);
        assert_eq!(spare_bytes(), before);
        let bound = MAX_KEYS * KEY_CAPACITY
            + MAX_VALUES * VALUE_CAPACITY
            + MAX_LISTS * LIST_CAPACITY * std::mem::size_of::<Vec<u8>>()
            + MAX_LISTS * LIST_CAPACITY * std::mem::size_of::<MetaTok>();
        for _ in 0..200 {
            give_bytes(Vec::with_capacity(KEY_CAPACITY));
            give_bytes(Vec::with_capacity(VALUE_CAPACITY));
            give_keys(Vec::with_capacity(LIST_CAPACITY));
            give_toks(Vec::with_capacity(LIST_CAPACITY));
        }
        assert!(spare_bytes() <= bound, "{} > {bound}", spare_bytes());
    }
}
