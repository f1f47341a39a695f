//! A concurrency cap shared by a batch's job bodies (SPEC D41).

use super::*;

/// A per-batch concurrency cap shared by a batch's jobs (SPEC D41): a permit is taken right
/// before a body runs and given back when it returns or unwinds.
#[derive(Debug, Clone)]
pub struct ConcurrencyCap {
    pub(super) inner: Arc<(Mutex<u32>, Condvar)>,
    pub(super) capacity: u32,
}

impl ConcurrencyCap {
    /// A cap of `capacity` bodies at once.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration (capacity)` for 0.
    pub fn new(capacity: u32) -> Result<Self, Error> {
        if capacity == 0 {
            return Err(Error::configuration("capacity"));
        }
        Ok(Self {
            inner: Arc::new((Mutex::new(capacity), Condvar::new())),
            capacity,
        })
    }

    /// The capacity.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Permits free now.
    pub fn available(&self) -> u32 {
        *self.inner.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a permit, runs `body`, gives the permit back on return and on unwind.
    pub fn run<R>(&self, body: impl FnOnce() -> R) -> R {
        let _permit = self.acquire();
        body()
    }

    fn acquire(&self) -> CapPermit<'_> {
        let (lock, cond) = &*self.inner;
        let mut free = lock.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = cond.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        CapPermit { cap: self }
    }
}

struct CapPermit<'a> {
    pub(super) cap: &'a ConcurrencyCap,
}

impl Drop for CapPermit<'_> {
    fn drop(&mut self) {
        let (lock, cond) = &*self.cap.inner;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        cond.notify_one();
    }
}
