//! Native lists: what compiled code builds for `List<T>`. Every element is the native
//! `i64` of its type (see `intrinsics.rs`) — an integer, a float's bits, a Boolean, a
//! variant index, or an owned object pointer — stored contiguously, so compiled code
//! indexes, measures and appends without calling into the runtime.
//!
//! A list value in native code is either this ([`Slot::Raw`](crate::eval::Slot)) or a
//! runtime `Value::List` (what came from the host: a field, a builtin's result, a model's
//! answer); every operation accepts both, and only crossing into the host converts.
//!
//! The layout is fixed (`repr(C)`) because compiled code reads it: see [`layout`].

use std::sync::{Arc, OnceLock};

use crate::eval::Slot;
use crate::intrinsics::{sap_release, sap_retain};

#[repr(C)]
pub struct RawList {
    ptr: *mut i64,
    len: usize,
    cap: usize,
    /// Whether the elements are object pointers this list holds a reference to.
    heap: bool,
}

// SAFETY: the buffer is owned; heap elements are `Arc<Slot>` references, which are
// `Send + Sync`. Mutation happens only through `&mut` (an unshared `Arc`).
unsafe impl Send for RawList {}
unsafe impl Sync for RawList {}

impl RawList {
    /// A list of `items`, whose references (for heap elements) it takes over.
    pub fn from_vec(items: Vec<i64>, heap: bool) -> RawList {
        let mut items = std::mem::ManuallyDrop::new(items);
        RawList {
            ptr: items.as_mut_ptr(),
            len: items.len(),
            cap: items.capacity(),
            heap,
        }
    }

    pub fn as_slice(&self) -> &[i64] {
        // SAFETY: `ptr` and `len` describe the initialized part of a `Vec<i64>` buffer.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Appends `item`, taking over its reference.
    pub fn push(&mut self, item: i64) {
        // The list holds an empty buffer while the `Vec` grows, so nothing is freed
        // twice even if growing fails.
        let heap = self.heap;
        let mut items = std::mem::replace(self, RawList::from_vec(Vec::new(), heap)).into_vec();
        items.push(item);
        *self = RawList::from_vec(items, heap);
    }

    /// Whether the elements are object pointers the list holds references to.
    pub fn heap(&self) -> bool {
        self.heap
    }

    pub fn as_mut_slice(&mut self) -> &mut [i64] {
        // SAFETY: as `as_slice`, through the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The elements, with their references.
    pub fn into_vec(self) -> Vec<i64> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the parts came from a `Vec<i64>`; `this` is never dropped.
        unsafe { Vec::from_raw_parts(this.ptr, this.len, this.cap) }
    }
}

impl Clone for RawList {
    fn clone(&self) -> RawList {
        let items = self.as_slice().to_vec();
        if self.heap {
            for p in &items {
                sap_retain(*p);
            }
        }
        RawList::from_vec(items, self.heap)
    }
}

impl Drop for RawList {
    fn drop(&mut self) {
        if self.heap {
            for p in self.as_slice() {
                sap_release(*p);
            }
        }
        // SAFETY: the parts came from a `Vec<i64>`; nothing uses them after this.
        drop(unsafe { Vec::from_raw_parts(self.ptr, self.len, self.cap) });
    }
}

impl std::fmt::Debug for RawList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// Where compiled code finds a native list: the tag of `Slot::Raw`, the offsets of its
/// fields from the object pointer, and of the reference count behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub raw_tag: i64,
    pub ptr: i32,
    pub len: i32,
    pub cap: i32,
    /// The strong count of the `Arc` holding the slot, relative to the object pointer;
    /// `None` when it could not be found, and compiled code then never appends in
    /// place by itself (the runtime does).
    pub strong: Option<i32>,
}

/// The layout, checked once against real values: compiled code only relies on what was
/// observed here.
pub fn layout() -> Layout {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    *LAYOUT.get_or_init(|| {
        let layout = Layout {
            raw_tag: crate::eval::RAW_TAG as i64,
            ptr: 8,
            len: 16,
            cap: 24,
            strong: None,
        };
        let mut items = Vec::with_capacity(7);
        items.extend([11, 22, 33]);
        let expected_ptr = items.as_ptr() as usize;
        let arc = Arc::new(Slot::Raw(RawList::from_vec(items, false)));
        let p = Arc::as_ptr(&arc) as *const u8;
        let read = |offset: i32| -> usize {
            // SAFETY: reads within the slot, which is at least 32 bytes (`Slot::Raw`
            // holds a `u64` tag and a 32-byte `RawList`).
            unsafe { (p.offset(offset as isize) as *const usize).read_unaligned() }
        };
        assert_eq!(
            (
                read(0) as i64,
                read(layout.ptr),
                read(layout.len),
                read(layout.cap)
            ),
            (layout.raw_tag, expected_ptr, 3, 7),
            "the native list layout differs from what the code generator emits"
        );
        // The strong count sits two words before the data in `ArcInner` (`repr(C)` in
        // the standard library); believe it only if it follows clones and drops.
        let strong_at = -16;
        let count = || {
            // SAFETY: the `ArcInner` header precedes the data in the same allocation.
            unsafe { (p.offset(strong_at as isize) as *const usize).read_unaligned() }
        };
        let one = count() == 1;
        let second = arc.clone();
        let two = count() == 2;
        drop(second);
        let strong = (one && two && count() == 1).then_some(strong_at);
        Layout { strong, ..layout }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_code_knows_where_everything_is() {
        let l = layout();
        assert_eq!(
            l.strong,
            Some(-16),
            "appending in place would always call out"
        );
    }

    #[test]
    fn heap_elements_are_held_and_released() {
        let inner = crate::intrinsics::new_obj(Slot::Empty);
        sap_retain(inner);
        let list = RawList::from_vec(vec![inner], true);
        let copy = list.clone();
        drop(list);
        drop(copy);
        // One reference left: ours.
        // SAFETY: `inner` is alive (we hold a reference).
        let arc = unsafe { Arc::from_raw(inner as *const Slot) };
        assert_eq!(Arc::strong_count(&arc), 1);
    }
}
