//! Host allocations sized by user data: a failure is an error value, not
//! the process abort of `vec![0; n]` (the allocator's default on failure).

use std::fmt;

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
