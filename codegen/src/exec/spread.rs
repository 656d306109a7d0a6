//! Independent items (a kernel's row blocks) spread over rayon's threads
//! so that each thread takes the same items in every run: item range `t`
//! of `threads` equal ranges goes first to the thread of index `t`, which
//! claims its items front to back; a thread done with its own range takes
//! what is left of the others' (one item at a time, from their fronts), so
//! a thread that comes late or is slow is relieved.
//!
//! Why not a plain parallel iterator: rayon's work stealing hands a block
//! to whichever thread gets there first, a different one in every run, so
//! a kernel that runs again over the same rows (every step of a loop, a
//! benchmark's repetitions) finds its rows and its output in another
//! core's private cache. With a thread's own range the same every run, the
//! rows it read and the output it wrote last time are still in its cache
//! where they fit (16 threads of a 4096x1024 `f32` softmax hold 1 MiB of
//! input and 1 MiB of output each, against 2 MiB of L2 per core), as an
//! OpenMP static schedule keeps them.

use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

/// Runs `f(state, item)` for every item of `0..items` on rayon's threads,
/// each thread with one `state` from `init`, preferring the range of items
/// that its index owns (module comment). Stops at the first error and
/// returns one; every item runs exactly once otherwise.
pub(crate) fn spread<S, E: Send>(
    items: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> Result<(), E> + Sync,
) -> Result<(), E> {
    let threads = rayon::current_num_threads().max(1);
    // Range `t` is `start(t)..start(t + 1)`: `items / threads` each, the
    // first `items % threads` ranges one more.
    let (share, extra) = (items / threads, items % threads);
    let start = |t: usize| t * share + t.min(extra);
    let next: Vec<AtomicUsize> = (0..threads).map(|t| AtomicUsize::new(start(t))).collect();
    // One task per thread; a task runs its thread's range, then the rest.
    // Where rayon gives one thread two tasks, the second finds its ranges
    // taken and ends.
    (0..threads)
        .into_par_iter()
        .with_max_len(1)
        .try_for_each(|_| {
            let me = rayon::current_thread_index().unwrap_or(0) % threads;
            let mut state = None;
            for t in (me..threads).chain(0..me) {
                let end = start(t + 1);
                loop {
                    // Relaxed: the counter hands out distinct items; the
                    // items' data is published by rayon's join at the end.
                    let i = next[t].fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        break;
                    }
                    f(state.get_or_insert_with(&init), i)?;
                }
            }
            Ok(())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Every item runs once, for item counts around the thread count
    /// (none, fewer items than threads, uneven shares), on pools of 1, 2,
    /// 3 and 8 threads; an error stops the run and is returned.
    #[test]
    fn every_item_once() {
        for threads in [1, 2, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for items in [0, 1, 2, 5, 7, 8, 9, 31, 100] {
                let seen = Mutex::new(vec![0u32; items]);
                let inits = AtomicUsize::new(0);
                let init = || inits.fetch_add(1, Ordering::Relaxed);
                let r: Result<(), ()> = pool.install(|| {
                    spread(items, init, |_, i| {
                        seen.lock().unwrap()[i] += 1;
                        Ok(())
                    })
                });
                assert!(r.is_ok());
                let seen = seen.into_inner().unwrap();
                assert!(
                    seen.iter().all(|&n| n == 1),
                    "{threads} threads, {items} items: {seen:?}"
                );
                // A state per task that ran an item, at most one per thread's task.
                assert!(inits.load(Ordering::Relaxed) <= threads.min(items));
            }
            let r =
                pool.install(|| spread(50, || (), |_, i| if i == 17 { Err(i) } else { Ok(()) }));
            assert_eq!(r, Err(17));
        }
    }

    /// A thread runs its own range front to back before it takes items of
    /// another range: in the order items started, each thread's own items
    /// come first, in increasing order.
    #[test]
    fn own_range_first() {
        let threads = 4;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let items = 41;
        let clock = AtomicUsize::new(0);
        let ran = Mutex::new(vec![(usize::MAX, 0); items]);
        pool.install(|| {
            spread(
                items,
                || (),
                |_, i| {
                    let at = clock.fetch_add(1, Ordering::Relaxed);
                    ran.lock().unwrap()[i] = (rayon::current_thread_index().unwrap(), at);
                    Ok::<_, ()>(())
                },
            )
        })
        .unwrap();
        let ran = ran.into_inner().unwrap();
        let (share, extra) = (items / threads, items % threads);
        let owner = |i: usize| {
            (0..threads)
                .rev()
                .find(|&t| t * share + t.min(extra) <= i)
                .unwrap()
        };
        for w in 0..threads {
            let mine: Vec<(usize, usize)> = (0..items)
                .filter(|&i| ran[i].0 == w)
                .map(|i| (i, ran[i].1))
                .collect();
            let own: Vec<usize> = mine
                .iter()
                .filter(|(i, _)| owner(*i) == w)
                .map(|m| m.1)
                .collect();
            let stolen = mine.iter().filter(|(i, _)| owner(*i) != w).map(|m| m.1);
            assert!(own.windows(2).all(|p| p[0] < p[1]), "thread {w}: {ran:?}");
            if let (Some(last), Some(first)) = (own.last(), stolen.min()) {
                assert!(
                    last < &first,
                    "thread {w} took another range first: {ran:?}"
                );
            }
        }
    }
}
