//! A map bounded to `capacity` entries that lets go of the least recently
//! used ones: the CUDA module cache (every loaded module holds device
//! memory, and a process that keeps meeting new kernels must not hold all
//! of them). Pure data structure, so it is tested without a GPU.

use std::collections::HashMap;
use std::hash::Hash;

/// At most `capacity` values by key, each stamped with its last use.
pub(super) struct Lru<K, V> {
    capacity: usize,
    map: HashMap<K, (V, u64)>,
    /// Stamp of the next use.
    clock: u64,
}

impl<K: Hash + Eq + Copy, V: Clone> Lru<K, V> {
    /// An empty map holding at most `capacity` (at least 1) values.
    pub fn new(capacity: usize) -> Self {
        Lru {
            capacity: capacity.max(1),
            map: HashMap::new(),
            clock: 0,
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The value under `key`, marked as just used. A hit costs a hash
    /// lookup (this is on every launch); the search for the oldest entry
    /// happens only when an insertion overflows.
    pub fn get(&mut self, key: &K) -> Option<V> {
        let now = self.tick();
        let (v, used) = self.map.get_mut(key)?;
        *used = now;
        Some(v.clone())
    }

    /// The value under `key` (marked as just used): the one already there,
    /// else `value`, inserted. Also returns the values evicted to keep
    /// within capacity, least recently used first, so the caller can drop
    /// them outside its lock (dropping a module may wait for the GPU).
    pub fn get_or_insert(&mut self, key: K, value: V) -> (V, Vec<V>) {
        if let Some(v) = self.get(&key) {
            return (v, Vec::new());
        }
        let mut evicted = Vec::new();
        while self.map.len() >= self.capacity {
            let oldest = *self
                .map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k)
                .expect("a full map has entries");
            evicted.extend(self.map.remove(&oldest).map(|(v, _)| v));
        }
        let now = self.tick();
        self.map.insert(key, (value.clone(), now));
        (value, evicted)
    }

    /// Number of values held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut c = Lru::new(3);
        for k in 0..3 {
            assert_eq!(c.get_or_insert(k, k * 10), (k * 10, vec![]));
        }
        // Using 0 makes 1 the oldest.
        assert_eq!(c.get(&0), Some(0));
        assert_eq!(c.get_or_insert(3, 30), (30, vec![10]));
        assert_eq!(c.get(&1), None);
        assert_eq!(c.len(), 3);
        // Then 2 (inserted before 0 was used, and 3 after).
        assert_eq!(c.get_or_insert(4, 40), (40, vec![20]));
        assert_eq!(c.get(&0), Some(0));
        assert_eq!(c.get(&3), Some(30));
        assert_eq!(c.get(&4), Some(40));
    }

    #[test]
    fn a_present_key_keeps_its_value_and_evicts_nothing() {
        let mut c = Lru::new(2);
        c.get_or_insert(1, "first");
        c.get_or_insert(2, "two");
        // Another thread loaded key 1 too: the cached one wins, and the
        // lookup counts as a use, so 2 goes next.
        assert_eq!(c.get_or_insert(1, "second"), ("first", vec![]));
        assert_eq!(c.get_or_insert(3, "three"), ("three", vec!["two"]));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn capacity_is_at_least_one() {
        let mut c = Lru::new(0);
        assert_eq!(c.get_or_insert(1, 1), (1, vec![]));
        assert_eq!(c.get_or_insert(2, 2), (2, vec![1]));
        assert_eq!(c.len(), 1);
    }

    /// A long stream of keys over a small working set: the bound holds,
    /// every evicted value is one no longer held, and the working set
    /// used between insertions survives.
    #[test]
    fn holds_the_bound_under_churn() {
        let mut c = Lru::new(8);
        let mut evicted = 0;
        for k in 0..1000u32 {
            // Keys 0 and 1 are used all the time.
            c.get_or_insert(k % 2, k % 2);
            let (_, gone) = c.get_or_insert(k + 2, k + 2);
            assert!(c.len() <= 8);
            for g in &gone {
                assert!(*g >= 2, "the hot keys stay");
                assert_eq!(c.get(g), None);
            }
            evicted += gone.len();
        }
        assert_eq!(evicted, 1000 + 2 - 8);
    }
}
