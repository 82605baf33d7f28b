//! Compiled code in executable memory, and the build cache's files in memory.
//!
//! The code `link.rs` lays out names no absolute address, so it runs wherever it is
//! mapped: copied into fresh pages right after compiling, or mapped straight from a
//! cache entry's file (its pages are read from the page cache as they are first run,
//! and shared between processes running the same entry).
//!
//! What makes mapping a file sound is how the cache writes: an entry is written whole
//! to a temporary file and renamed into place, never written or truncated in place, so
//! the bytes a mapping shows do not change under it. Someone who can write the cache
//! directory could change them (and could as well write code into it): that is outside
//! what the cache guards against (ARCHITECTURE, "The build cache's native module").

use std::fs::File;
use std::io;

use memmap2::{Mmap, MmapOptions};

/// Executable code: read-only, kept mapped as long as the program that runs it.
pub struct Image {
    map: Mmap,
}

impl Image {
    /// Fresh executable pages holding `code`.
    pub fn copy_of(code: &[u8]) -> io::Result<Image> {
        let mut map = MmapOptions::new().len(code.len().max(1)).map_anon()?;
        map[..code.len()].copy_from_slice(code);
        let map = map.make_exec()?;
        flush_instruction_cache(&map);
        Ok(Image { map })
    }

    /// The `len` bytes of `file` from `offset` (a multiple of 4096), mapped as code.
    pub fn map(file: &File, offset: u64, len: usize) -> io::Result<Image> {
        // SAFETY: see the module's comment: the file does not change while mapped.
        let map = unsafe {
            MmapOptions::new()
                .offset(offset)
                .len(len.max(1))
                .map_exec(file)?
        };
        flush_instruction_cache(&map);
        Ok(Image { map })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The address of the code at `offset`.
    pub fn at(&self, offset: u32) -> *const u8 {
        self.map[offset as usize..].as_ptr()
    }
}

/// A whole file, read-only, as bytes (see the module's comment for why its bytes do not
/// change while mapped).
pub fn map_file(file: &File) -> io::Result<Mmap> {
    // SAFETY: see the module's comment.
    unsafe { Mmap::map(file) }
}

/// Makes the instructions just written visible to instruction fetch: nothing to do on
/// x86-64, whose caches are coherent; on AArch64 the data cache is cleaned and the
/// instruction cache invalidated over the range (libgcc's `__clear_cache`).
fn flush_instruction_cache(map: &Mmap) {
    #[cfg(target_arch = "aarch64")]
    {
        unsafe extern "C" {
            fn __clear_cache(start: *mut std::ffi::c_char, end: *mut std::ffi::c_char);
        }
        let range = map.as_ptr_range();
        // SAFETY: the range is this mapping's own.
        unsafe { __clear_cache(range.start as *mut _, range.end as *mut _) };
    }
    #[cfg(not(target_arch = "aarch64"))]
    let _ = map;
}
