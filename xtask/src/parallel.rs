//! Work spread over host threads, each result kept in its item's place:
//! the boots of a table, the docs' commands, the fuzz targets. (A test
//! run's pools report each test as it ends instead: `cmd/test`.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f` of every item, on `workers` threads (at least one, at most one per
/// item), each thread taking the next item not yet taken; the results in
/// the items' order. A panic in `f` is the caller's, once every thread has
/// ended.
pub fn map<T: Sync, R: Send>(items: &[T], workers: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(k) else { break };
                let r = f(item);
                slots.lock().unwrap_or_else(|e| e.into_inner())[k] = Some(r);
            });
        }
    });
    slots
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every thread ended without a panic, so every item ran"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every item once, each result in its item's place, whatever the
    /// number of threads.
    #[test]
    fn every_item_runs_once_and_its_result_keeps_its_place() {
        let items: Vec<u64> = (0..50).collect();
        let calls = AtomicUsize::new(0);
        for workers in [0, 1, 2, 7, 100] {
            calls.store(0, Ordering::Relaxed);
            let out = map(&items, workers, |&x| {
                calls.fetch_add(1, Ordering::Relaxed);
                // Later items finish first.
                std::thread::sleep(std::time::Duration::from_micros(50 - x));
                x * x
            });
            assert_eq!(out, items.iter().map(|x| x * x).collect::<Vec<_>>());
            assert_eq!(calls.load(Ordering::Relaxed), items.len());
        }
        assert!(map(&[] as &[u8], 2, |_| 0).is_empty());
    }
}
