//! Heap objects: what a sap value that is not a plain number is in native code, and the
//! one module of the crate where raw pointers are read and written.
//!
//! # Safety contract
//!
//! **Words.** In native code every value is one `i64` word: `()` is 0, Booleans 0 or 1,
//! integers sign-extended, `f64` its bits, enum values their variant index, and every
//! other type (strings, lists, structs, options, JSON, tools, contexts) an *object word*:
//! 0 ("no value yet") or the address of an [`Object`] made by [`ObjRef::new`].
//!
//! **Layout.** An `Object` is `repr(C)`, aligned to a 64-byte cache line: a reference
//! count (`AtomicUsize`, at [`layout::COUNT`]) followed by a [`Slot`]. `Slot` is `repr(u64)`, so its tag comes first
//! (at [`layout::TAG`]) and a variant's fields follow as a `repr(C)` struct; a native list
//! ([`Slot::Raw`], tag [`layout::RAW_TAG`]) is a [`RawList`] whose buffer, length and
//! capacity compiled code reads at [`layout::ITEMS`], [`layout::LEN`] and [`layout::CAP`].
//! These offsets are derived from the type definitions here (`offset_of!`) and checked
//! against real objects by a test; the code generator reads them from [`layout`] and
//! from nowhere else. No other crate's private layout is relied on.
//!
//! **Ownership.** Each holder of an object word — a variable or temporary of compiled
//! code, a native list's element, an [`ObjRef`], the compiler's constant pool — owns one
//! count. [`retain`] adds one and [`release`] gives one back; the holder that gives back
//! the last one frees the object (its `Slot` is dropped, then the allocation, both here).
//! Counts are atomic (release ordering on decrement, an acquire fence before freeing),
//! as `Arc`'s, because `parallel for` shares objects between threads.
//!
//! **Mutation.** An object is immutable while more than one holder has it. Only the
//! sole holder (count 1) may change it: [`ObjRef::get_mut`] here, and compiled code's
//! in-place `push`/`set` on a native list, which check the count inline before writing
//! the buffer, length or element.
//!
//! **What compiled code may assume.** The offsets in [`layout`]; that an object word it
//! holds stays valid until it releases it; that a native list's buffer holds `len`
//! initialized words and room for `cap`, and that the elements of a list whose element
//! type is a heap type are object words the list owns.
//!
//! **What this module assumes.** Every word the runtime receives from compiled code as
//! a heap-typed value (an argument, a result, an element of a native list, an entry of a
//! [`Words`] array) is 0 or a live object word — the code generator's invariant. Safe
//! functions taking a word ([`borrow`], [`ObjRef::take`], [`to_value`]) rely on it; the
//! rest of the crate passes them only such words. The crate denies `unsafe_code`
//! everywhere but this module's parent, `raw`, whose other part calls compiled functions.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex};

use ir::Type;
use runtime::{Context, TypeDesc, Value};

use crate::host::Host;

/// A value at run time: a sap value, a context, what an LLM fill or choice returned, or
/// a list built by compiled code. The evaluator uses it as its value type too. The
/// layout is fixed (`repr(u64)`: a tag, then the variant's fields) because compiled code
/// reads native lists in place.
#[derive(Clone, Debug)]
#[repr(u64)]
pub enum Slot {
    Empty = 0,
    Val(Value) = 1,
    Ctx(Context) = 2,
    /// Filled arguments, with the chosen arm for a `select`.
    Pack(Option<usize>, Arc<Vec<Value>>) = 3,
    /// A list as compiled code builds it; the evaluator never makes one.
    Raw(RawList) = 4,
}

impl Slot {
    /// The sap value, or `()` for anything else.
    pub fn val(&self) -> &Value {
        match self {
            Slot::Val(v) => v,
            _ => &Value::Unit,
        }
    }
}

const _: () = assert!(
    std::mem::size_of::<Object>() == 64,
    "an object is one cache line"
);

/// A reference-counted heap object: the count, then the slot. Aligned to a cache line
/// so that the parts compiled code reads (count, tag, buffer, length, capacity) share
/// one line: with 48-byte objects packed back to back, every other object straddled two
/// lines, and walking many small lists (`toposort`) was measurably slower.
#[repr(C, align(64))]
pub struct Object {
    count: AtomicUsize,
    slot: Slot,
    /// Where the value came from when that is untrusted data: an index into
    /// [`ORIGINS`], or 0 (see [`origin`]). In the cache line's padding.
    origin: AtomicU32,
}

/// The untrusted sources seen in this process, by origin index less one (`mcp:inbox/
/// read_mail`, `std:fs/read`, …).
static ORIGINS: Mutex<Vec<Arc<str>>> = Mutex::new(Vec::new());
/// Whether any object has been marked: until then nothing looks at origins, so a
/// program that reads no untrusted data pays nothing for them.
static MARKED: AtomicBool = AtomicBool::new(false);

/// The origin index of the untrusted source `label`.
pub fn origin_id(label: &str) -> u32 {
    let mut origins = ORIGINS.lock().unwrap_or_else(|e| e.into_inner());
    let at = match origins.iter().position(|o| &**o == label) {
        Some(at) => at,
        None => {
            origins.push(label.into());
            origins.len() - 1
        }
    };
    u32::try_from(at + 1).unwrap_or(u32::MAX)
}

/// The label of origin index `id` (not 0).
pub fn origin_label(id: u32) -> Option<Arc<str>> {
    let origins = ORIGINS.lock().unwrap_or_else(|e| e.into_inner());
    origins
        .get(usize::try_from(id).ok()?.checked_sub(1)?)
        .cloned()
}

/// Whether anything has been marked in this process.
pub fn any_marked() -> bool {
    MARKED.load(Ordering::Relaxed)
}

/// The origin index of the object `word` (0: trusted, or not an object).
pub fn origin(word: i64) -> u32 {
    if !MARKED.load(Ordering::Relaxed) {
        return 0;
    }
    // SAFETY: by the contract, a nonzero object word points to a live `Object`.
    NonNull::new(word as *mut Object).map_or(0, |p| unsafe {
        (*p.as_ptr()).origin.load(Ordering::Relaxed)
    })
}

/// Marks `word`, a value of type `ty`, as coming from origin `id` when it is an object
/// (a number or a flag cannot carry a mark).
pub fn mark_value(ty: &Type, word: i64, id: u32) {
    if ty.is_heap() {
        mark(word, id);
    }
}

/// Marks the object `word` as coming from origin `id` (0 leaves it as it is).
pub fn mark(word: i64, id: u32) {
    if id == 0 {
        return;
    }
    if let Some(p) = NonNull::new(word as *mut Object) {
        MARKED.store(true, Ordering::Relaxed);
        // SAFETY: as in `origin`.
        unsafe { (*p.as_ptr()).origin.store(id, Ordering::Relaxed) };
    }
}

/// The origin of a value of type `ty` held in `word`, looking inside native lists
/// (whose elements compiled code appends without touching the list's own mark).
pub fn deep_origin(ty: &Type, word: i64) -> u32 {
    if !MARKED.load(Ordering::Relaxed) || !ty.is_heap() {
        return 0;
    }
    let own = origin(word);
    if own != 0 {
        return own;
    }
    match (ty, borrow(word)) {
        (Type::List(elem), Some(Slot::Raw(items))) if elem.is_heap() => items
            .as_slice()
            .iter()
            .map(|&w| deep_origin(elem, w))
            .find(|&o| o != 0)
            .unwrap_or(0),
        _ => 0,
    }
}

/// Where compiled code finds the parts of an object, relative to its word.
pub mod layout {
    use std::mem::offset_of;

    use super::{Object, RawList};

    /// The reference count.
    pub const COUNT: i32 = offset_of!(Object, count) as i32;
    /// The tag of the slot.
    pub const TAG: i32 = offset_of!(Object, slot) as i32;
    /// The tag of a native list ([`super::Slot::Raw`]).
    pub const RAW_TAG: i64 = 4;
    /// A `repr(u64)` enum's variant fields start after the 8-byte tag.
    const RAW: i32 = TAG + 8;
    /// A native list's element buffer, length and capacity.
    pub const ITEMS: i32 = RAW + offset_of!(RawList, ptr) as i32;
    pub const LEN: i32 = RAW + offset_of!(RawList, len) as i32;
    pub const CAP: i32 = RAW + offset_of!(RawList, cap) as i32;
}

/// One owned count of an object: dropping it releases the count.
pub struct ObjRef(NonNull<Object>);

// SAFETY: the slot's contents are `Send + Sync` (`RawList` below); the count is atomic,
// and the slot is changed only through the sole count (`get_mut`).
unsafe impl Send for ObjRef {}
unsafe impl Sync for ObjRef {}

impl ObjRef {
    /// A new object holding `slot`, with one count: this one.
    pub fn new(slot: Slot) -> ObjRef {
        let object = Box::new(Object {
            count: AtomicUsize::new(1),
            slot,
            origin: AtomicU32::new(0),
        });
        ObjRef(NonNull::from(Box::leak(object)))
    }

    /// Takes over the count that `word` (an object word, see the contract) carries.
    pub fn take(word: i64) -> Option<ObjRef> {
        NonNull::new(word as *mut Object).map(ObjRef)
    }

    /// The word, with this count: the caller owns it now.
    pub fn into_word(self) -> i64 {
        std::mem::ManuallyDrop::new(self).word()
    }

    /// The word, without a count of its own.
    pub fn word(&self) -> i64 {
        self.0.as_ptr() as i64
    }

    /// The slot, to change, when this is the only count.
    pub fn get_mut(&mut self) -> Option<&mut Slot> {
        if self.object().count.load(Ordering::Acquire) != 1 {
            return None;
        }
        // SAFETY: the object is alive (we hold a count); with the only count, nothing
        // else can read or write it until we give it up, and `&mut self` keeps it ours.
        Some(unsafe { &mut self.0.as_mut().slot })
    }

    /// How many counts the object has (for tests).
    #[cfg(test)]
    fn count(&self) -> usize {
        self.object().count.load(Ordering::Acquire)
    }

    fn object(&self) -> &Object {
        // SAFETY: the object is alive while we hold a count.
        unsafe { self.0.as_ref() }
    }
}

impl std::ops::Deref for ObjRef {
    type Target = Slot;

    fn deref(&self) -> &Slot {
        &self.object().slot
    }
}

impl Clone for ObjRef {
    fn clone(&self) -> ObjRef {
        retain(self.word());
        ObjRef(self.0)
    }
}

impl Drop for ObjRef {
    fn drop(&mut self) {
        release(self.word());
    }
}

/// A new object holding `slot`, as an owned word.
pub fn new_obj(slot: Slot) -> i64 {
    ObjRef::new(slot).into_word()
}

/// The slot of an object word the caller holds a count of (see the contract), or `None`
/// for 0. It stays valid while the caller keeps its count.
pub fn borrow<'a>(word: i64) -> Option<&'a Slot> {
    // SAFETY: by the contract, a nonzero object word points to a live `Object`, kept
    // alive by the caller's count.
    NonNull::new(word as *mut Object).map(|p| unsafe { &(*p.as_ptr()).slot })
}

/// Adds a count to an object word (0 is left alone). Compiled code calls it directly.
pub extern "C" fn retain(word: i64) {
    if let Some(object) = borrow_object(word) {
        // As `Arc::clone`: a new count is made from an existing one, so no ordering is
        // needed; a count past `isize::MAX` means a leak of that size, and aborts.
        if object.count.fetch_add(1, Ordering::Relaxed) > isize::MAX as usize {
            std::process::abort();
        }
    }
}

/// Gives back a count of an object word (0 is left alone), freeing the object with the
/// last one. Compiled code calls it directly.
pub extern "C" fn release(word: i64) {
    let Some(object) = borrow_object(word) else {
        return;
    };
    // As `Arc::drop`: every use of the object happens before the free.
    if object.count.fetch_sub(1, Ordering::Release) != 1 {
        return;
    }
    fence(Ordering::Acquire);
    // SAFETY: that was the last count; the object came from `Box::leak` in `ObjRef::new`,
    // and nobody can reach it any more.
    drop(unsafe { Box::from_raw(word as *mut Object) });
}

fn borrow_object<'a>(word: i64) -> Option<&'a Object> {
    // SAFETY: as `borrow`.
    NonNull::new(word as *mut Object).map(|p| unsafe { &*p.as_ptr() })
}

/// An array of words compiled code passes to the runtime (the arguments of a host call,
/// the elements of a list literal, a struct's fields, a `parallel for`'s captures): the
/// address of `n` words in its stack frame, `n` known from the call's descriptor. It
/// has no constructor: only compiled code makes one.
#[repr(transparent)]
pub struct Words(*const i64);

impl Words {
    /// The `n` words (as many as the descriptor of the call says compiled code stored).
    pub fn get(&self, n: usize) -> &[i64] {
        if n == 0 {
            return &[];
        }
        // SAFETY: compiled code passes the address of `n` initialized words that stay put
        // for the duration of the call, which `&self` does not outlive.
        unsafe { std::slice::from_raw_parts(self.0, n) }
    }
}

/// Native lists: what compiled code builds for `List<T>`. Every element is the native
/// word of its type — an integer, a float's bits, a Boolean, a variant index, or an
/// object word the list owns — stored contiguously, so compiled code indexes, measures
/// and appends without calling into the runtime.
///
/// A list value in native code is either this ([`Slot::Raw`]) or a runtime
/// `Value::List` (what came from the host: a field, a builtin's result, a model's
/// answer); every operation accepts both, and only crossing into the host converts.
#[repr(C)]
pub struct RawList {
    ptr: *mut i64,
    len: usize,
    cap: usize,
    /// Whether the elements are object words this list holds a count of.
    heap: bool,
}

// SAFETY: the buffer is owned; heap elements are counted object words, whose objects are
// `Send + Sync` (`ObjRef`). Mutation happens only through `&mut` (the sole count).
unsafe impl Send for RawList {}
unsafe impl Sync for RawList {}

impl RawList {
    /// A list of `items`, whose counts (for heap elements) it takes over.
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
        // SAFETY: `ptr` and `len` describe the initialized part of a `Vec<i64>` buffer
        // (compiled code keeps `len` so when it appends in place).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Appends `item`, taking over its count.
    pub fn push(&mut self, item: i64) {
        // The list holds an empty buffer while the `Vec` grows, so nothing is freed
        // twice even if growing fails.
        let heap = self.heap;
        let mut items = std::mem::replace(self, RawList::from_vec(Vec::new(), heap)).into_vec();
        items.push(item);
        *self = RawList::from_vec(items, heap);
    }

    /// Whether the elements are object words the list holds counts of.
    pub fn heap(&self) -> bool {
        self.heap
    }

    pub fn as_mut_slice(&mut self) -> &mut [i64] {
        // SAFETY: as `as_slice`, through the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The elements, with their counts.
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
                retain(*p);
            }
        }
        RawList::from_vec(items, self.heap)
    }
}

impl Drop for RawList {
    fn drop(&mut self) {
        if self.heap {
            for p in self.as_slice() {
                release(*p);
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

/// A native word of type `ty` as a sap value (the word stays the caller's).
pub fn to_value(host: &Host, ty: &Type, word: i64) -> Value {
    match ty {
        Type::Unit => Value::Unit,
        Type::Bool => Value::Bool(word != 0),
        Type::I32 | Type::I64 => Value::Int(word),
        Type::F64 => Value::Float(f64::from_bits(word as u64)),
        Type::Enum(id) => match host.types.get(*id as usize) {
            Some(TypeDesc::Enum(e)) => Value::Enum {
                ty: e.clone(),
                variant: word as u32,
            },
            _ => Value::Int(word),
        },
        // Heap-typed words are object words.
        _ => match borrow(word) {
            Some(Slot::Val(v)) => v.clone(),
            Some(Slot::Raw(list)) => {
                let Type::List(elem) = ty else {
                    return Value::Unit;
                };
                Value::List(Arc::new(
                    list.as_slice()
                        .iter()
                        .map(|x| to_value(host, elem, *x))
                        .collect(),
                ))
            }
            _ => Value::Unit,
        },
    }
}

/// A sap value as a native word of type `ty` (an owned object word for heap types).
pub fn from_value(ty: &Type, v: Value) -> i64 {
    match (ty, &v) {
        (Type::Unit, _) => 0,
        (Type::Bool, Value::Bool(b)) => *b as i64,
        (Type::I32 | Type::I64, Value::Int(n)) => *n,
        (Type::F64, Value::Float(x)) => x.to_bits() as i64,
        (Type::Enum(_), Value::Enum { variant, .. }) => *variant as i64,
        _ if ty.is_heap() => new_obj(Slot::Val(v)),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the word at `offset` from the object `word`.
    fn read(word: i64, offset: i32) -> i64 {
        // SAFETY: the tests read within a live object.
        unsafe { ((word + offset as i64) as *const i64).read() }
    }

    #[test]
    fn an_object_fills_one_cache_line() {
        assert_eq!(std::mem::size_of::<Object>(), 64);
    }

    #[test]
    fn compiled_code_knows_where_everything_is() {
        let mut items = Vec::with_capacity(7);
        items.extend([11, 22, 33]);
        let buffer = items.as_ptr() as i64;
        let list = ObjRef::new(Slot::Raw(RawList::from_vec(items, false)));
        let w = list.word();
        assert_eq!(
            [
                read(w, layout::COUNT),
                read(w, layout::TAG),
                read(w, layout::ITEMS),
                read(w, layout::LEN),
                read(w, layout::CAP),
            ],
            [1, layout::RAW_TAG, buffer, 3, 7],
        );
        let copy = list.clone();
        assert_eq!(read(w, layout::COUNT), 2);
        drop(copy);
        assert_eq!(read(w, layout::COUNT), 1);
    }

    #[test]
    fn heap_elements_are_held_and_released() {
        let inner = ObjRef::new(Slot::Empty);
        retain(inner.word());
        let list = RawList::from_vec(vec![inner.word()], true);
        let copy = list.clone();
        drop(list);
        drop(copy);
        // One count left: ours.
        assert_eq!(inner.count(), 1);
    }

    #[test]
    fn only_the_sole_holder_may_change_an_object() {
        let mut a = ObjRef::new(Slot::Empty);
        let b = a.clone();
        assert!(a.get_mut().is_none());
        drop(b);
        assert!(a.get_mut().is_some());
    }
}
