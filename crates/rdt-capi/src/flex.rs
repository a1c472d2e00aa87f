//! A structure followed by a flexible array member (`struct pqos_cap`, `pqos_cap_mon`,
//! `pqos_cpuinfo`), in one allocation the library owns until `pqos_fini`.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::marker::PhantomData;
use std::ptr::NonNull;

/// `H` followed by `len` `T`s, laid out as C lays out `struct { ...; T items[]; }`: the
/// items start at `size_of::<H>()` (H ends with a `[T; 0]` member, so its size is rounded
/// to T's alignment and that is C's `offsetof(items)`).
pub(crate) struct Flex<H: Copy, T: Copy> {
    ptr: NonNull<H>,
    layout: Layout,
    _owns: PhantomData<(H, T)>,
}

impl<H: Copy, T: Copy> Flex<H, T> {
    /// `header` and `items`, copied into a new allocation.
    ///
    /// # Panics
    /// If the size overflows `isize` (not for any platform's counts) or memory runs out.
    pub(crate) fn new(header: H, items: &[T]) -> Self {
        assert!(
            align_of::<T>() <= align_of::<H>(),
            "items aligned by the header"
        );
        let size = size_of::<H>()
            .checked_add(size_of::<T>().checked_mul(items.len()).expect("size"))
            .expect("size");
        let layout = Layout::from_size_align(size, align_of::<H>()).expect("layout");
        // SAFETY: `layout` has a non-zero size (H holds at least one field).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<H>()) else {
            std::alloc::handle_alloc_error(layout)
        };
        // SAFETY: `ptr` is a fresh allocation of `layout`, aligned for H, with room for H
        // and then `items.len()` Ts at `size_of::<H>()`, which is a multiple of T's alignment.
        unsafe {
            ptr.as_ptr().write(header);
            let first = raw.add(size_of::<H>()).cast::<T>();
            std::ptr::copy_nonoverlapping(items.as_ptr(), first, items.len());
        }
        Self {
            ptr,
            layout,
            _owns: PhantomData,
        }
    }

    /// The structure, for C.
    pub(crate) const fn as_ptr(&self) -> *mut H {
        self.ptr.as_ptr()
    }
}

impl<H: Copy, T: Copy> Drop for Flex<H, T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; H and T are Copy (nothing to drop).
        unsafe { dealloc(self.ptr.as_ptr().cast(), self.layout) };
    }
}

// SAFETY: a Flex owns its allocation (plain data) like a Box does.
unsafe impl<H: Copy, T: Copy> Send for Flex<H, T> {}
