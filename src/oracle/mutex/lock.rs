//! The mutexes a baseline engine can use.

/// The mutex a baseline engine uses. Implemented by [`StdMutex`] and [`ParkingLotMutex`].
pub trait BaselineLock: Send + Sync + 'static {
    /// The mutex type holding a `T`.
    type Mutex<T: Send>: Send + Sync;
    /// Wraps `value`.
    fn new<T: Send>(value: T) -> Self::Mutex<T>;
    /// Runs `f` with the lock held.
    fn with<T: Send, R>(m: &Self::Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R;
}

/// Baseline with [`std::sync::Mutex`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StdMutex;

impl BaselineLock for StdMutex {
    type Mutex<T: Send> = std::sync::Mutex<T>;
    fn new<T: Send>(value: T) -> Self::Mutex<T> {
        std::sync::Mutex::new(value)
    }
    fn with<T: Send, R>(m: &Self::Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
        // A panic while holding the lock leaves the class state as consistent as the panicking
        // operation left it; keep serving rather than poisoning every later caller.
        let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }
}

/// Baseline with [`parking_lot::Mutex`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ParkingLotMutex;

impl BaselineLock for ParkingLotMutex {
    type Mutex<T: Send> = parking_lot::Mutex<T>;
    fn new<T: Send>(value: T) -> Self::Mutex<T> {
        parking_lot::Mutex::new(value)
    }
    fn with<T: Send, R>(m: &Self::Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut m.lock())
    }
}
