//! The `planwright` binary's allocator: mimalloc, asked for plain blocks whenever a plain block is
//! aligned enough.
//!
//! Why mimalloc: under load every tokio worker, the checkpoint writer and the blocking pool
//! allocate at once, and glibc's arenas made a quarter of the process's CPU malloc/free plus
//! futex waits on its arena locks (perf, 10,000 research conversations; see docs/PERFORMANCE.md).
//! mimalloc's per-thread heaps take no lock on the fast path.
//!
//! Why not the `mimalloc` crate's `MiMalloc`: it sends every allocation through
//! `mi_malloc_aligned`, whose checks and fallbacks (an alignment test on the free block, a
//! "generic" path whenever the small page's free list is empty) were ~2.5 % of the research
//! load's instructions on their own. Like the standard library's `System` allocator on top of
//! `malloc`, this one calls `mi_malloc`/`mi_realloc`/`mi_zalloc` when their guarantee covers the
//! layout, and the aligned functions otherwise. The guarantee (mimalloc's `page-queue.c`, 64-bit
//! targets): every block is at least word-aligned, and blocks of more than one word have sizes in
//! multiples of two words, so a block of 16 bytes or more is 16-aligned — `malloc`'s contract for
//! `max_align_t`.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// mimalloc, called the way its alignment guarantee allows (see the module docs).
pub struct Mimalloc;

/// Whether a plain mimalloc block of `size` bytes is aligned to `align`.
#[inline]
fn plain_block_fits(size: usize, align: usize) -> bool {
    const WORD: usize = std::mem::size_of::<usize>();
    align <= WORD || (align <= 2 * WORD && size >= 2 * WORD)
}

// SAFETY: every block comes from mimalloc and goes back to it (`mi_free` takes blocks of either
// kind of call); a plain call is made only when `plain_block_fits` says its block satisfies the
// layout's alignment (checked in debug builds).
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = if plain_block_fits(layout.size(), layout.align()) {
            // SAFETY: any size may be asked for; null means out of memory, as `alloc` expects.
            unsafe { mi::mi_malloc(layout.size()) }
        } else {
            // SAFETY: `Layout` guarantees a power-of-two alignment.
            unsafe { mi::mi_malloc_aligned(layout.size(), layout.align()) }
        };
        debug_assert!(p as usize % layout.align() == 0);
        p.cast()
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = if plain_block_fits(layout.size(), layout.align()) {
            // SAFETY: as in `alloc`.
            unsafe { mi::mi_zalloc(layout.size()) }
        } else {
            // SAFETY: as in `alloc`.
            unsafe { mi::mi_zalloc_aligned(layout.size(), layout.align()) }
        };
        debug_assert!(p as usize % layout.align() == 0);
        p.cast()
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = if plain_block_fits(new_size, layout.align()) {
            // SAFETY: `ptr` came from mimalloc; the new block is aligned enough (above).
            unsafe { mi::mi_realloc(ptr.cast::<c_void>(), new_size) }
        } else {
            // SAFETY: as above, with the alignment asked for.
            unsafe { mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()) }
        };
        debug_assert!(p as usize % layout.align() == 0);
        p.cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_of_every_small_size_and_alignment_are_aligned_and_keep_their_bytes() {
        let a = Mimalloc;
        for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
            for size in (1..=300).chain([1000, 5000, 70_000]) {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero sizes; each block is freed with the layout it was made with.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size}, align {align}");
                    p.write_bytes(0xAB, size);
                    let grown = a.realloc(p, layout, size * 3);
                    assert_eq!(
                        grown as usize % align,
                        0,
                        "grown from {size}, align {align}"
                    );
                    assert!((0..size).all(|i| *grown.add(i) == 0xAB));
                    a.dealloc(grown, Layout::from_size_align(size * 3, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
