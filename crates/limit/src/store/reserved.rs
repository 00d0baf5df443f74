//! Memory for a fixed count of values, reserved at once and never moved, so that readers
//! without a lock may hold references into it while values are written further on. Values
//! are written one at a time; the memory is freed on drop without dropping them (the owner
//! knows which it wrote).

use std::alloc::{self, Layout};
use std::ptr::NonNull;

pub(super) struct Reserved<T> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: `Reserved` owns its values as a `Box<[T]>` would.
unsafe impl<T: Send> Send for Reserved<T> {}
// SAFETY: shared access hands out only `&T` (writes need the caller's promise that no
// reader can reach the slot yet).
unsafe impl<T: Sync> Sync for Reserved<T> {}

impl<T> Reserved<T> {
    /// Room for `len` values (at least one), none written. Untouched pages cost address
    /// space only.
    pub fn new(len: usize) -> Reserved<T> {
        let len = len.max(1);
        let layout = Self::layout(len);
        assert!(layout.size() > 0, "no zero-sized values");
        // SAFETY: the layout has a non-zero size (checked).
        let raw = unsafe { alloc::alloc(layout) }.cast::<T>();
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Reserved { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::array::<T>(len).expect("a reservation within the address space")
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Writes `value` at `i`, in bounds (checked).
    ///
    /// # Safety
    /// No value was written at `i` yet (it would leak), and no reader can reach `i` until
    /// this returns.
    pub unsafe fn write(&self, i: usize, value: T) {
        assert!(i < self.len, "write past the reservation");
        // SAFETY: in bounds; the caller's promise that nothing reads it meanwhile.
        unsafe { self.ptr.as_ptr().add(i).write(value) }
    }

    /// The value at `i`.
    ///
    /// # Safety
    /// A value was written at `i`.
    #[inline]
    pub unsafe fn get(&self, i: usize) -> &T {
        debug_assert!(i < self.len);
        // SAFETY: the caller's promise: written, so in bounds and initialised.
        unsafe { &*self.ptr.as_ptr().add(i) }
    }

    /// Drops the value at `i`.
    ///
    /// # Safety
    /// A value was written at `i`, and is not used after.
    pub unsafe fn drop_at(&mut self, i: usize) {
        debug_assert!(i < self.len);
        // SAFETY: the caller's promise; `&mut self` rules out readers.
        unsafe { self.ptr.as_ptr().add(i).drop_in_place() }
    }
}

impl<T> Drop for Reserved<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr().cast(), Self::layout(self.len)) }
    }
}
