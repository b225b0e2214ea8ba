//! The line's own invariants, read from the store's stream of gate images: who a freed
//! permit was handed to, against who else waited for it.
//!
//! - **No priority starved past its bound**: a permit is never handed to a waiter while
//!   another waits at a higher priority, each waiter's priority risen one level for every
//!   [`AGING`] it has waited, up to the highest waiting. So a run `n` levels below the
//!   highest waits at most `n` × [`AGING`] before only the shares' order stands before it.
//! - **Each share within its fair bound**: among waiters of one (risen) priority, a permit
//!   is never handed to a share that holds more of the gate than another share waiting.
//!
//! A waker picks from the gate as it last read it, and others may join the line before its
//! write lands: a hand-on breaks neither only if in none of the images its waker may have
//! read (every image since the waiter's entry was written, up to the write) a waiter
//! still in the line came first. A reverted rule (the longest waiting first, whatever its
//! share or priority) passes over a quiet share in every one of them.

use std::collections::BTreeMap;

use schedkit::store::{AGING, Change, GateItem, HANDED_FOR, Waiter};

/// What the line's invariants found in one seed's stream.
#[derive(Debug, Default, Clone)]
pub struct LineCheck {
    /// Each broken invariant, said in a line.
    pub broken: Vec<String>,
    /// Permits handed on from a line.
    pub handed: usize,
    /// Hand-ons to a waiter another came before in the gate as it was at the write, but
    /// not in an image the waker may have read: a race, not a broken rule.
    pub raced: usize,
    /// Reservations that went without their woken run taking them (it died, was cancelled,
    /// or its message was gone): given back or dropped.
    pub lapsed: usize,
}

/// A waiter's priority at `now_ms`, risen by its wait, up to `top`.
fn risen(w: &Waiter, now_ms: i64, top: i32) -> i64 {
    let waited = (now_ms - w.since_ms).max(0);
    (i64::from(w.priority) + waited / AGING.as_millis() as i64).min(i64::from(top))
}

fn held(gate: &GateItem, share: &str) -> usize {
    gate.holders.values().filter(|h| h.share == share).count()
}

/// Why `v` comes before `w` in `gate` at `now_ms`, if it surely does.
fn before(gate: &GateItem, v: &Waiter, w: &Waiter, now_ms: i64) -> Option<String> {
    let top = gate.waiters.values().map(|x| x.priority).max().unwrap_or(0);
    let (pv, pw) = (risen(v, now_ms, top), risen(w, now_ms, top));
    if pv > pw {
        return Some(format!("priority {pv} (risen) over {pw}"));
    }
    let (hv, hw) = (held(gate, &v.share), held(gate, &w.share));
    (pv == pw && hv < hw).then(|| {
        format!(
            "share {} holding {hv} against {} holding {hw}, priority {pv}",
            v.share, w.share
        )
    })
}

/// Reads every gate's images in `changes` and checks each hand-on.
pub fn check(changes: &[Change]) -> LineCheck {
    let mut out = LineCheck::default();
    let empty = GateItem::default();
    let mut history: BTreeMap<&str, Vec<&GateItem>> = BTreeMap::new();
    for change in changes {
        let Change::Gate { item, after, .. } = change else {
            continue;
        };
        let images = history.entry(item.as_str()).or_default();
        let prev = images.last().copied().unwrap_or(&empty);
        for (key, old) in &prev.holders {
            let taken = after
                .holders
                .get(key)
                .is_some_and(|h| h.owner == old.owner || !h.reserved());
            if old.reserved() && !taken {
                out.lapsed += 1;
            }
        }
        for (key, h) in &after.holders {
            let fresh = prev.holders.get(key).is_none_or(|p| p.owner != h.owner);
            let Some(w) = prev.waiters.get(key) else {
                continue;
            };
            if !(h.reserved() && fresh) {
                continue;
            }
            out.handed += 1;
            let now_ms = h.until_ms - HANDED_FOR.as_millis() as i64;
            // The images the waker may have read: W's entry, as handed on, in each.
            let read: Vec<&GateItem> = images
                .iter()
                .rev()
                .take_while(|g| g.waiters.get(key).is_some_and(|x| x.handle == w.handle))
                .copied()
                .collect();
            let still = |k: &String, v: &Waiter| {
                k != key && prev.waiters.get(k).is_some_and(|x| x.handle == v.handle)
            };
            let first_in = |g: &GateItem| {
                g.waiters
                    .iter()
                    .filter(|(k, v)| still(k, v))
                    .find_map(|(k, v)| before(g, v, w, now_ms).map(|why| (k.clone(), why)))
            };
            if read.iter().any(|g| first_in(g).is_none()) {
                out.raced += usize::from(first_in(prev).is_some());
                continue;
            }
            if let Some((k, why)) = first_in(prev) {
                out.broken.push(format!(
                    "{item}: a permit handed to {key} ({}, priority {}) while {k} waited before it in every image its waker may have read: {why}",
                    w.share, w.priority
                ));
            }
        }
        images.push(after);
    }
    out
}
