//! Device buffers and streams for the CUDA backend, as small traits in the spirit of cudarc's
//! `DevicePtr` / `DevicePtrMut` (without depending on cudarc).
use crate::sys;
use std::marker::PhantomData;

/// A buffer of `len()` elements of `T` in CUDA device (or managed) memory.
///
/// Implement it for your framework's device buffer type (or wrap a raw pointer in a
/// [`DeviceSlice`]).
///
/// # Safety
/// `device_ptr()` must return the address of at least `len()` properly aligned elements of `T`
/// in device or managed memory, which stays allocated while the implementing value is borrowed.
pub unsafe trait DevicePtr<T> {
    /// Device address of the first element.
    fn device_ptr(&self) -> *const T;
    /// Number of elements.
    fn len(&self) -> usize;
    /// `len() == 0`.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A device buffer that dds may write (outputs).
///
/// # Safety
/// As for [`DevicePtr`]; `device_ptr_mut()` returns the same address, writable.
pub unsafe trait DevicePtrMut<T>: DevicePtr<T> {
    /// Device address of the first element, for writing.
    fn device_ptr_mut(&mut self) -> *mut T;
}

/// A CUDA stream (`cudaStream_t` / `CUstream`), the stream the work is queued on.
///
/// # Safety
/// `raw_stream()` must return a valid stream of the sampler's device (or null, the legacy
/// default stream) that outlives the queued work.
pub unsafe trait Stream {
    /// The raw `cudaStream_t`.
    fn raw_stream(&self) -> sys::dds_stream;
}

/// A raw device pointer and a length: the bridge from any framework (cudarc's
/// `CudaSlice::device_ptr()`, torch's `data_ptr()`, a `cudaMalloc` result) to dds.
#[derive(Debug)]
pub struct DeviceSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T> DeviceSlice<'a, T> {
    /// Wraps `len` elements at device address `ptr`.
    ///
    /// # Safety
    /// `ptr` must point to `len` elements of `T` in device or managed memory of the sampler's
    /// device, allocated for `'a` (and, for work queued on a stream, until that work completes),
    /// and not used concurrently in a conflicting way (no one else writes what dds reads, and
    /// nothing reads or writes what dds writes, until the queued work completes).
    pub unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        DeviceSlice { ptr, len, _borrow: PhantomData }
    }

    /// Same, from a device address as an integer (cudarc's `CUdeviceptr`, torch's `data_ptr()`).
    ///
    /// # Safety
    /// As for [`DeviceSlice::from_raw_parts`].
    pub unsafe fn from_address(address: u64, len: usize) -> Self {
        DeviceSlice { ptr: address as usize as *mut T, len, _borrow: PhantomData }
    }
}

unsafe impl<'a, T> DevicePtr<T> for DeviceSlice<'a, T> {
    fn device_ptr(&self) -> *const T {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

unsafe impl<'a, T> DevicePtrMut<T> for DeviceSlice<'a, T> {
    fn device_ptr_mut(&mut self) -> *mut T {
        self.ptr
    }
}

/// A raw `cudaStream_t`.
#[derive(Clone, Copy, Debug)]
pub struct RawStream(sys::dds_stream);

impl RawStream {
    /// The legacy default stream (null).
    pub fn null() -> RawStream {
        RawStream(std::ptr::null_mut())
    }

    /// Wraps a `cudaStream_t` / `CUstream` (cudarc's `CudaStream::cu_stream()`, torch's
    /// `cuda_stream`).
    ///
    /// # Safety
    /// `stream` must be a valid stream of the sampler's device (or null) for as long as work
    /// queued on it through dds runs.
    pub unsafe fn from_raw(stream: *mut std::ffi::c_void) -> RawStream {
        RawStream(stream as sys::dds_stream)
    }

    /// The raw handle.
    pub fn as_raw(&self) -> sys::dds_stream {
        self.0
    }
}

unsafe impl Stream for RawStream {
    fn raw_stream(&self) -> sys::dds_stream {
        self.0
    }
}
