//! Host allocations sized by user data: a failure is an error value, not
//! the process abort of `vec![0; n]` (the allocator's default on failure).
//! Also the bounded cache of freed buffers ([`recycle`]) that kernel
//! outputs written in full start from ([`output`]), with no zeroing pass.

use crate::ir::Kernel;
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Mutex, MutexGuard};

/// A host allocation of `bytes` bytes failed (or its size overflowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocError {
    /// The requested size; `None` when it overflowed `usize`.
    pub bytes: Option<usize>,
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bytes {
            Some(b) => write!(f, "cannot allocate {b} bytes of host memory"),
            None => f.write_str("host allocation size overflows usize"),
        }
    }
}

impl std::error::Error for AllocError {}

impl From<AllocError> for crate::interp::InterpError {
    fn from(e: AllocError) -> Self {
        crate::interp::InterpError(e.to_string())
    }
}

/// An empty vector with room for `len` elements.
pub fn vec_with_capacity<T>(len: usize) -> Result<Vec<T>, AllocError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| AllocError {
        bytes: len.checked_mul(std::mem::size_of::<T>()),
    })?;
    Ok(v)
}

/// `len` copies of `value`.
pub fn filled<T: Clone>(len: usize, value: T) -> Result<Vec<T>, AllocError> {
    let mut v = vec_with_capacity(len)?;
    v.resize(len, value);
    Ok(v)
}

/// `count` elements of `size` bytes each, zeroed (the size is checked).
/// Asked of the allocator as zeroed memory (fresh pages the system zeroes
/// as they are first touched, or a `memset`), except buffers in
/// [`PARALLEL_ZERO`], which all of rayon's threads zero: glibc serves such
/// a request from its heap once a buffer that size has been freed (its
/// mmap threshold grows, up to 32 MiB), and `calloc` then `memset`s it on
/// one thread, which took 1 of 3 ms of a 16 MiB softmax on two cores and
/// does not shrink with more. Larger requests always get fresh pages,
/// where an extra pass of zeros would only cost.
pub fn zeroed_bytes(count: usize, size: usize) -> Result<Vec<u8>, AllocError> {
    let bytes = count.checked_mul(size).ok_or(AllocError { bytes: None })?;
    if bytes == 0 {
        return Ok(Vec::new());
    }
    let layout =
        std::alloc::Layout::array::<u8>(bytes).map_err(|_| AllocError { bytes: Some(bytes) })?;
    let parallel = PARALLEL_ZERO.contains(&bytes) && rayon::current_num_threads() > 1;
    // SAFETY: the layout's size is not zero.
    let ptr = unsafe {
        if parallel {
            std::alloc::alloc(layout)
        } else {
            std::alloc::alloc_zeroed(layout)
        }
    };
    if ptr.is_null() {
        return Err(AllocError { bytes: Some(bytes) });
    }
    advise_huge_pages(ptr, bytes);
    if parallel {
        zero_in_parallel(ptr, bytes);
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of
    // `bytes` `u8`s, which are all initialised (zero).
    Ok(unsafe { Vec::from_raw_parts(ptr, bytes, bytes) })
}

/// The buffer for output `o` of `kernel`: a recycled one
/// ([`reused_bytes`]: its old contents, no zeroing pass and no page
/// faults) when every successful run writes each of its elements
/// ([`crate::outs::writes_in_full`]) or none
/// ([`crate::outs::never_written`]), else zeroed ([`zeroed_bytes`]).
pub fn output(kernel: &Kernel, o: usize) -> Result<Vec<u8>, AllocError> {
    let arg = kernel.outputs[o];
    match crate::outs::writes_in_full(kernel, o) || crate::outs::never_written(kernel, o) {
        true => reused_bytes(arg.len, arg.dtype.size()),
        false => zeroed_bytes(arg.len, arg.dtype.size()),
    }
}

/// `count` elements of `size` bytes each whose contents are unspecified:
/// a freed buffer's old bytes (from [`recycle`]) where one of about that
/// size is kept, else zeros. Only for buffers the caller overwrites in
/// full before anything reads them; safe either way (every byte is
/// initialised), but stale values would leak otherwise.
pub fn reused_bytes(count: usize, size: usize) -> Result<Vec<u8>, AllocError> {
    let bytes = count.checked_mul(size).ok_or(AllocError { bytes: None })?;
    // Small requests never take the lock (nothing that small is kept).
    if bytes >= Recycled::MIN {
        if let Some(v) = lock_recycled().take(bytes) {
            return Ok(v);
        }
    }
    zeroed_bytes(count, size).or_else(|_| {
        // Memory may be held by the recycled buffers: free them, retry.
        lock_recycled().clear();
        zeroed_bytes(count, size)
    })
}

/// Keeps a buffer that is no longer used for [`reused_bytes`] (or frees
/// it: small and huge buffers, and any beyond the cache's bound).
pub fn recycle(v: Vec<u8>) {
    if Recycled::fits(&v) {
        // Evicted buffers are freed after the lock is released.
        let _evicted = lock_recycled().put(v);
    }
}

/// The process's cache of freed host buffers.
static RECYCLED: Mutex<Recycled> = Mutex::new(Recycled::new(RECYCLED_BYTES));

/// At most this many bytes of freed buffers are kept.
const RECYCLED_BYTES: usize = 256 << 20;

fn lock_recycled() -> MutexGuard<'static, Recycled> {
    // The cache holds no invariant a panic could break half-way.
    RECYCLED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Freed host buffers, least recently freed first, bounded by their
/// allocated bytes. Only buffers of at least [`Recycled::MIN`] bytes are
/// kept (smaller ones are cheap to allocate and to zero), at most half the
/// bound each, and at most [`Recycled::ENTRIES`] of them, so a lookup is a
/// short scan.
struct Recycled {
    bufs: VecDeque<Vec<u8>>,
    /// Capacity of `bufs`' buffers together.
    held: usize,
    /// The bound on `held`.
    cap: usize,
}

impl Recycled {
    const MIN: usize = 64 << 10;
    const ENTRIES: usize = 64;

    const fn new(cap: usize) -> Recycled {
        Recycled {
            bufs: VecDeque::new(),
            held: 0,
            cap,
        }
    }

    /// Whether a buffer of this size is worth keeping at all.
    fn fits(v: &[u8]) -> bool {
        v.len() >= Recycled::MIN && v.len() <= RECYCLED_BYTES / 2
    }

    /// The smallest kept buffer of `bytes` to `bytes + bytes / 8` bytes,
    /// cut to `bytes`. Its spare capacity is not handed out again: a
    /// buffer's length only shrinks, so every byte of it stays initialised.
    fn take(&mut self, bytes: usize) -> Option<Vec<u8>> {
        if bytes < Recycled::MIN {
            return None;
        }
        let most = bytes.saturating_add(bytes / 8);
        let (i, _) = self
            .bufs
            .iter()
            .enumerate()
            .filter(|(_, v)| (bytes..=most).contains(&v.len()))
            .min_by_key(|(_, v)| v.len())?;
        let mut v = self.bufs.remove(i)?;
        self.held -= v.capacity();
        v.truncate(bytes);
        Some(v)
    }

    /// Keeps `v`; returns the least recently freed buffers it displaces
    /// (or `v` itself if it is larger than the bound).
    fn put(&mut self, v: Vec<u8>) -> Vec<Vec<u8>> {
        if v.capacity() > self.cap {
            return vec![v];
        }
        self.held += v.capacity();
        self.bufs.push_back(v);
        let mut evicted = Vec::new();
        while self.held > self.cap || self.bufs.len() > Recycled::ENTRIES {
            let Some(old) = self.bufs.pop_front() else {
                break;
            };
            self.held -= old.capacity();
            evicted.push(old);
        }
        evicted
    }

    /// Frees every kept buffer.
    fn clear(&mut self) {
        self.bufs.clear();
        self.held = 0;
    }
}

/// Sizes in bytes that [`zeroed_bytes`] zeroes on all threads: from where
/// huge pages are asked for to glibc's largest mmap threshold on 64-bit
/// hosts (`DEFAULT_MMAP_THRESHOLD_MAX`).
const PARALLEL_ZERO: std::ops::Range<usize> = 4 << 20..32 << 20;

/// Writes zeros over `bytes` bytes at `ptr` (one allocation), in pieces
/// of one huge page spread over rayon's threads.
fn zero_in_parallel(ptr: *mut u8, bytes: usize) {
    use rayon::prelude::*;
    const PIECE: usize = 2 << 20;
    // The address as an integer: raw pointers are not `Send`.
    let base = ptr as usize;
    (0..bytes.div_ceil(PIECE)).into_par_iter().for_each(|i| {
        let start = i * PIECE;
        // SAFETY: `start..start + len` lies inside the allocation, and
        // each piece is written by one thread.
        unsafe { std::ptr::write_bytes((base + start) as *mut u8, 0, PIECE.min(bytes - start)) };
    });
}

/// Asks Linux to back the whole pages of a large fresh allocation with
/// transparent huge pages (where they are enabled in `madvise` mode), so
/// its first touch faults once per 2 MiB instead of once per 4 KiB. Only
/// a hint: failure changes nothing.
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    const PAGE: usize = 4096;
    // Smaller buffers gain little and may stay in the allocator's heap.
    const HUGE_PAGES_FROM: usize = 4 << 20;
    if bytes < HUGE_PAGES_FROM {
        return;
    }
    let start = (ptr as usize).next_multiple_of(PAGE);
    let len = (ptr as usize + bytes - start) / PAGE * PAGE;
    // SAFETY: the range lies inside the allocation (page-aligned start,
    // whole pages); `MADV_HUGEPAGE` changes no contents.
    unsafe {
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

/// Huge pages are a Linux hint; elsewhere nothing to do.
#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *mut u8, _bytes: usize) {}

/// A copy of `data`.
pub fn copy(data: &[u8]) -> Result<Vec<u8>, AllocError> {
    let mut v = vec_with_capacity(data.len())?;
    v.extend_from_slice(data);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::Recycled;
    use crate::expr::{Cond, Expr};
    use crate::ir::{Arg, Inst, Kernel, KernelKind, Node, Store};
    use crate::DType;

    #[test]
    fn recycled_buffers_are_bounded_and_fit_their_requests() {
        let mb = 1 << 20;
        let mut r = Recycled::new(4 * mb);
        assert!(r.put(vec![1u8; mb]).is_empty());
        assert!(r.put(vec![2u8; 2 * mb]).is_empty());
        // Too small, or more than 1/8 larger than asked: not handed out.
        assert!(r.take(Recycled::MIN - 1).is_none());
        assert!(r.take(mb / 2).is_none());
        // The smallest that fits, cut to the request, with its old bytes.
        let v = r.take(mb - 100).expect("fits");
        assert_eq!(v.len(), mb - 100);
        assert!(v.iter().all(|b| *b == 1));
        assert_eq!(r.held, 2 * mb);
        // Over the bound, the least recently freed go first.
        assert!(r.put(v).is_empty());
        let evicted = r.put(vec![3u8; 2 * mb]);
        assert_eq!(evicted.len(), 1);
        assert_eq!(evicted[0][0], 2);
        assert_eq!(r.held, 3 * mb);
        assert_eq!(r.put(vec![0u8; 5 * mb]).len(), 1, "larger than the bound");
        // A buffer cut to a request serves only requests up to its length.
        assert!(r.take(mb).is_none());
        assert_eq!(r.take(mb - 100).map(|v| v[0]), Some(1));
        r.clear();
        assert_eq!((r.held, r.bufs.len()), (0, 0));
        // At most `ENTRIES` buffers, however small.
        for _ in 0..Recycled::ENTRIES + 3 {
            r.put(vec![0u8; Recycled::MIN]);
        }
        assert_eq!(r.bufs.len(), Recycled::ENTRIES);
        assert_eq!(r.held, Recycled::ENTRIES * Recycled::MIN);
    }

    /// An elementwise kernel copying input 0 to `stores`' indices of one
    /// `F32` output of `len` elements, over `0..points`.
    fn copy(points: i64, len: usize, stores: &[i64]) -> Kernel {
        let f = DType::F32;
        Kernel {
            name: "copy".into(),
            kind: KernelKind::Elementwise,
            ranges: [points].as_slice().into(),
            n_kept: 1,
            inputs: vec![Arg { dtype: f, len }],
            outputs: vec![Arg { dtype: f, len }],
            scalars: vec![],
            insts: vec![Node {
                inst: Inst::Load {
                    input: 0,
                    index: Expr::var(0),
                    valid: Cond::always(),
                },
                dtype: f,
            }],
            stores: stores
                .iter()
                .map(|at| Store::write(0, Expr::var(0).add_const(*at), 0))
                .collect(),
        }
    }

    #[test]
    fn only_outputs_written_in_full_get_recycled_bytes() {
        // A size no other test of this crate allocates, so the buffer
        // recycled here is the one the cache holds for it.
        let len = 77_777;
        let stale = vec![0xABu8; 4 * len];
        let at = stale.as_ptr();
        super::recycle(stale);
        // Half the output written: it starts from zeros, and the stale
        // buffer stays in the cache.
        let half = copy(len as i64 / 2, len, &[0]);
        let out = super::output(&half, 0).unwrap();
        assert_eq!(out.len(), 4 * len);
        assert!(out.iter().all(|b| *b == 0));
        assert_ne!(out.as_ptr(), at);
        // Every element written: the recycled buffer, with its old bytes,
        // which the run then overwrites everywhere.
        let full = copy(len as i64, len, &[0]);
        let mut out = super::output(&full, 0).unwrap();
        assert_eq!(out.as_ptr(), at);
        assert!(out.iter().all(|b| *b == 0xAB));
        let input: Vec<u8> = (0..len).flat_map(|i| (i as f32).to_le_bytes()).collect();
        crate::cpu::run(&full, &[&input], &[], &mut [&mut out]).unwrap();
        let mut expect = super::zeroed_bytes(len, 4).unwrap();
        crate::interp::run(&full, &[&input], &[], &mut [&mut expect]).unwrap();
        assert_eq!(out, expect);
        assert_eq!(out, input);
    }

    #[test]
    fn outputs_no_store_writes_get_recycled_bytes() {
        // As above, a size no other test allocates (nor within an eighth).
        let len = 99_991;
        let stale = vec![0xCDu8; 4 * len];
        let at = stale.as_ptr();
        super::recycle(stale);
        // A second output that no store writes (a GPU's scratch): its
        // bytes are left as they were, and the run leaves them alone.
        let mut k = copy(len as i64 / 2, len, &[0]);
        k.outputs.push(k.outputs[0]);
        assert!(crate::outs::never_written(&k, 1) && !crate::outs::never_written(&k, 0));
        assert!(!crate::outs::never_written(&k, 2), "no such output");
        let mut scratch = super::output(&k, 1).unwrap();
        assert_eq!(scratch.as_ptr(), at);
        let mut out = super::output(&k, 0).unwrap();
        assert!(out.iter().all(|b| *b == 0), "half written: zeroed");
        let input = vec![1u8; 4 * len];
        crate::cpu::run(&k, &[&input], &[], &mut [&mut out, &mut scratch]).unwrap();
        assert!(scratch.iter().all(|b| *b == 0xCD));
    }

    #[test]
    fn impossible_sizes_are_errors() {
        assert!(super::zeroed_bytes(1 << 58, 4).is_err());
        assert_eq!(
            super::zeroed_bytes(usize::MAX, 2),
            Err(super::AllocError { bytes: None })
        );
        assert_eq!(super::zeroed_bytes(3, 2).unwrap(), vec![0u8; 6]);
        // Zeroed by all threads, pieces of 2 MiB and a partial one.
        let n = (super::PARALLEL_ZERO.start + 12345) / 4;
        let big = super::zeroed_bytes(n, 4).unwrap();
        assert_eq!(big.len(), 4 * n);
        assert!(big.iter().all(|b| *b == 0));
    }
}
