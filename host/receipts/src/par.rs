//! A parallel map over a slice with scoped threads (one per available core),
//! for the per-receipt work of reading and verifying large packs. No global
//! pool, no state kept between calls.

/// Below this many items, work stays on the calling thread.
const MIN_PARALLEL: usize = 4096;

/// `f(index, item)` for every item, in order, spread over the cores.
pub(crate) fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(usize, &T) -> R + Sync) -> Vec<R> {
    map_init(items, || (), |(), i, t| f(i, t)).0
}

/// How many runs [`map_init`] splits `items` items into.
pub(crate) fn runs(items: usize) -> usize {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || items < MIN_PARALLEL {
        1
    } else {
        threads
    }
}

/// As [`map`], with a state made by `init` for each run of contiguous items
/// (one per thread), for work that reuses what the previous item computed;
/// returns the results and the runs' final states, in order. The first run
/// is done on the calling thread, straight into the results.
pub(crate) fn map_init<'a, T: Sync, R: Send, S: Send>(
    items: &'a [T],
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize, &'a T) -> R + Sync,
) -> (Vec<R>, Vec<S>) {
    let run = |first: usize, part: &'a [T], out: &mut Vec<R>| {
        let mut state = init();
        out.extend(
            part.iter()
                .enumerate()
                .map(|(i, t)| f(&mut state, first + i, t)),
        );
        state
    };
    let mut out = Vec::with_capacity(items.len());
    let runs = runs(items.len());
    if runs == 1 {
        let state = run(0, items, &mut out);
        return (out, vec![state]);
    }
    let chunk = items.len().div_ceil(runs);
    let run = &run;
    std::thread::scope(|scope| {
        let mut parts = items.chunks(chunk).enumerate();
        let head = parts.next().map_or(&[][..], |(_, part)| part);
        let handles: Vec<_> = parts
            .map(|(c, part)| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || {
                        let mut out = Vec::with_capacity(part.len());
                        let state = run(c * chunk, part, &mut out);
                        (out, state)
                    })
                    .map_err(|_| (c, part))
            })
            .collect();
        let mut states = vec![run(0, head, &mut out)];
        for handle in handles {
            match handle {
                Ok(h) => match h.join() {
                    Ok((part, state)) => {
                        out.extend(part);
                        states.push(state);
                    }
                    Err(panic) => std::panic::resume_unwind(panic),
                },
                // No thread to be had: do that chunk here.
                Err((c, part)) => states.push(run(c * chunk, part, &mut out)),
            }
        }
        (out, states)
    })
}

/// `f(item)` for every item, in order, the items handed out one at a time
/// to one thread per core (the calling thread among them): for a few items
/// of very different sizes, best given largest first.
pub(crate) fn map_each<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    if threads < 2 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return done;
            };
            done.push((i, f(item)));
        }
    };
    let work = &work;
    let mut all = std::thread::scope(|scope| {
        // A thread that cannot be had leaves its share to the others.
        let handles: Vec<_> = (1..threads)
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        let mut all = work();
        for handle in handles {
            match handle.join() {
                Ok(part) => all.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    });
    all.sort_unstable_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order() {
        let items: Vec<usize> = (0..10_000).collect();
        let out = super::map(&items, |i, x| (i, x * 2));
        assert!(
            out.iter()
                .enumerate()
                .all(|(i, &(j, y))| i == j && y == i * 2)
        );
    }

    #[test]
    fn map_init_keeps_order_and_returns_each_run_state() {
        let items: Vec<usize> = (0..10_000).collect();
        let (out, states) = super::map_init(
            &items,
            || 0usize,
            |n, i, x| {
                *n += 1;
                i + x
            },
        );
        assert_eq!(out, items.iter().map(|x| 2 * x).collect::<Vec<_>>());
        assert_eq!(states.len(), super::runs(items.len()));
        assert_eq!(states.iter().sum::<usize>(), items.len());
    }

    #[test]
    fn map_each_keeps_order() {
        let items: Vec<usize> = (0..100).rev().collect();
        let out = super::map_each(&items, |x| x * 2);
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        assert!(super::map_each(&[] as &[usize], |x| *x).is_empty());
    }
}
