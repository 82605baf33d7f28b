//! The allocator for processes that run sap programs (`sapc`, the benchmarks): mimalloc
//! for everything below [`LARGE`] bytes, the system allocator (glibc's `malloc`) for
//! blocks from there up.
//!
//! Why two: programs make many small objects (list cells, strings, JSON), which mimalloc
//! serves much faster than glibc; and they grow large lists by doubling, which mimalloc
//! does by allocating a new block, copying and freeing the old one, so every doubling
//! touches fresh pages the kernel must clear — a 4-million-element list faulted 17,000
//! pages and spent about half of its time in the kernel. glibc serves a large block
//! with its own mapping and grows it with `mremap`: no copy, and each page faulted
//! once, as Rust's own `Vec` does (docs/notes/performance-2026-11-27-regressions.md).
//!
//! The contract: `GlobalAlloc` hands `dealloc` and `realloc` the layout the block was
//! allocated with, so the block's size says which allocator owns it. A `realloc` that
//! crosses [`LARGE`] moves the block to the other allocator (allocate, copy, free).

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;

/// Blocks of at least this many bytes come from the system allocator.
pub const LARGE: usize = 1 << 20;

/// mimalloc below [`LARGE`] bytes, the system allocator from there up.
pub struct Allocator;

fn large(size: usize) -> bool {
    size >= LARGE
}

// SAFETY: every block is freed or resized by the allocator that made it, which its size
// (the layout `GlobalAlloc` is handed back) identifies; both allocators uphold
// `GlobalAlloc`'s contract for the layouts they are given.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's.
        unsafe {
            if large(layout.size()) {
                System.alloc(layout)
            } else {
                MiMalloc.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's.
        unsafe {
            if large(layout.size()) {
                System.alloc_zeroed(layout)
            } else {
                MiMalloc.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with `layout`, so from the allocator its size
        // names.
        unsafe {
            if large(layout.size()) {
                System.dealloc(ptr, layout)
            } else {
                MiMalloc.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from the allocator `layout`'s size names; a block moving
        // between the two is copied (the smaller of the two sizes) before the old one is
        // freed, as `GlobalAlloc::realloc`'s default does.
        unsafe {
            match (large(layout.size()), large(new_size)) {
                (true, true) => System.realloc(ptr, layout, new_size),
                (false, false) => MiMalloc.realloc(ptr, layout, new_size),
                _ => {
                    let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                    let new = self.alloc(new_layout);
                    if !new.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    new
                }
            }
        }
    }
}
