//! Errors: the library's status code plus its thread-local message.
use crate::sys;
use std::ffi::CStr;
use std::fmt;

/// `Result<T, dds::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

/// The status code of a failed call (`dds_status`). Codes this crate does not know (a newer
/// libdds) are kept as [`ErrorCode::Unknown`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A value breaks a rule (size, stride, enum, range, buffer length, ...).
    InvalidArgument,
    /// A required pointer / buffer is missing.
    NullPointer,
    /// Exceeds a capacity declared when the sampler was created.
    Capacity,
    /// Valid but not supported by this build or backend.
    Unsupported,
    /// The CUDA backend was asked for, but no usable CUDA device exists.
    NoDevice,
    /// A CUDA runtime call failed; the message has its text.
    Cuda,
    /// Allocation failed (only when creating a sampler).
    OutOfMemory,
    /// `struct_size` too small (a bindings bug).
    StructSize,
    /// Debug mode: a per-request array value is out of range.
    InvalidValue,
    /// The sampler is in use by another thread.
    Busy,
    /// A bug in dds.
    Internal,
    /// A status value unknown to these bindings.
    Unknown(u32),
}

impl ErrorCode {
    /// Maps a raw status (`DDS_OK` is not an error and maps to `None`).
    pub fn from_raw(status: sys::dds_status) -> Option<ErrorCode> {
        use sys::dds_status as S;
        Some(match status {
            S::DDS_OK => return None,
            S::DDS_ERR_INVALID_ARGUMENT => ErrorCode::InvalidArgument,
            S::DDS_ERR_NULL_POINTER => ErrorCode::NullPointer,
            S::DDS_ERR_CAPACITY => ErrorCode::Capacity,
            S::DDS_ERR_UNSUPPORTED => ErrorCode::Unsupported,
            S::DDS_ERR_NO_DEVICE => ErrorCode::NoDevice,
            S::DDS_ERR_CUDA => ErrorCode::Cuda,
            S::DDS_ERR_OUT_OF_MEMORY => ErrorCode::OutOfMemory,
            S::DDS_ERR_STRUCT_SIZE => ErrorCode::StructSize,
            S::DDS_ERR_INVALID_VALUE => ErrorCode::InvalidValue,
            S::DDS_ERR_BUSY => ErrorCode::Busy,
            S::DDS_ERR_INTERNAL => ErrorCode::Internal,
            #[allow(clippy::unnecessary_cast)] // c_uint is u32 on the supported targets
            other => ErrorCode::Unknown(other.0 as u32),
        })
    }

    /// The raw status value.
    pub fn to_raw(self) -> sys::dds_status {
        use sys::dds_status as S;
        match self {
            ErrorCode::InvalidArgument => S::DDS_ERR_INVALID_ARGUMENT,
            ErrorCode::NullPointer => S::DDS_ERR_NULL_POINTER,
            ErrorCode::Capacity => S::DDS_ERR_CAPACITY,
            ErrorCode::Unsupported => S::DDS_ERR_UNSUPPORTED,
            ErrorCode::NoDevice => S::DDS_ERR_NO_DEVICE,
            ErrorCode::Cuda => S::DDS_ERR_CUDA,
            ErrorCode::OutOfMemory => S::DDS_ERR_OUT_OF_MEMORY,
            ErrorCode::StructSize => S::DDS_ERR_STRUCT_SIZE,
            ErrorCode::InvalidValue => S::DDS_ERR_INVALID_VALUE,
            ErrorCode::Busy => S::DDS_ERR_BUSY,
            ErrorCode::Internal => S::DDS_ERR_INTERNAL,
            ErrorCode::Unknown(v) => sys::dds_status(v as _),
        }
    }

    /// The library's name of the code (`"DDS_ERR_INVALID_ARGUMENT"`, ...), from
    /// `dds_status_string`.
    pub fn name(self) -> &'static str {
        // Static storage in the library.
        let p = unsafe { sys::dds_status_string(self.to_raw()) };
        if p.is_null() {
            return "DDS_UNKNOWN_STATUS";
        }
        unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("DDS_UNKNOWN_STATUS")
    }
}

/// A failed dds call: the status code and the message that names the argument and the rule it
/// broke (`dds_last_error()`, copied right after the call on the calling thread; or a message
/// of this crate's own length checks, which name the argument the same way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: ErrorCode,
    message: String,
}

impl Error {
    pub(crate) fn new(code: ErrorCode, message: String) -> Error {
        Error { code, message }
    }

    pub(crate) fn invalid(message: String) -> Error {
        Error::new(ErrorCode::InvalidArgument, message)
    }

    /// Reads `dds_last_error()` for a failed status (must run on the thread of the call, before
    /// any other dds call).
    pub(crate) fn from_last(code: ErrorCode) -> Error {
        let p = unsafe { sys::dds_last_error() };
        let message = if p.is_null() {
            String::new()
        } else {
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        Error { code, message }
    }

    /// The status code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message, e.g. `"dds_sample: args->row_stride (100) must be >= vocab_size (1025) or 0"`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Turns a status into `Ok(())` or the error with the thread's last message.
pub(crate) fn check(status: sys::dds_status) -> Result<()> {
    match ErrorCode::from_raw(status) {
        None => Ok(()),
        Some(code) => Err(Error::from_last(code)),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

impl std::error::Error for Error {}
